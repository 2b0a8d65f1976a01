/* Unit tests for the small public functions of libbbir that the per-module
 * test files do not reach: error formatting through a va_list, keypairs from
 * a seed (RFC 8032 vectors), transports from sockaddrs, the plugin
 * directory origin names. tests/integration/libbbir_api_coverage.sh checks
 * that every public function is used by some test. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <cmocka.h>

#include "bb/multiaddr.h"
#include "bb/peerid.h"
#include "bb/plugin_loader.h"
#include "bb/status.h"

/* ---- bb_error_setv ------------------------------------------------------------ */

static int set_via_va_list(bb_error *err, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = bb_error_setv(err, code, fmt, ap);
    va_end(ap);
    return rc;
}

static void test_error_setv(void **state)
{
    (void)state;
    bb_error err = {0};
    assert_int_equal(set_via_va_list(&err, BB_EPARSE, "%s: bad byte 0x%02x at %d", "m.onnx",
                                     0xab, 17),
                     BB_EPARSE);
    assert_int_equal(err.code, BB_EPARSE);
    assert_string_equal(err.msg, "m.onnx: bad byte 0xab at 17");
    /* NULL err: the code still comes back */
    assert_int_equal(set_via_va_list(NULL, BB_ELIMIT, "%d", 1), BB_ELIMIT);
    /* a message longer than the buffer is cut and stays terminated */
    char longer[2 * BB_ERROR_MSG_MAX];
    memset(longer, 'x', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    assert_int_equal(set_via_va_list(&err, BB_EIO, "%s", longer), BB_EIO);
    assert_int_equal(strlen(err.msg), BB_ERROR_MSG_MAX - 1);
}

/* ---- bb_keypair_from_seed: RFC 8032 section 7.1, tests 1 and 2 ---------------- */

static void unhex(const char *hex, uint8_t *out, size_t n)
{
    assert_int_equal(strlen(hex), 2 * n);
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        assert_int_equal(sscanf(hex + 2 * i, "%2x", &v), 1);
        out[i] = (uint8_t)v;
    }
}

static void test_keypair_from_seed_rfc8032(void **state)
{
    (void)state;
    static const struct {
        const char *seed, *pk, *msg, *sig;
    } vec[] = {
        {"9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60",
         "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a", "",
         "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e"
         "39701cf9b46bd25bf5f0595bbe24655141438e7a100b"},
        {"4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb",
         "3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c", "72",
         "92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f"
         "3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"},
    };
    for (size_t i = 0; i < sizeof vec / sizeof vec[0]; i++) {
        uint8_t seed[BB_ED25519_SEED_LEN], pk[BB_ED25519_PK_LEN], sig[BB_ED25519_SIG_LEN];
        uint8_t msg[1];
        size_t msg_len = strlen(vec[i].msg) / 2;
        unhex(vec[i].seed, seed, sizeof seed);
        unhex(vec[i].pk, pk, sizeof pk);
        unhex(vec[i].sig, sig, sizeof sig);
        unhex(vec[i].msg, msg, msg_len);
        bb_keypair kp;
        bb_error err = {0};
        assert_int_equal(bb_keypair_from_seed(seed, &kp, &err), BB_OK);
        assert_memory_equal(kp.pk, pk, sizeof pk);
        /* libsodium layout: sk = seed || pk */
        assert_memory_equal(kp.sk, seed, sizeof seed);
        assert_memory_equal(kp.sk + BB_ED25519_SEED_LEN, pk, sizeof pk);
        uint8_t got[BB_ED25519_SIG_LEN];
        assert_int_equal(bb_keypair_sign(&kp, msg, msg_len, got, &err), BB_OK);
        assert_memory_equal(got, sig, sizeof sig);
        assert_int_equal(bb_ed25519_verify(pk, msg, msg_len, got, &err), BB_OK);
        /* the same seed, the same PeerId */
        bb_peerid a, b;
        bb_peerid_from_pubkey(kp.pk, &a);
        assert_int_equal(bb_peerid_from_seed(seed, NULL, &b, &err), BB_OK);
        assert_true(bb_peerid_equal(&a, &b));
        bb_keypair_wipe(&kp);
    }
}

/* ---- bb_ma_transport_from_sockaddr ------------------------------------------------ */

static void text_of(const bb_ma_transport *t, char *text, size_t cap)
{
    uint8_t b[BB_MULTIADDR_MAX_LEN];
    size_t n = 0;
    bb_error err = {0};
    if (bb_ma_transport_encode(t, b, sizeof b, &n, &err))
        fail_msg("%s", err.msg);
    if (bb_multiaddr_format(b, n, text, cap, NULL, &err))
        fail_msg("%s", err.msg);
}

