/*
 * test_pass_infer_peer_classes.c — home classes and destination classes:
 * a classless program runs on @self; recorder stamps propagate through the
 * dataflow component; cross-class dataflow and unclassable destinations are
 * reported; SendResp answers its requester's class.
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
} t;

static void begin(t *x)
{
    memset(x, 0, sizeof *x);
    x->m = fx_model(&x->f);
}

static int infer(t *x)
{
    int rc = fx_state(&x->st, x->m, NULL, NULL, NULL, &x->err);
    if (rc == BB_OK)
        rc = fx_run(&x->st, "infer_peer_classes");
    return rc;
}

static const char *home(t *x, const char *node)
{
    return bbc_meta(fx_named(x->st.root, node), BB_META_HOME_CLASS);
}

static bb_node *sample(t *x, const char *name, const char *out, const char *of_class)
{
    bb_node *s = fx_node(x->m, x->f, name, BB_DOMAIN_ROLE_PEER_SELECTOR, "Sample", FX_NOL,
                         FX_L(out));
    fx_on_slot(x->m, s, "sel", "peers::Connected");
    if (of_class)
        fx_meta(x->m, s, BB_META_PEER_CLASS, of_class);
    return s;
}

static void test_single_class(void **state)
{
    (void)state;
    t x;
    begin(&x);
    fx_node(x.m, x.f, "p", BB_DOMAIN_SYSCALL, "Pulse", FX_NOL, FX_L("go"));
    sample(&x, "s", "peers", NULL);
    fx_node(x.m, x.f, "send", BB_DOMAIN_WIRE, "Send", FX_L("go", "peers"), FX_NOL);
    assert_int_equal(infer(&x), BB_OK);
    assert_string_equal(home(&x, "p"), BB_SELF_CLASS);
    assert_string_equal(home(&x, "send"), BB_SELF_CLASS);
    assert_string_equal(bbc_meta(fx_named(x.st.root, "send"), BB_META_DEST_CLASS), BB_SELF_CLASS);
    bbc_state_free(&x.st);
}

static void test_propagation_and_dest(void **state)
{
    (void)state;
    t x;
    begin(&x);
    /* Server nodes stamped; the glue PassThrough is not. */
    bb_node *p = fx_node(x.m, x.f, "p", BB_DOMAIN_SYSCALL, "Pulse", FX_NOL, FX_L("go"));
    fx_meta(x.m, p, BB_META_HOME_CLASS, "Server");
    fx_node(x.m, x.f, "glue", BB_DOMAIN_SYSCALL, "PassThrough", FX_L("go"), FX_L("go2"));
    bb_node *s = sample(&x, "s", "peers", "Client");
    fx_meta(x.m, s, BB_META_HOME_CLASS, "Server");
    fx_node(x.m, x.f, "send", BB_DOMAIN_WIRE, "Send", FX_L("go2", "peers"), FX_NOL);
    /* An untagged selector samples its own class. */
    bb_node *s2 = sample(&x, "s2", "peers2", NULL);
    fx_meta(x.m, s2, BB_META_HOME_CLASS, "Client");
    fx_node(x.m, x.f, "gossip", BB_DOMAIN_WIRE, "Send", FX_L("peers2", "peers2"), FX_NOL);
    assert_int_equal(infer(&x), BB_OK);
    assert_string_equal(home(&x, "glue"), "Server");
    assert_string_equal(home(&x, "send"), "Server");
    assert_string_equal(bbc_meta(fx_named(x.st.root, "send"), BB_META_DEST_CLASS), "Client");
    assert_string_equal(home(&x, "gossip"), "Client");
    assert_string_equal(bbc_meta(fx_named(x.st.root, "gossip"), BB_META_DEST_CLASS), "Client");
    /* Idempotent. */
    assert_int_equal(fx_run(&x.st, "infer_peer_classes"), BB_OK);
    assert_string_equal(home(&x, "glue"), "Server");
    bbc_state_free(&x.st);
}

static void test_cross_class(void **state)
{
    (void)state;
    t x;
    begin(&x);
    bb_node *p = fx_node(x.m, x.f, "p", BB_DOMAIN_SYSCALL, "Pulse", FX_NOL, FX_L("go"));
    fx_meta(x.m, p, BB_META_HOME_CLASS, "Server");
    bb_node *o = fx_node(x.m, x.f, "o", BB_DOMAIN_SYSCALL, "OnTrigger", FX_L("go"), FX_L("b"));
    fx_meta(x.m, o, BB_META_HOME_CLASS, "Client");
    assert_int_equal(infer(&x), BB_ECOMPILE);
    assert_int_equal(x.err.kind, BBC_E_CROSS_CLASS_DATAFLOW);
    assert_non_null(strstr(x.err.msg, "Server"));
    assert_non_null(strstr(x.err.msg, "Client"));
    assert_non_null(strstr(x.err.msg, "without a wire op"));
    bbc_state_free(&x.st);
}

