/*
 * bbc_compile_fixture.c — compiles a recorded model, or one of the fixture
 * programs of tests/unit/bbc_programs.h, with bbc_compile and the in-process
 * fixture component types of tests/unit/bbc_fixture.h (bbc_compiled.sh
 * builds and runs it; split learning binds types no plugin exports).
 *
 *   bbc_compile_fixture (IN.onnx | --program NAME) OUT.onnx [SLOT=TYPE_NAME]...
 *
 * Exit 0, 1 on a failure (printed like bbc), 2 on bad usage.
 */
#include <stdio.h>

#include "tests/unit/bbc_fixture.h"
#include "tests/unit/bbc_programs.h"

int main(int argc, char **argv)
{
    const char *program = argc > 2 && strcmp(argv[1], "--program") == 0 ? argv[2] : NULL;
    if (program) {
        argv += 1; /* argv[1] is now the program name, in place of IN.onnx */
        argc -= 1;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: %s (IN.onnx | --program NAME) OUT.onnx [SLOT=TYPE_NAME]...\n",
                argv[0]);
        return 2;
    }
    bb_model *m = NULL, *out = NULL;
    bb_error e = {0};
    bbc_error ce = {0};
    bbc_bindings b;
    int status = 1;
    if (bbc_bindings_init(&b) != BB_OK)
        return 1;
    for (int i = 3; i < argc; i++)
        if (bbc_bindings_add_arg(&b, argv[i], &e) != BB_OK)
            goto fail;
    if (program ? !(m = fx_program(program, &e)) : bb_model_load_file(argv[1], &m, &e) != BB_OK)
        goto fail;
    bb_type_array arr;
    bb_type_source ts;
    fx_types(&ts, &arr);
    if (bbc_compile(m, NULL, &b, &ts, NULL, 0, &out, &ce) != BB_OK) {
        bbc_error_print(&ce, stderr);
        goto done;
    }
    if (bb_model_save_file(out, argv[2], &e) != BB_OK)
        goto fail;
    status = 0;
    goto done;
fail:
    fprintf(stderr, "bbc_compile_fixture: error: %s\n", e.msg);
done:
    bb_model_free(out);
    bb_model_free(m);
    bbc_bindings_free(&b);
    return status;
}