static void test_transport_from_sockaddr(void **state)
{
    (void)state;
    bb_ma_transport t;
    bb_error err = {0};
    char text[128];

    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_port = htons(7001)};
    assert_int_equal(inet_pton(AF_INET, "127.0.0.1", &sin.sin_addr), 1);
    assert_int_equal(bb_ma_transport_from_sockaddr((struct sockaddr *)&sin, sizeof sin,
                                                   BB_MA_TCP, &t, &err),
                     BB_OK);
    assert_int_equal(t.family, AF_INET);
    assert_int_equal(t.proto, BB_MA_TCP);
    assert_int_equal(t.port, 7001);
    text_of(&t, text, sizeof text);
    assert_string_equal(text, "/ip4/127.0.0.1/tcp/7001");

    struct sockaddr_in6 sin6 = {.sin6_family = AF_INET6, .sin6_port = htons(9)};
    assert_int_equal(inet_pton(AF_INET6, "2001:db8::7", &sin6.sin6_addr), 1);
    assert_int_equal(bb_ma_transport_from_sockaddr((struct sockaddr *)&sin6, sizeof sin6,
                                                   BB_MA_UDP, &t, &err),
                     BB_OK);
    text_of(&t, text, sizeof text);
    assert_string_equal(text, "/ip6/2001:db8::7/udp/9");

    /* an IPv4-mapped IPv6 address stays ip6 */
    assert_int_equal(inet_pton(AF_INET6, "::ffff:10.0.0.1", &sin6.sin6_addr), 1);
    assert_int_equal(bb_ma_transport_from_sockaddr((struct sockaddr *)&sin6, sizeof sin6,
                                                   BB_MA_TCP, &t, &err),
                     BB_OK);
    assert_int_equal(t.family, AF_INET6);
    text_of(&t, text, sizeof text);
    assert_string_equal(text, "/ip6/::ffff:10.0.0.1/tcp/9");

    /* refused: another protocol, a short sockaddr, another family */
    assert_int_equal(bb_ma_transport_from_sockaddr((struct sockaddr *)&sin, sizeof sin,
                                                   BB_MA_IP4, &t, &err),
                     BB_EINVAL);
    assert_non_null(strstr(err.msg, "not tcp or udp"));
    assert_int_equal(bb_ma_transport_from_sockaddr((struct sockaddr *)&sin, sizeof sin - 1,
                                                   BB_MA_TCP, &t, &err),
                     BB_EINVAL);
    assert_non_null(strstr(err.msg, "sockaddr_in:"));
    assert_int_equal(bb_ma_transport_from_sockaddr((struct sockaddr *)&sin6, sizeof sin,
                                                   BB_MA_TCP, &t, &err),
                     BB_EINVAL);
    assert_non_null(strstr(err.msg, "sockaddr_in6:"));
    assert_int_equal(bb_ma_transport_from_sockaddr(NULL, 0, BB_MA_TCP, &t, &err), BB_EINVAL);
    struct sockaddr_un un = {.sun_family = AF_UNIX};
    assert_int_equal(bb_ma_transport_from_sockaddr((struct sockaddr *)&un, sizeof un,
                                                   BB_MA_TCP, &t, &err),
                     BB_EUNSUPPORTED);
}

/* ---- bb_plugin_dir_origin_name ----------------------------------------------------- */

static void test_plugin_dir_origin_names(void **state)
{
    (void)state;
    assert_string_equal(bb_plugin_dir_origin_name(BB_PLUGIN_ORIGIN_EXPLICIT), "--plugin-path");
    assert_string_equal(bb_plugin_dir_origin_name(BB_PLUGIN_ORIGIN_ENV), "BB_PLUGIN_PATH");
    assert_string_equal(bb_plugin_dir_origin_name(BB_PLUGIN_ORIGIN_EXE),
                        "next to the executable");
    assert_string_equal(bb_plugin_dir_origin_name(BB_PLUGIN_ORIGIN_INSTALLED), "installed");
    assert_string_equal(bb_plugin_dir_origin_name((bb_plugin_dir_origin)42), "?");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_setv),
        cmocka_unit_test(test_keypair_from_seed_rfc8032),
        cmocka_unit_test(test_transport_from_sockaddr),
        cmocka_unit_test(test_plugin_dir_origin_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
