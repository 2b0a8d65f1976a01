/*
 * test_compile_codec.c — the compiler's wire-edge storage check against the
 * real codec plugin (codec.so, through the plugin loader as bbc reads it):
 *
 *   class Sender:   acts = Model.Params(); net_out("acts", Sample(Receiver), acts)
 *   class Receiver: t = Codec.Decompress(lookup_output("acts")); AppEmit(t)
 *
 * The receiver's port takes what its codec decodes (tensor_u8 for
 * Int8Affine), so an f32 tensor sent to it fails with
 * IncompatibleStorageOnEdge naming the codecs whose Compress bridges f32 to
 * u8; once the sender records Compress on a codec slot and binds one, the
 * program compiles. A codec of the wrong Out type (F16 into a u8 port) is
 * refused the same way.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <string.h>

#include "bb/recorder.h"
#include "bbc/compiler.h"
#include "support/plugin_fixtures.h"

/* The program; the sender compresses on its codec slot when `compress`.
 * The receiver decompresses what arrives when port_type is NULL (its port
 * then takes what its Decompress takes), else emits it as it is, from a
 * port declared port_type. */
static bb_model *record(bool compress, const bb_type_node *port_type)
{
    bb_recorder *r = bb_recorder_new("user.app");
    bb_module *root = bb_rec_module(r, "Edge");

    bb_module *snd = bb_rec_class_module(r, "Sender");
    bb_slot *model = bb_rec_concrete(snd, BB_ROLE_MODEL, "model", "nn::Mlp",
                                     "{\"layers\": [4, 3]}", NULL);
    bb_slot *sel = bb_rec_concrete(snd, BB_ROLE_PEER_SELECTOR, "selector", "peers::Connected",
                                   "{}", NULL);
    bb_rec_concrete(snd, BB_ROLE_DATA_SOURCE, "data", "data::Synthetic", "{}", NULL); /* Mlp's */
    bb_slot *scodec = compress ? bb_rec_generic(snd, BB_ROLE_CODEC, "codec") : NULL;
    bb_rec *g = bb_module_body(snd);
    bb_val acts = bb_role_model_params(g, model); /* an f32 tensor */
    if (compress)
        acts = bb_role_compressor_compress(g, scodec, acts);
    bb_rec_net_out(g, "acts", bb_role_peer_selector_sample(g, sel, 1, "Receiver"), acts);

    bb_module *rcv = bb_rec_class_module(r, "Receiver");
    bb_slot *rcodec = port_type ? NULL : bb_rec_generic(rcv, BB_ROLE_CODEC, "codec");
    bb_rec *h = bb_module_body(rcv);
    bb_val got = bb_rec_lookup_output(h, "acts", port_type);
    bb_sys_app_emit(h, rcodec ? bb_role_compressor_decompress(h, rcodec, got) : got, "acts");

    bb_rec *top = bb_module_body(root);
    bb_call_build(bb_rec_call(top, snd));
    bb_call_build(bb_rec_call(top, rcv));
    bb_model *m = NULL;
    bb_error err = {0};
    if (bb_recorder_build(r, root, &m, &err))
        fail_msg("record: %s", err.msg);
    bb_recorder_free(r);
    return m;
}

/* Compiles m with codec=type_name bound; the error is left in *err. */
static int compile(bb_model *m, const char *type_name, bbc_error *err)
{
    bb_type_source ts;
    bb_type_source_from_loader(&ts, pfx_loader(), NULL);
    bbc_bindings b;
    bb_error be = {0};
    assert_int_equal(bbc_bindings_init(&b), BB_OK);
    assert_int_equal(bbc_bindings_add(&b, "codec", type_name, NULL, "test", &be), BB_OK);
    bb_model *out = NULL;
    int rc = bbc_compile(m, NULL, &b, &ts, NULL, 0, &out, err);
    bb_model_free(out);
    bbc_bindings_free(&b);
    bb_model_free(m);
    return rc;
}

static void test_codec_f32_into_u8_port_is_refused(void **state)
{
    (void)state;
    bbc_error err = {0};
    assert_int_not_equal(compile(record(false, NULL), "codec::Int8Affine", &err), BB_OK);
    assert_int_equal(err.kind, BBC_E_INCOMPATIBLE_STORAGE_ON_EDGE);
    printf("bbc: error: %s: %s: %s\n", err.pass, bbc_errkind_name(err.kind), err.msg);
    assert_non_null(strstr(err.msg, "port 'acts'"));
    assert_non_null(strstr(err.msg, "is tensor_f32"));
    assert_non_null(strstr(err.msg, "is tensor_u8"));
    /* the codecs whose Compress takes f32 to u8, and what to do with them */
    assert_non_null(strstr(err.msg, "codec::Int8Affine, codec::ProductQuantization or "
                                    "codec::TopK"));
    assert_non_null(strstr(err.msg, "record its Compress on the sender"));
    assert_null(strstr(err.msg, "codec::F16")); /* its Out is f16 */
}

static void test_codec_bound_on_both_ends_compiles(void **state)
{
    (void)state;
    const char *codecs[] = {"codec::Int8Affine", "codec::TopK", "codec::ProductQuantization",
                            "codec::F16"};
    for (size_t i = 0; i < sizeof codecs / sizeof *codecs; i++) {
        bbc_error err = {0};
        if (compile(record(true, NULL), codecs[i], &err))
            fail_msg("%s: %s: %s: %s", codecs[i], err.pass, bbc_errkind_name(err.kind),
                     err.msg);
    }
}

/* F16's code is f16: into a port declared u8 it is refused, and no codec
 * takes f16 to u8 (nor does any Decompress), so the generic remedy shows;
 * an f32 tensor into a port declared f16 names F16. */
static void test_codec_wrong_out_type_is_refused(void **state)
{
    (void)state;
    bbc_error err = {0};
    bb_model *m = record(true, &BB_TYPE_TENSOR_U8);
    assert_int_not_equal(compile(m, "codec::F16", &err), BB_OK);
    assert_int_equal(err.kind, BBC_E_INCOMPATIBLE_STORAGE_ON_EDGE);
    assert_non_null(strstr(err.msg, "is tensor_f16"));
    assert_non_null(strstr(err.msg, "is tensor_u8"));
    assert_non_null(strstr(err.msg, "bind a Codec slot and record Compress"));
    assert_int_not_equal(compile(record(false, &BB_TYPE_TENSOR_F16), "codec::F16", &err), BB_OK);
    assert_int_equal(err.kind, BBC_E_INCOMPATIBLE_STORAGE_ON_EDGE);
    assert_non_null(strstr(err.msg, "(codec::F16) and record its Compress on the sender"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codec_f32_into_u8_port_is_refused),
        cmocka_unit_test(test_codec_bound_on_both_ends_compiles),
        cmocka_unit_test(test_codec_wrong_out_type_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, pfx_group_teardown);
}
