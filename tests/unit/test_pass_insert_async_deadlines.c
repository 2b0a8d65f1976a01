/*
 * test_pass_insert_async_deadlines.c — async wire ops get deadline_ns (a
 * RecvRespBatched inherits its request's), every deadline carrier gets a
 * paired DeadlineCheck on its input (ahead of the TX gate chain), and a
 * second run adds nothing.
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
    bbc_options o;
    bbc_partition *p;
} t;

static void begin(t *x)
{
    memset(x, 0, sizeof *x);
    x->m = fx_model(&x->f);
    bbc_options_init(&x->o);
    x->o.per_hop_budget_ns = 500;
    assert_int_equal(fx_state(&x->st, x->m, &x->o, NULL, NULL, &x->err), BB_OK);
    x->p = fx_part(&x->st, "S");
    bb_model *m = x->p->model;
    bb_function *f = x->p->fn;
    fx_node(m, f, "w", BB_DOMAIN_SYSCALL, "Pulse", FX_NOL, FX_L("data"));
    bb_node *rq = fx_node(m, f, "req", BB_DOMAIN_WIRE, "SendReqBatched", FX_L("data", "peers"),
                          FX_L("rid", "resps"));
    bb_node_set_attr_int(m->arena, rq, "deadline_ns", 9000);
    fx_node(m, f, "collect", BB_DOMAIN_WIRE, "RecvRespBatched", FX_L("rid"), FX_L("t", "batch"));
    fx_type(m, f, "rid", &BB_TYPE_REQUEST_ID);
}

static void test_pairs(void **state)
{
    (void)state;
    t x;
    begin(&x);
    assert_int_equal(fx_run(&x.st, "insert_peer_health_gate_tx"), BB_OK);
    assert_int_equal(fx_run(&x.st, "insert_backoff_gate_tx"), BB_OK);
    assert_int_equal(fx_run(&x.st, "insert_async_deadlines"), BB_OK);
    const bb_function *f = x.p->fn;
    const bb_node *req = fx_named(f, "req"), *col = fx_named(f, "collect");
    assert_int_equal(bb_node_attr_int(col, "deadline_ns", -1), 9000); /* inherited */
    assert_int_equal(fx_count(f, BB_OP_DEADLINE_CHECK), 2);
    const bb_node *dr = fx_named(f, "req#DeadlineCheck");
    assert_non_null(dr);
    assert_int_equal(bb_node_attr_int(dr, "deadline_ns", -1), 9000);
    assert_string_equal(bbc_meta(dr, BB_META_DEADLINE_SOURCE), "req");
    assert_string_equal(bbc_meta(req, BB_META_DEADLINE_CHECK), "req#DeadlineCheck");
    /* The check guards the head of the TX chain: data -> check -> PH -> BO -> req. */
    assert_string_equal(dr->inputs.v[0], "data");
    const bb_node *ph = fx_find(f, "PeerHealthGateTx", 0);
    assert_string_equal(ph->inputs.v[0], dr->outputs.v[0]);
    assert_string_equal(fx_producer(f, req->inputs.v[0])->op_type, "BackoffGateTx");
    /* The response collector's check sits on its req_id input. */
    const bb_node *dc = fx_named(f, "collect#DeadlineCheck");
    assert_string_equal(dc->inputs.v[0], "rid");
    assert_string_equal(col->inputs.v[0], dc->outputs.v[0]);
    assert_ptr_equal(bbc_value_type(f, dc->outputs.v[0]), &BB_TYPE_REQUEST_ID);
    /* Idempotent. */
    size_t n = f->nodes.n;
    assert_int_equal(fx_run(&x.st, "insert_async_deadlines"), BB_OK);
    assert_int_equal(f->nodes.n, n);
    bbc_state_free(&x.st);
}

static void test_default_budget(void **state)
{
    (void)state;
    t x;
    begin(&x);
    fx_named(x.p->fn, "req")->attrs.n = 0; /* no deadline yet */
    assert_int_equal(fx_run(&x.st, "insert_async_deadlines"), BB_OK);
    assert_int_equal(bb_node_attr_int(fx_named(x.p->fn, "req"), "deadline_ns", -1), 500);
    assert_int_equal(bb_node_attr_int(fx_named(x.p->fn, "collect"), "deadline_ns", -1), 500);
    bbc_state_free(&x.st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pairs),
        cmocka_unit_test(test_default_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
