/*
 * test_global_registry.c — peers::GlobalRegistry on in-process engines in
 * virtual time: clients announce themselves to the registry node and renew;
 * a client's Sample / CurrentView asks the registry (answered LATER) and
 * learns the addresses of what it gets, never itself; the registry filters
 * by peer class; a client that stops renewing drops out within its TTL; an
 * unreachable registry fails the Sample with a message; malformed requests
 * are refused; config errors name the key. The real-process run is
 * tests/integration/registry_federated.sh.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/multiaddr.h"
#include "bb/peerid.h"
#include "support/engine_fixtures.h"
#include "support/plugin_fixtures.h"

#define MS 1000000ull

/* A client's config: the registry is node `reg` (fx_peer, port 7000 + reg). */
static const char *client_config(uint8_t reg, char *buf, size_t cap)
{
    bb_peerid id = fx_peer(reg);
    char text[BB_PEERID_TEXT_MAX];
    assert_int_equal(bb_peerid_to_text(&id, text, sizeof text, NULL), BB_OK);
    snprintf(buf, cap,
             "{\"registry\": \"/ip4/127.0.0.1/tcp/%u/p2p/%s\", \"ttl_ms\": 1000, "
             "\"timeout_ms\": 200}",
             7000u + reg, text);
    return buf;
}

#define start pfx_net_start
#define advance pfx_net_advance

/* Invoke node i's Server once and run the network until its Sample and
 * CurrentView answered (or failed). *view / *peers get the seeds (sorted),
 * the return value is the view's size, -1 when an op failed (its message
 * in why). */
static int ask(fx_net *net, int i, int *view, int *n_peers, char *why)
{
    fx_log_free(&net->log[i]);
    memset(&net->log[i], 0, sizeof net->log[i]);
    bb_value *go = bb_value_trigger();
    bb_engine_input in = {.name = "go", .value = go};
    assert_int_equal(bb_engine_invoke(net->e[i], "Server", &in, 1, NULL, NULL), BB_OK);
    bb_value_unref(go);
    for (int k = 0; k < 100 && !(fx_log_app(&net->log[i], "view", 0) &&
                                 fx_log_app(&net->log[i], "peers", 0));
         k++) {
        if (fx_log_count(&net->log[i], BB_STEP_OP_FAILED)) {
            snprintf(why, 512, "%s", fx_log_nth(&net->log[i], BB_STEP_OP_FAILED, 0)->c);
            return -1;
        }
        advance(net, 10 * MS);
    }
    const fx_rec *v = fx_log_app(&net->log[i], "view", 0), *p = fx_log_app(&net->log[i], "peers", 0);
    assert_non_null(v);
    assert_non_null(p);
    *n_peers = (int)p->value->u.list.n;
    int n = (int)v->value->u.list.n;
    for (int k = 0; k < n; k++)
        view[k] = pfx_seed_of(v->value->u.list.items[k]);
    for (int a = 1; a < n; a++)
        for (int b = a; b > 0 && view[b - 1] > view[b]; b--) {
            int t = view[b];
            view[b] = view[b - 1];
            view[b - 1] = t;
        }
    return n;
}

static void test_registry_announce_query_expire(void **state)
{
    (void)state;
    bb_model *m = pfx_selector_model("peers::GlobalRegistry", 1, NULL);
    fx_net net = {.now = 1};
    char cfg[512];
    start(&net, 1, m, "{\"serve\": true}");
    for (uint8_t s = 2; s <= 4; s++)
        start(&net, s, m, client_config(1, cfg, sizeof cfg));
    advance(&net, 50 * MS);
    int v[16], np = 0;
    char why[512] = "";
    assert_int_equal(ask(&net, 0, v, &np, why), 3); /* the registry's own view */
    assert_true(v[0] == 2 && v[1] == 3 && v[2] == 4);
    assert_int_equal(np, 1);

    /* a client asks the registry: the others, never itself, with addresses */
    assert_int_equal(ask(&net, 1, v, &np, why), 2);
    assert_true(v[0] == 3 && v[1] == 4);
    assert_int_equal(np, 1);
    bb_peerid p3 = fx_peer(3);
    const bb_engine_addr *a = NULL;
    assert_true(bb_engine_peer_addrs(net.e[1], &p3, &a) >= 1);
    char text[64];
    assert_int_equal(bb_multiaddr_format(a[0].data, a[0].len, text, sizeof text, NULL, NULL),
                     BB_OK);
    assert_string_equal(text, "/ip4/127.0.0.1/tcp/7003");

    /* renewals keep everyone in for many TTLs */
    advance(&net, 3500 * MS);
    assert_int_equal(ask(&net, 0, v, &np, why), 3);

    /* node 4 stops renewing: gone within one TTL (and a renewal period) */
    bb_engine_free(net.e[3]);
    fx_log_free(&net.log[3]);
    net.n--;
    advance(&net, 1400 * MS);
    assert_int_equal(ask(&net, 0, v, &np, why), 2);
    assert_true(v[0] == 2 && v[1] == 3);
    assert_int_equal(ask(&net, 1, v, &np, why), 1);
    assert_int_equal(v[0], 3);
    fx_net_free(&net);
    bb_model_free(m);
}

