/*
 * test_engine_alloc.c — the engine under failing allocations (SQLite-style
 * sweeps: fail the 1st, 2nd, ... allocation of an operation until it no
 * longer allocates that often). Each run must end in a clean outcome — the
 * call returns BB_OK or BB_ENOMEM, a per-fill failure is the typed
 * WireReceiveError AllocationFailed, an ingress failure the AppIngressError
 * AllocationFailed — and once the engine is freed every block is back. Covers
 * the wire receive path (data, backend, composite, request and control-plane
 * fills), invoke, install, and snapshot / restore.
 *
 * Each test first runs its operation once with no failure and checks the
 * result, then sweeps. The sweeps need this binary's own malloc
 * (support/alloc_fail.h): under AddressSanitizer or valgrind only the clean
 * run happens.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bb/multiaddr.h"
#include "support/alloc_fail.h"
#include "support/engine_fixtures.h"

typedef struct run {
    bb_model *m;
    bb_engine *e, *e2;
    bb_steps steps;
    uint8_t *env;
    size_t env_len;
    int rc, rc2;
} run;

typedef struct tally {
    long runs;
    long wire_alloc_failed, app_alloc_failed, enomem;
} tally;

/* Runs setup / op / check once with no failure (ok() checks the result),
 * then, when this binary's malloc is in use, with the nth allocation of op
 * failing for n = 1, 2, ... Returns the number of runs in which an
 * allocation failed (0 without the interposed malloc). */
static long sweep(const char *what, void (*setup)(run *), void (*op)(run *),
                  void (*check)(run *, tally *), void (*ok)(run *), tally *t)
{
    bool sweeping = af_interposed();
    if (!sweeping)
        print_message("%s: malloc is not this binary's, the sweep is skipped\n", what);
    for (long n = 0;; n++) {
        long base = af_live;
        run r = {0};
        bb_steps_init(&r.steps);
        setup(&r);
        af_arm(n);
        op(&r);
        bool hit = af_failed;
        af_arm(0);
        if (n == 0)
            ok(&r);
        check(&r, t);
        bb_steps_free(&r.steps);
        free(r.env);
        bb_engine_free(r.e);
        bb_engine_free(r.e2);
        bb_model_free(r.m);
        /* blocks are counted only by this binary's malloc (under valgrind,
         * valgrind's own leak check does it) */
        if (sweeping && af_live != base)
            fail_msg("%s: failing allocation %ld leaked %ld blocks", what, n, af_live - base);
        if (!sweeping)
            return 0;
        if (n > 0 && !hit)
            return n - 1;
        t->runs += n > 0;
    }
}

static size_t count_kind(const bb_steps *s, bb_step_kind kind)
{
    size_t n = 0;
    for (size_t i = 0; i < s->n; i++)
        n += s->v[i].kind == kind;
    return n;
}

static void count_steps(const bb_steps *s, tally *t)
{
    for (size_t i = 0; i < s->n; i++) {
        const bb_step *st = &s->v[i];
        if (st->kind != BB_STEP_INFRA_EVENT)
            continue;
        t->wire_alloc_failed += st->u.infra.kind == BB_INFRA_WIRE_RECEIVE_ERROR &&
                                st->u.infra.sub == BB_WIRE_RX_ALLOCATION_FAILED;
        t->app_alloc_failed += st->u.infra.kind == BB_INFRA_APP_INGRESS_ERROR &&
                               st->u.infra.sub == BB_APP_INGRESS_ALLOCATION_FAILED;
    }
}

/* ---- the wire receive path -------------------------------------------------------- */

static bb_model *sink_model(void)
{
    bb_model *m = fx_model();
    bb_function *f = fx_fn(m, "Sink", "", "a,c,e");
    fx_recv(m, f, 101, "t0", "a", &BB_TYPE_U64);
    bb_node *r = fx_recv(m, f, 103, "t1", "c", &BB_TYPE_TENSOR_F32);
    fx_meta(m, r, "ai.bytesandbrains.recv_slot_id", "1");
    fx_recv(m, f, 105, "t2", "e", &BB_TYPE_COMPOSITE);
    bb_function *s = fx_fn(m, "Server", "", "");
    r = fx_op(m, s, FX_WIRE, "RecvReq", "", "rt,p,rid");
    fx_meta(m, r, "ai.bytesandbrains.wire_site", "110");
    fx_type(m, s, "p", &BB_TYPE_U64);
    fx_op(m, s, FX_WIRE, "SendResp", "p,rid", "");
    fx_bind(m, "Sink", "compute", "Backend|test::Backend|1");
    fx_bind(m, "Sink", "echo", "Protocol|test::Echo|2");
    return m;
}

