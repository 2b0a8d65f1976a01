/*
 * write_full_model.c — used by onnx_schema.sh: writes the every-field test
 * model (tests/unit/support/model_fixture.c) with bb_model_save_file, so
 * the schema checks see a file that uses every IR field even before any
 * example model exists. Usage: write_full_model OUT.onnx
 */
#include <stdio.h>

#include "bb/model_io.h"
#include "tests/unit/support/model_fixture.h"

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s OUT.onnx\n", argv[0]);
        return 2;
    }
    bb_model *m = bb_test_model_full();
    if (!m) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    bb_error err = {0};
    int rc = bb_model_save_file(m, argv[1], &err);
    if (rc)
        fprintf(stderr, "%s\n", err.msg);
    bb_model_free(m);
    return rc ? 1 : 0;
}
