/*
 * test_pass_insert_backoff_gate_tx.c — the BackoffGateTx gate (COMPILER.md "Wire-gate
 * insertion"): shape, names, rewiring, the *_source and idempotence stamps,
 * and a second run changing nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "bbc_fixture.h"

#define PASS "insert_backoff_gate_tx"
#define OP "BackoffGateTx"
#define SUFFIX "backoff_tx_gated"
#define IS_RX (false)

typedef struct t {
    bb_model *m;
    bb_function *f;
    bbc_state st;
    bbc_error err;
    bbc_partition *p;
} t;

static void begin(t *x)
{
    memset(x, 0, sizeof *x);
    x->m = fx_model(&x->f);
    assert_int_equal(fx_state(&x->st, x->m, NULL, NULL, NULL, &x->err), BB_OK);
    x->p = fx_wire_part(&x->st);
}

/* The earlier gates of the chain, so this one finds its place. */
static void prerequisites(t *x)
{
    static const char *const RX[] = {"insert_dedup_gate_rx", "insert_peer_health_gate_rx",
                                     "insert_backoff_gate_rx"};
    static const char *const TX[] = {"insert_peer_health_gate_tx", "insert_backoff_gate_tx"};
    const char *const *list = IS_RX ? RX : TX;
    size_t n = IS_RX ? 3 : 2;
    for (size_t i = 0; i < n && strcmp(list[i], PASS) != 0; i++)
        assert_int_equal(fx_run(&x->st, list[i]), BB_OK);
}

static void test_shape(void **state)
{
    (void)state;
    t x;
    begin(&x);
    prerequisites(&x);
    const bb_function *f = x.p->fn;
    const bb_node *wire = fx_named(f, IS_RX ? "recv" : "send");
    const char *before = IS_RX ? (bbc_meta(wire, BB_META_RX_CHAIN_HEAD)
                                      ? bbc_meta(wire, BB_META_RX_CHAIN_HEAD)
                                      : "payload")
                               : wire->inputs.v[0];
    assert_int_equal(fx_run(&x.st, PASS), BB_OK);
    const bb_node *g = fx_find(f, OP, 0);
    assert_non_null(g);
    assert_string_equal(g->domain, BB_DOMAIN_SYSCALL);
    assert_string_equal(g->name, IS_RX ? "recv#" OP : "send#" OP);
    assert_string_equal(g->inputs.v[0], before);
    assert_string_equal(g->outputs.v[0], IS_RX ? "recv#" SUFFIX : "send#" SUFFIX);
    assert_string_equal(bbc_meta(g, BB_META_BACKOFF_TX_SOURCE), wire->name);
    assert_string_equal(bbc_meta(wire, BB_META_BACKOFF_TX_GATED), "true");
    assert_string_equal(bbc_meta(g, BB_META_HOME_CLASS), "@self");
    if (IS_RX) {
        /* Consumers of the old head now read the gate; the cursor moved. */
        assert_string_equal(fx_named(f, "load")->inputs.v[0], g->outputs.v[0]);
        assert_string_equal(bbc_meta(wire, BB_META_RX_CHAIN_HEAD), g->outputs.v[0]);
        assert_true(bbc_node_index(f, g) < bbc_node_index(f, fx_named(f, "load")));
    } else {
        /* The send reads the gate, which forwards the data only. */
        assert_string_equal(wire->inputs.v[0], g->outputs.v[0]);
        assert_int_equal(g->inputs.n, 1);
        assert_string_equal(wire->inputs.v[1], "peers");
        assert_int_equal(bbc_node_index(f, g) + 1, bbc_node_index(f, wire));
    }
    /* The gate's output keeps the gated value's type. */
    assert_ptr_equal(bbc_value_type(f, g->outputs.v[0]), &BB_TYPE_TENSOR_F32);
    bbc_state_free(&x.st);
}

static void test_idempotent(void **state)
{
    (void)state;
    t x;
    begin(&x);
    prerequisites(&x);
    assert_int_equal(fx_run(&x.st, PASS), BB_OK);
    size_t n = x.p->fn->nodes.n;
    assert_int_equal(fx_run(&x.st, PASS), BB_OK);
    assert_int_equal(x.p->fn->nodes.n, n);
    assert_int_equal(fx_count(x.p->fn, OP), 1);
    bbc_state_free(&x.st);
}

static void test_side(void **state)
{
    (void)state;
    t x;
    begin(&x);
    if (IS_RX) {
        /* RecvRespBatched is fed by the response collector: no RX chain. */
        bb_node *rr = fx_node(x.p->model, x.p->fn, "collect", BB_DOMAIN_WIRE, "RecvRespBatched",
                              FX_L("rid"), FX_L("t2", "batch"));
        (void)rr;
        prerequisites(&x);
        assert_int_equal(fx_run(&x.st, PASS), BB_OK);
        assert_int_equal(fx_count(x.p->fn, OP), 1);
        assert_null(bbc_meta(fx_named(x.p->fn, "collect"), BB_META_BACKOFF_TX_GATED));
    } else {
        /* A static peer attribute is copied onto the gate. */
        bb_attr *peer = bb_node_add_attr(x.p->model->arena, fx_named(x.p->fn, "send"), "peer",
                                         BB_ATTR_STRING);
        peer->has_s = true;
        peer->s.data = (uint8_t *)"\x12\x20peer";
        peer->s.len = 6;
        prerequisites(&x);
        assert_int_equal(fx_run(&x.st, PASS), BB_OK);
        const bb_attr *got = bb_node_attr(fx_find(x.p->fn, OP, 0), "peer");
        assert_non_null(got);
        assert_int_equal(got->s.len, 6);
        assert_memory_equal(got->s.data, "\x12\x20peer", 6);
    }
    bbc_state_free(&x.st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shape),
        cmocka_unit_test(test_idempotent),
        cmocka_unit_test(test_side),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