static void test_registry_filters_by_class(void **state)
{
    (void)state;
    bb_model *srv = pfx_selector_model("peers::GlobalRegistry", 2, NULL);
    bb_model *want_other = pfx_selector_model("peers::GlobalRegistry", 2, "Trainer");
    fx_net net = {.now = 1};
    char cfg[512];
    start(&net, 1, srv, "{\"serve\": true}");
    start(&net, 2, srv, client_config(1, cfg, sizeof cfg)); /* runs "Server" */
    start(&net, 3, want_other, client_config(1, cfg, sizeof cfg));
    advance(&net, 50 * MS);
    int v[16], np = 0;
    char why[512] = "";
    /* node 3 samples of_class Trainer: nobody announced that class */
    assert_int_equal(ask(&net, 2, v, &np, why), 0);
    assert_int_equal(np, 0);
    fx_net_free(&net);
    bb_model_free(srv);
    bb_model_free(want_other);
}

static void test_registry_unreachable_and_malformed(void **state)
{
    (void)state;
    bb_model *m = pfx_selector_model("peers::GlobalRegistry", 1, NULL);
    fx_net net = {.now = 1};
    char cfg[512];
    start(&net, 1, m, "{\"serve\": true}");
    start(&net, 2, m, client_config(9, cfg, sizeof cfg)); /* nobody at 9 */
    advance(&net, 50 * MS);
    int v[16], np = 0;
    char why[512] = "";
    assert_int_equal(ask(&net, 1, v, &np, why), -1);
    assert_non_null(strstr(why, "registry did not answer"));
    assert_non_null(strstr(why, "ETIMEOUT"));

    /* hostile requests to the registry: refused, answered with the error */
    const uint8_t many[] = {10, 9}; /* ttl 10 ms, 9 classes */
    const uint8_t junk[] = {0x05, 'x'};
    const struct {
        const char *op;
        const uint8_t *p;
        size_t n;
        const char *want;
    } bad[] = {{"Announce", many, sizeof many, "at most 8"},
               {"Query", junk, sizeof junk, "malformed query"},
               {"Announce", junk, 1, "malformed announce"}};
    for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
        pfx_deliver_control(net.e[0], 40, 0, bad[k].op, bad[k].p, bad[k].n, 70 + k);
        fx_net_poll(&net, 0);
        const fx_rec *f0 = fx_log_nth(&net.log[0], BB_STEP_OP_FAILED, k);
        assert_non_null(f0);
        if (!strstr(f0->c, bad[k].want))
            fail_msg("%s: \"%s\" lacks \"%s\"", bad[k].op, f0->c, bad[k].want);
    }
    fx_net_free(&net);
    bb_model_free(m);
}

static void test_registry_config_errors(void **state)
{
    (void)state;
    const pfx_bad_config cases[] = {
        {"{}", "needs 'registry'"},
        {"{\"serve\": true, \"registry\": \"/ip4/1.2.3.4/tcp/1\"}", "either keeps the registry"},
        {"{\"registry\": \"/ip4/1.2.3.4/tcp/1\"}", "needs /p2p/<PeerId>"},
        {"{\"serve\": true, \"ttl_ms\": 5}", "'ttl_ms'"},
    };
    pfx_assert_configs_refused("peers::GlobalRegistry", cases, sizeof cases / sizeof *cases);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_registry_announce_query_expire),
        cmocka_unit_test(test_registry_filters_by_class),
        cmocka_unit_test(test_registry_unreachable_and_malformed),
        cmocka_unit_test(test_registry_config_errors),
    };
    return cmocka_run_group_tests(tests, NULL, pfx_group_teardown);
}
