/*
 * test_pass_analyze_wire_edges.c — data vs trigger_only classification of
 * matched edges and one-sided wire ops, wire_correlation defaults and the
 * wire_batch grouping of sends by destination class.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "bbc_fixture.h"

typedef struct t {
    bb_model *m;
    bb_function *f;
    bbc_state st;
    bbc_error err;
    bbc_partition *a, *b;
} t;

/* Class A sends `data` (f32) and `ping` (Trigger) to class B, which reads
 * the data payload but only the trigger of the ping. */
static void begin(t *x)
{
    memset(x, 0, sizeof *x);
    x->m = fx_model(&x->f);
    assert_int_equal(fx_state(&x->st, x->m, NULL, NULL, NULL, &x->err), BB_OK);
    x->a = fx_part(&x->st, "A");
    x->b = fx_part(&x->st, "B");
    bb_model *am = x->a->model, *bm = x->b->model;
    bb_function *af = x->a->fn, *bf = x->b->fn;
    fx_node(am, af, "w", BB_DOMAIN_SYSCALL, "Constant", FX_NOL, FX_L("data"));
    fx_node(am, af, "p", BB_DOMAIN_SYSCALL, "Pulse", FX_NOL, FX_L("ping"));
    fx_type(am, af, "data", &BB_TYPE_TENSOR_F32);
    fx_type(am, af, "ping", &BB_TYPE_TRIGGER);
    bb_node *s1 = fx_node(am, af, "send_data", BB_DOMAIN_WIRE, "Send", FX_L("data", "peers"), FX_NOL);
    bb_node *s2 = fx_node(am, af, "send_ping", BB_DOMAIN_WIRE, "Send", FX_L("ping", "peers"), FX_NOL);
    fx_meta(am, s1, BB_META_DEST_CLASS, "B");
    fx_meta(am, s2, BB_META_DEST_CLASS, "B");
    fx_node(bm, bf, "r1", BB_DOMAIN_WIRE, "Recv", FX_NOL, FX_L("t1", "v1"));
    fx_node(bm, bf, "r2", BB_DOMAIN_WIRE, "Recv", FX_NOL, FX_L("t2", "v2"));
    fx_node(bm, bf, "use", BB_DOMAIN_SYSCALL, "PassThrough", FX_L("v1"), FX_L("u"));
    fx_node(bm, bf, "tick", BB_DOMAIN_SYSCALL, "OnTrigger", FX_L("t2"), FX_L("u2"));
    /* An unmatched receive whose payload nobody reads. */
    fx_node(bm, bf, "r3", BB_DOMAIN_WIRE, "RecvReq", FX_NOL, FX_L("t3", "v3", "rid"));
    bbc_wire_edge *e = BB_VEC_PUSH(x->st.arena, &x->st.edges);
    *e = (bbc_wire_edge){"A", "B", "data", "v1", "send_data", "r1", "Send", "Recv", false};
    e = BB_VEC_PUSH(x->st.arena, &x->st.edges);
    *e = (bbc_wire_edge){"A", "B", "ping", "v2", "send_ping", "r2", "Send", "Recv", false};
}

static const char *m_(bbc_partition *p, const char *node, const char *key)
{
    return bbc_meta(fx_named(p->fn, node), key);
}

static void test_classify(void **state)
{
    (void)state;
    t x;
    begin(&x);
    assert_int_equal(fx_run(&x.st, "analyze_wire_edges"), BB_OK);
    assert_false(x.st.edges.v[0].trigger_only);
    assert_true(x.st.edges.v[1].trigger_only);
    assert_string_equal(m_(x.a, "send_data", BB_META_WIRE_TRANSPORT), "data");
    assert_string_equal(m_(x.b, "r1", BB_META_WIRE_TRANSPORT), "data");
    assert_string_equal(m_(x.a, "send_ping", BB_META_WIRE_TRANSPORT), "trigger_only");
    assert_string_equal(m_(x.b, "r2", BB_META_WIRE_TRANSPORT), "trigger_only");
    assert_string_equal(m_(x.b, "r3", BB_META_WIRE_TRANSPORT), "trigger_only");
    /* Correlation defaults and batching by destination. */
    assert_string_equal(m_(x.a, "send_data", BB_META_WIRE_CORRELATION), "none");
    assert_string_equal(m_(x.b, "r3", BB_META_WIRE_CORRELATION), "request");
    assert_string_equal(m_(x.a, "send_data", BB_META_WIRE_BATCH), "B");
    assert_string_equal(m_(x.a, "send_ping", BB_META_WIRE_BATCH), "B");
    /* Idempotent. */
    size_t nm = fx_named(x.a->fn, "send_data")->metadata.n;
    assert_int_equal(fx_run(&x.st, "analyze_wire_edges"), BB_OK);
    assert_int_equal(fx_named(x.a->fn, "send_data")->metadata.n, nm);
    bbc_state_free(&x.st);
}

static void test_lost_edge(void **state)
{
    (void)state;
    t x;
    begin(&x);
    x.st.edges.v[0].recv_node = "gone";
    assert_int_equal(fx_run(&x.st, "analyze_wire_edges"), BB_ECOMPILE);
    assert_int_equal(x.err.kind, BBC_E_INTERNAL);
    assert_non_null(strstr(x.err.msg, "'send_data' -> 'gone'"));
    bbc_state_free(&x.st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_classify),
        cmocka_unit_test(test_lost_edge),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