static void wire_setup(run *r)
{
    r->m = sink_model();
    r->e = fx_engine(2, 7002, NULL);
    assert_int_equal(fx_install(r->e, r->m, "Sink,Server", NULL), BB_OK);
    uint8_t u[8] = {42}, ctl[3] = {'c', 't', 'l'}, sfx[64];
    size_t sl;
    assert_int_equal(bb_suffix_component_op(2, "Control", sfx, sizeof sfx, &sl, NULL), BB_OK);
    float fv[2] = {1, 2};
    bb_value *t = fx_f32(fv, 2);
    bb_value *kids[2] = {bb_value_u64(&BB_TYPE_U64, 1), fx_f32(fv, 2)};
    bb_value *comp = bb_value_list(&BB_TYPE_COMPOSITE, kids, 2);
    uint8_t *tb, *cb;
    size_t tl, cl;
    assert_int_equal(bb_value_encode(t, &tb, &tl, NULL), BB_OK);
    assert_int_equal(bb_value_encode(comp, &cb, &cl, NULL), BB_OK);
    bb_value_unref(t);
    bb_value_unref(comp);
    fx_fill fills[5] = {{.site = 101, .payload = u, .len = 8},
                        {.site = 103, .payload = tb, .len = tl},
                        {.site = 105, .payload = cb, .len = cl},
                        {.site = 110, .payload = u, .len = 8},
                        {.suffix = sfx, .suffix_len = sl, .payload = ctl, .len = 3}};
    uint8_t a1[32];
    bb_engine_addr src = {a1, fx_addr(7001, a1)};
    fx_env env = {.fills = fills, .n_fills = 5, .corr = 1, .wire_req_id = 9, .sent_at_ns = 5,
                  .src = &src, .n_src = 1};
    r->env = fx_envelope(&env, &r->env_len);
    free(tb);
    free(cb);
}

static void wire_op(run *r)
{
    bb_peerid p = fx_peer(1);
    r->rc = bb_engine_deliver_envelope(r->e, &p, NULL, r->env, r->env_len, NULL);
    bb_engine_poll(r->e, 10, &r->steps);
}

static void wire_ok(run *r)
{
    assert_int_equal(r->rc, BB_OK);
    assert_int_equal(count_kind(&r->steps, BB_STEP_APP_EVENT), 3);    /* a, c, e */
    assert_int_equal(count_kind(&r->steps, BB_STEP_SEND_ENVELOPE), 1); /* the response */
    assert_int_equal(fx_echo_by_slot("echo")->n_control, 1);           /* the control fill */
}

static void wire_check(run *r, tally *t)
{
    if (r->rc != BB_OK && r->rc != BB_ENOMEM)
        fail_msg("deliver_envelope returned %s", bb_status_name(r->rc));
    t->enomem += r->rc == BB_ENOMEM;
    count_steps(&r->steps, t);
    /* whatever happened, nothing is left in flight */
    bb_engine_poll(r->e, 11, &r->steps);
    assert_int_equal(bb_engine_counter(r->e, "ingress.bytes_in_flight"), 0);
    assert_int_equal(bb_engine_live_executions(r->e), 0);
}

static void test_wire_receive_under_failing_allocations(void **state)
{
    (void)state;
    tally t = {0};
    long runs = sweep("wire receive", wire_setup, wire_op, wire_check, wire_ok, &t);
    if (!runs)
        return;
    print_message("wire receive: %ld failing runs, %ld AllocationFailed fills, %ld refused\n", runs,
                  t.wire_alloc_failed, t.enomem);
    assert_true(runs > 20);
    assert_true(t.enomem > 0);            /* refused at the boundary */
    assert_true(t.wire_alloc_failed > 0); /* a fill reported as AllocationFailed */
}

/* ---- invoke ------------------------------------------------------------------------------ */

static void invoke_setup(run *r)
{
    r->m = fx_model();
    bb_function *f = fx_chain(r->m, "Main", 3);
    fx_type(r->m, f, "in", &BB_TYPE_U64);
    r->e = fx_engine(1, 7001, NULL);
    assert_int_equal(fx_install(r->e, r->m, "Main", NULL), BB_OK);
}

static void invoke_op(run *r)
{
    uint8_t bytes[8] = {7};
    bb_engine_input in = {.name = "in", .bytes = bytes, .len = 8};
    r->rc = bb_engine_invoke(r->e, "Main", &in, 1, NULL, NULL);
    bb_engine_poll(r->e, 1, &r->steps);
}

static void invoke_ok(run *r)
{
    assert_int_equal(r->rc, BB_OK);
    assert_int_equal(count_kind(&r->steps, BB_STEP_APP_EVENT), 1);
    assert_int_equal(r->steps.v[0].u.app.value->u.u64, 7);
}

