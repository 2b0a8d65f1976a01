/*
 * test_pass_insert_gates.c — the five wire-gate insert passes (COMPILER.md
 * "Wire-gate insertion"), one table row per gate contract: shape, names,
 * rewiring, the *_source and idempotence stamps, a second run changing
 * nothing, and each side's special case (RecvRespBatched gets no RX chain;
 * a static peer attribute is copied onto a TX gate).
 *
 * The rows spell out what each pass must produce instead of reading it
 * from BBC_GATE_CONTRACTS, and test_contract_table checks the contract
 * table against them, so a wrong row fails here too.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "bbc/gates.h"
#include "bbc_fixture.h"

typedef struct gate_case {
    const char *pass;
    const char *op;
    const char *suffix;     /* the gate's output is "<wire op>#<suffix>" */
    const char *source_key; /* on the gate: the wire op's name */
    const char *gated_key;  /* on the wire op: "true" */
    bool rx;
} gate_case;

/* In run order: the RX chain, then the TX chain. */
static const gate_case CASES[] = {
    {"insert_dedup_gate_rx", "DedupGateRx", "dedup_rx_out", BB_META_DEDUP_RX_SOURCE,
     BB_META_DEDUP_RX_GATED, true},
    {"insert_peer_health_gate_rx", "PeerHealthGateRx", "peer_health_rx_out",
     BB_META_PEER_HEALTH_RX_SOURCE, BB_META_PEER_HEALTH_RX_GATED, true},
    {"insert_backoff_gate_rx", "BackoffGateRx", "backoff_rx_out", BB_META_BACKOFF_RX_SOURCE,
     BB_META_BACKOFF_RX_GATED, true},
    {"insert_peer_health_gate_tx", "PeerHealthGateTx", "peer_health_tx_gated",
     BB_META_PEER_HEALTH_TX_SOURCE, BB_META_PEER_HEALTH_TX_GATED, false},
    {"insert_backoff_gate_tx", "BackoffGateTx", "backoff_tx_gated", BB_META_BACKOFF_TX_SOURCE,
     BB_META_BACKOFF_TX_GATED, false},
};
#define N_CASES (sizeof CASES / sizeof CASES[0])

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
static void prerequisites(t *x, const gate_case *gc)
{
    for (const gate_case *c = CASES; c < gc; c++)
        if (c->rx == gc->rx)
            assert_int_equal(fx_run(&x->st, c->pass), BB_OK);
}

/* "<wire op>#<what>" for the case's wire op (recv or send). */
static const char *wire_name(char *buf, size_t cap, const gate_case *gc, const char *what)
{
    snprintf(buf, cap, "%s#%s", gc->rx ? "recv" : "send", what);
    return buf;
}

/* The contract table holds what the rows say, in the same order. */
static void test_contract_table(void **state)
{
    (void)state;
    assert_int_equal(BBC_N_GATE_CONTRACTS, N_CASES);
    for (size_t i = 0; i < N_CASES; i++) {
        const bbc_gate_contract *g = &BBC_GATE_CONTRACTS[i];
        assert_string_equal(g->op, CASES[i].op);
        assert_string_equal(g->suffix, CASES[i].suffix);
        assert_string_equal(g->source_key, CASES[i].source_key);
        assert_string_equal(g->gated_key, CASES[i].gated_key);
        assert_int_equal(g->rx, CASES[i].rx);
    }
}

static void test_shape(void **state)
{
    const gate_case *gc = *state;
    t x;
    begin(&x);
    prerequisites(&x, gc);
    const bb_function *f = x.p->fn;
    const bb_node *wire = fx_named(f, gc->rx ? "recv" : "send");
    const char *before = gc->rx ? (bbc_meta(wire, BB_META_RX_CHAIN_HEAD)
                                       ? bbc_meta(wire, BB_META_RX_CHAIN_HEAD)
                                       : "payload")
                                : wire->inputs.v[0];
    assert_int_equal(fx_run(&x.st, gc->pass), BB_OK);
    const bb_node *g = fx_find(f, gc->op, 0);
    assert_non_null(g);
    char want[128];
    assert_string_equal(g->domain, BB_DOMAIN_SYSCALL);
    assert_string_equal(g->name, wire_name(want, sizeof want, gc, gc->op));
    assert_string_equal(g->inputs.v[0], before);
    assert_string_equal(g->outputs.v[0], wire_name(want, sizeof want, gc, gc->suffix));
    assert_string_equal(bbc_meta(g, gc->source_key), wire->name);
    assert_string_equal(bbc_meta(wire, gc->gated_key), "true");
    assert_string_equal(bbc_meta(g, BB_META_HOME_CLASS), "@self");
    if (gc->rx) {
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
    const gate_case *gc = *state;
    t x;
    begin(&x);
    prerequisites(&x, gc);
    assert_int_equal(fx_run(&x.st, gc->pass), BB_OK);
    size_t n = x.p->fn->nodes.n;
    assert_int_equal(fx_run(&x.st, gc->pass), BB_OK);
    assert_int_equal(x.p->fn->nodes.n, n);
    assert_int_equal(fx_count(x.p->fn, gc->op), 1);
    bbc_state_free(&x.st);
}

static void test_side(void **state)
{
    const gate_case *gc = *state;
    t x;
    begin(&x);
    if (gc->rx) {
        /* RecvRespBatched is fed by the response collector: no RX chain. */
        bb_node *rr = fx_node(x.p->model, x.p->fn, "collect", BB_DOMAIN_WIRE, "RecvRespBatched",
                              FX_L("rid"), FX_L("t2", "batch"));
        (void)rr;
        prerequisites(&x, gc);
        assert_int_equal(fx_run(&x.st, gc->pass), BB_OK);
        assert_int_equal(fx_count(x.p->fn, gc->op), 1);
        assert_null(bbc_meta(fx_named(x.p->fn, "collect"), gc->gated_key));
    } else {
        /* A static peer attribute is copied onto the gate. */
        bb_attr *peer = bb_node_add_attr(x.p->model->arena, fx_named(x.p->fn, "send"), "peer",
                                         BB_ATTR_STRING);
        peer->has_s = true;
        peer->s.data = (uint8_t *)"\x12\x20peer";
        peer->s.len = 6;
        prerequisites(&x, gc);
        assert_int_equal(fx_run(&x.st, gc->pass), BB_OK);
        const bb_attr *got = bb_node_attr(fx_find(x.p->fn, gc->op, 0), "peer");
        assert_non_null(got);
        assert_int_equal(got->s.len, 6);
        assert_memory_equal(got->s.data, "\x12\x20peer", 6);
    }
    bbc_state_free(&x.st);
}

int main(void)
{
    static const struct {
        const char *what;
        CMUnitTestFunction fn;
    } KINDS[] = {{"shape", test_shape}, {"idempotent", test_idempotent}, {"side", test_side}};
    enum { N_KINDS = sizeof KINDS / sizeof KINDS[0] };
    static char names[N_KINDS * N_CASES][96];
    struct CMUnitTest tests[1 + N_KINDS * N_CASES] = {
        cmocka_unit_test(test_contract_table),
    };
    size_t k = 1;
    for (size_t c = 0; c < N_CASES; c++) {
        for (size_t i = 0; i < N_KINDS; i++, k++) {
            /* "test_shape(DedupGateRx)": the failing gate is in the name */
            snprintf(names[k - 1], sizeof names[k - 1], "test_%s(%s)", KINDS[i].what,
                     CASES[c].op);
            tests[k] = (struct CMUnitTest){names[k - 1], KINDS[i].fn, NULL, NULL,
                                           (void *)&CASES[c]};
        }
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