static void test_unresolved_dest(void **state)
{
    (void)state;
    t x;
    begin(&x);
    bb_str_list_push(x.m->arena, &x.f->inputs, "peers");
    fx_type(x.m, x.f, "peers", &BB_TYPE_PEER_ID_VEC);
    bb_node *p = fx_node(x.m, x.f, "p", BB_DOMAIN_SYSCALL, "Pulse", FX_NOL, FX_L("go"));
    fx_meta(x.m, p, BB_META_HOME_CLASS, "Server");
    fx_node(x.m, x.f, "send", BB_DOMAIN_WIRE, "Send", FX_L("go", "peers"), FX_NOL);
    assert_int_equal(infer(&x), BB_ECOMPILE);
    assert_int_equal(x.err.kind, BBC_E_UNRESOLVED_PEER_CLASS);
    assert_non_null(strstr(x.err.msg, "'send'"));
    assert_non_null(strstr(x.err.msg, "'peers'"));
    bbc_state_free(&x.st);
}

static void test_response_goes_to_requester(void **state)
{
    (void)state;
    t x;
    begin(&x);
    bb_node *p = fx_node(x.m, x.f, "p", BB_DOMAIN_SYSCALL, "Pulse", FX_NOL, FX_L("go"));
    fx_meta(x.m, p, BB_META_HOME_CLASS, "Server");
    bb_node *s = sample(&x, "s", "peers", "Client");
    fx_meta(x.m, s, BB_META_HOME_CLASS, "Server");
    bb_node *rq = fx_node(x.m, x.f, "req", BB_DOMAIN_WIRE, "SendReqBatched", FX_L("go", "peers"),
                          FX_L("rid", "resps"));
    fx_meta(x.m, rq, BB_META_PORT, "P");
    bb_node *rr = fx_node(x.m, x.f, "serve", BB_DOMAIN_WIRE, "RecvReq", FX_NOL,
                          FX_L("t", "payload", "rid2"));
    fx_meta(x.m, rr, BB_META_PORT, "P");
    fx_meta(x.m, rr, BB_META_HOME_CLASS, "Client");
    fx_node(x.m, x.f, "answer", BB_DOMAIN_WIRE, "SendResp", FX_L("payload", "", "rid2"), FX_NOL);
    assert_int_equal(infer(&x), BB_OK);
    assert_string_equal(home(&x, "answer"), "Client");
    assert_string_equal(bbc_meta(fx_named(x.st.root, "answer"), BB_META_DEST_CLASS), "Server");
    assert_string_equal(bbc_meta(fx_named(x.st.root, "req"), BB_META_DEST_CLASS), "Client");
    bbc_state_free(&x.st);
}

static void test_receive_in_wrong_class(void **state)
{
    (void)state;
    t x;
    begin(&x);
    bb_node *p = fx_node(x.m, x.f, "p", BB_DOMAIN_SYSCALL, "Pulse", FX_NOL, FX_L("go"));
    fx_meta(x.m, p, BB_META_HOME_CLASS, "Server");
    bb_node *s = sample(&x, "s", "peers", "Client");
    fx_meta(x.m, s, BB_META_HOME_CLASS, "Server");
    bb_node *snd = fx_node(x.m, x.f, "send", BB_DOMAIN_WIRE, "Send", FX_L("go", "peers"), FX_NOL);
    fx_meta(x.m, snd, BB_META_PORT, "P");
    bb_node *r = fx_node(x.m, x.f, "recv", BB_DOMAIN_WIRE, "Recv", FX_NOL, FX_L("t", "v"));
    fx_meta(x.m, r, BB_META_PORT, "P");
    fx_meta(x.m, r, BB_META_HOME_CLASS, "Registry");
    assert_int_equal(infer(&x), BB_ECOMPILE);
    assert_int_equal(x.err.kind, BBC_E_CROSS_CLASS_DATAFLOW);
    assert_non_null(strstr(x.err.msg, "port 'P'"));
    assert_non_null(strstr(x.err.msg, "class Client"));
    assert_non_null(strstr(x.err.msg, "class Registry"));
    bbc_state_free(&x.st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_class),
        cmocka_unit_test(test_propagation_and_dest),
        cmocka_unit_test(test_cross_class),
        cmocka_unit_test(test_unresolved_dest),
        cmocka_unit_test(test_response_goes_to_requester),
        cmocka_unit_test(test_receive_in_wrong_class),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