static void invoke_check(run *r, tally *t)
{
    if (r->rc != BB_OK && r->rc != BB_ENOMEM)
        fail_msg("invoke returned %s", bb_status_name(r->rc));
    t->enomem += r->rc == BB_ENOMEM;
    count_steps(&r->steps, t);
    assert_int_equal(bb_engine_counter(r->e, "ingress.bytes_in_flight"), 0);
}

static void test_invoke_under_failing_allocations(void **state)
{
    (void)state;
    tally t = {0};
    long runs = sweep("invoke", invoke_setup, invoke_op, invoke_check, invoke_ok, &t);
    if (!runs)
        return;
    print_message("invoke: %ld failing runs, %ld refused\n", runs, t.enomem);
    assert_true(runs > 3);
    assert_true(t.enomem > 0);
    assert_true(t.app_alloc_failed > 0); /* reported as AppIngressError AllocationFailed */
}

/* ---- install ------------------------------------------------------------------------------ */

static void install_setup(run *r)
{
    r->m = sink_model();
    bb_function *f = fx_fn(r->m, "Calls", "x", "y");
    fx_op(r->m, f, "ai.bytesandbrains.module", "Sub", "x", "y");
    bb_function *sub = bb_model_add_function(r->m, "ai.bytesandbrains.module", "Sub");
    bb_str_list_push(r->m->arena, &sub->inputs, "p");
    bb_str_list_push(r->m->arena, &sub->outputs, "q");
    bb_node *n = fx_op(r->m, sub, FX_SYS, "Limit.Acquire", "p", "q");
    fx_str(r->m, n, "name", "one");
    r->e = fx_engine(1, 7001, NULL);
}

static void install_op(run *r) { r->rc = fx_install(r->e, r->m, "Sink,Server,Calls", NULL); }

static void install_ok(run *r)
{
    assert_int_equal(r->rc, BB_OK);
    assert_int_equal(bb_engine_target_count(r->e), 3);
}

static void install_check(run *r, tally *t)
{
    if (r->rc != BB_OK && r->rc != BB_ENOMEM)
        fail_msg("install returned %s (%s)", bb_status_name(r->rc),
                 bb_install_error_name(bb_engine_install_error(r->e)));
    t->enomem += r->rc == BB_ENOMEM;
}

static void test_install_under_failing_allocations(void **state)
{
    (void)state;
    tally t = {0};
    long runs = sweep("install", install_setup, install_op, install_check, install_ok, &t);
    if (!runs)
        return;
    print_message("install: %ld failing runs\n", runs);
    assert_true(runs > 20);
    assert_int_equal(t.enomem, runs);
}

/* ---- snapshot / restore --------------------------------------------------------------------- */

static void snap_setup(run *r)
{
    invoke_setup(r);
    bb_node *n = fx_op(r->m, r->m->functions.v[0], FX_SYS, "After", "out", "late");
    fx_int(r->m, n, "delay_ns", 100);
    bb_engine_free(r->e);
    r->e = fx_engine(1, 7001, NULL);
    assert_int_equal(fx_install(r->e, r->m, "Main", NULL), BB_OK);
    uint8_t bytes[8] = {7};
    bb_engine_input in = {.name = "in", .bytes = bytes, .len = 8};
    assert_int_equal(bb_engine_invoke(r->e, "Main", &in, 1, NULL, NULL), BB_OK);
    bb_engine_poll(r->e, 1, &r->steps); /* an execution parked on its timer */
    assert_int_equal(bb_engine_invoke(r->e, "Main", &in, 1, NULL, NULL), BB_OK); /* queued */
    r->e2 = fx_engine(1, 7001, NULL);
    assert_int_equal(fx_install(r->e2, r->m, "Main", NULL), BB_OK);
}

static void snap_op(run *r)
{
    r->rc = bb_engine_snapshot(r->e, &r->env, &r->env_len, NULL);
    r->rc2 = r->rc == BB_OK ? bb_engine_restore(r->e2, r->env, r->env_len, NULL) : BB_ENOMEM;
}

static void snap_ok(run *r)
{
    assert_int_equal(r->rc, BB_OK);
    assert_int_equal(r->rc2, BB_OK);
    assert_int_equal(bb_engine_live_executions(r->e2), 1);
    assert_int_equal(bb_engine_incarnation(r->e2), 2);
}

static void snap_check(run *r, tally *t)
{
    if ((r->rc != BB_OK && r->rc != BB_ENOMEM) || (r->rc2 != BB_OK && r->rc2 != BB_ENOMEM))
        fail_msg("snapshot / restore returned %s / %s", bb_status_name(r->rc),
                 bb_status_name(r->rc2));
    t->enomem += r->rc2 == BB_ENOMEM;
    /* the source engine is intact either way: it finishes its work */
    bb_engine_poll(r->e, 200, &r->steps);
    bb_engine_poll(r->e, 300, &r->steps);
    assert_int_equal(bb_engine_live_executions(r->e), 0);
}

static void test_snapshot_restore_under_failing_allocations(void **state)
{
    (void)state;
    tally t = {0};
    long runs = sweep("snapshot / restore", snap_setup, snap_op, snap_check, snap_ok, &t);
    if (!runs)
        return;
    print_message("snapshot / restore: %ld failing runs\n", runs);
    assert_true(runs > 10);
    assert_int_equal(t.enomem, runs);
}

/* ---- a send fanned out to many peers --------------------------------------------------- */

/* Their address lists outgrow the steps buffer's first chunk of storage:
 * whichever allocation fails, every SendEnvelope the poll still returns
 * must carry its own peer's address, intact. */
enum { FAN = 48 };

static void fan_setup(run *r)
{
    r->m = fx_model();
    bb_function *c = fx_fn(r->m, "Client", "x,peers", "batch");
    fx_type(r->m, c, "x", &BB_TYPE_U64);
    bb_node *s = fx_op(r->m, c, FX_WIRE, "SendReqBatched", "x,peers", "rid");
    fx_meta(r->m, s, "ai.bytesandbrains.port", "ping");
    fx_int(r->m, s, "quorum", 0);
    fx_op(r->m, c, FX_WIRE, "RecvRespBatched", "rid", "t,batch");
    r->e = fx_engine(1, 7001, NULL);
    assert_int_equal(fx_install(r->e, r->m, "Client", NULL), BB_OK);
    for (int i = 0; i < FAN; i++) {
        uint8_t a[32];
        bb_engine_addr addr = {a, fx_addr((uint16_t)(7010 + i), a)};
        bb_peerid p = fx_peer((uint8_t)(10 + i));
        assert_int_equal(bb_engine_add_peer(r->e, &p, &addr, 1, NULL), BB_OK);
    }
}

static void fan_op(run *r)
{
    bb_value *items[FAN];
    for (int i = 0; i < FAN; i++) {
        bb_peerid p = fx_peer((uint8_t)(10 + i));
        items[i] = bb_value_bytes(&BB_TYPE_PEER_ID, p.bytes, p.len);
    }
    bb_value *x = bb_value_u64(&BB_TYPE_U64, 5);
    bb_value *peers = bb_value_list(&BB_TYPE_PEER_ID_VEC, items, FAN);
    bb_engine_input in[2] = {{.name = "x", .value = x}, {.name = "peers", .value = peers}};
    r->rc = x && peers ? bb_engine_invoke(r->e, "Client", in, 2, NULL, NULL) : BB_ENOMEM;
    bb_value_unref(x);
    bb_value_unref(peers);
    bb_engine_poll(r->e, 100, &r->steps);
}

static void fan_ok(run *r)
{
    assert_int_equal(r->rc, BB_OK);
    assert_int_equal(count_kind(&r->steps, BB_STEP_SEND_ENVELOPE), FAN);
}

static void fan_check(run *r, tally *t)
{
    if (r->rc != BB_OK && r->rc != BB_ENOMEM)
        fail_msg("invoke returned %s", bb_status_name(r->rc));
    t->enomem += r->rc == BB_ENOMEM;
    for (size_t i = 0; i < r->steps.n; i++) {
        const bb_step *st = &r->steps.v[i];
        if (st->kind != BB_STEP_SEND_ENVELOPE)
            continue;
        int k = 0;
        for (bb_peerid p = fx_peer(10); k < FAN && !bb_peerid_equal(&p, &st->u.send.peer);)
            p = fx_peer((uint8_t)(10 + ++k));
        assert_true(k < FAN);
        uint8_t want[32];
        size_t wl = fx_addr((uint16_t)(7010 + k), want);
        assert_int_equal(st->u.send.n_addrs, 1);
        assert_int_equal(st->u.send.addrs[0].len, wl);
        assert_memory_equal(st->u.send.addrs[0].data, want, wl);
    }
}

static void test_fan_out_send_under_failing_allocations(void **state)
{
    (void)state;
    tally t = {0};
    long runs = sweep("fan-out send", fan_setup, fan_op, fan_check, fan_ok, &t);
    if (!runs)
        return;
    print_message("fan-out send: %ld failing runs, %ld refused\n", runs, t.enomem);
    assert_true(runs > FAN); /* the sweep reached the sends and their storage */
}

int main(void)
{
    bb__value_cache_limit(0); /* every value is a malloc the sweeps can fail and count */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_wire_receive_under_failing_allocations),
        cmocka_unit_test(test_invoke_under_failing_allocations),
        cmocka_unit_test(test_install_under_failing_allocations),
        cmocka_unit_test(test_snapshot_restore_under_failing_allocations),
        cmocka_unit_test(test_fan_out_send_under_failing_allocations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
