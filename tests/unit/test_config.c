/* Unit tests for bbd's node configuration (bbd/host/config.h): defaults,
 * every key of the JSON file, errors that name the key, and the derived
 * paths. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bbd/host/config.h"

#define PEER "12D3KooWBtg3aaRMjxwedh83aGiUkwSxDwUZkzuJcfaqUmo7R3pq"

static int load(bbd_config *c, const char *json, bb_error *err)
{
    return bbd_config_load_mem(c, json, strlen(json), "node.json", "/etc/bb", err);
}

static void expect_error(const char *json, int code, const char *needle)
{
    bbd_config c;
    bb_error err = {0};
    bbd_config_init(&c);
    int rc = load(&c, json, &err);
    if (rc != code || !strstr(err.msg, needle))
        fail_msg("%s: got %d '%s', wanted %d containing '%s'", json, rc, err.msg, code, needle);
    bbd_config_free(&c);
}

static void test_defaults(void **state)
{
    (void)state;
    bbd_config c;
    bbd_config_init(&c);
    assert_int_equal(c.log_level, BB_LOG_INFO);
    assert_true(c.bootstrap_all);
    assert_true(c.snapshot_on_exit);
    assert_false(c.fresh);
    assert_int_equal(c.caps.bus_capacity, 1024);
    assert_int_equal(c.transport.max_frame_bytes, 64u << 20);
    assert_null(c.metrics);
    assert_int_equal(c.targets.n, 0);
    bbd_config_free(&c);
}

static void test_every_key(void **state)
{
    (void)state;
    bbd_config c;
    bb_error err = {0};
    bbd_config_init(&c);
    const char *json =
        "{\"artifact\": \"model.onnx\", \"targets\": [\"Client\", \"Server\"],\n"
        " \"listen\": [\"/ip4/127.0.0.1/tcp/7001\", \"/ip4/127.0.0.1/udp/7001\"],\n"
        " \"peers\": {\"" PEER "\": [\"/ip4/10.0.0.2/tcp/7001\", \"/ip4/10.0.0.2/udp/7001\"]},\n"
        " \"state_dir\": \"state\", \"control\": \"/run/bb.sock\", \"plugin_path\": [\"p1\", \"/p2\"],\n"
        " \"log_level\": \"debug\", \"log_file\": \"bbd.log\", \"metrics\": \"/ip4/127.0.0.1/tcp/9100\",\n"
        " \"key_file\": \"/keys/node.key\", \"fresh\": true, \"bootstrap\": \"none\",\n"
        " \"snapshot_on_exit\": false, \"seed\": \"18446744073709551615\", \"cycle_op_budget\": 500,\n"
        " \"control_max_line_bytes\": 4096, \"control_max_clients\": 3,\n"
        " \"max_snapshot_bytes\": 1000000,\n"
        " \"caps\": {\"preset\": \"edge\", \"bus_capacity\": 7, \"backoff_max_ns\": 1000000000},\n"
        " \"transport\": {\"udp_payload_bytes\": 512, \"connect_timeout_ms\": 250},\n"
        " \"components\": {\"model\": {\"delta\": 2}}}\n";
    assert_int_equal(load(&c, json, &err), BB_OK);
    assert_string_equal(c.artifact, "/etc/bb/model.onnx");
    assert_int_equal(c.targets.n, 2);
    assert_string_equal(c.targets.v[1], "Server");
    assert_int_equal(c.listen.n, 2);
    assert_int_equal(c.n_peers, 2);
    assert_string_equal(c.peers[1].addr_text, "/ip4/10.0.0.2/udp/7001");
    assert_string_equal(c.state_dir, "/etc/bb/state");
    assert_string_equal(c.control, "/run/bb.sock");
    assert_int_equal(c.plugin_path.n, 2);
    assert_string_equal(c.plugin_path.v[0], "/etc/bb/p1");
    assert_string_equal(c.plugin_path.v[1], "/p2");
    assert_int_equal(c.log_level, BB_LOG_DEBUG);
    assert_string_equal(c.log_file, "/etc/bb/bbd.log");
    assert_string_equal(c.metrics, "/ip4/127.0.0.1/tcp/9100");
    assert_string_equal(c.key_file, "/keys/node.key");
    assert_true(c.fresh);
    assert_false(c.bootstrap_all);
    assert_false(c.snapshot_on_exit);
    assert_true(c.has_seed);
    assert_true(c.seed == UINT64_MAX);
    assert_int_equal(c.cycle_op_budget, 500);
    assert_int_equal(c.control_max_line_bytes, 4096);
    assert_int_equal(c.control_max_clients, 3);
    assert_int_equal(c.max_snapshot_bytes, 1000000);
    /* the preset applies first, keys after it win */
    assert_int_equal(c.caps.bus_capacity, 7);
    assert_int_equal(c.caps.max_envelope_bytes, 1u << 20);
    assert_true(c.caps.backoff_max_ns == 1000000000ull);
    assert_int_equal(c.transport.udp_payload_bytes, 512);
    assert_true(c.transport.connect_timeout_ms == 250);
    assert_string_equal(c.components_json, "{\"model\":{\"delta\":2}}");
    assert_int_equal(bbd_config_finish(&c, &err), BB_OK);
    bbd_config_free(&c);
}

static void test_targets_as_string_and_peer_as_string(void **state)
{
    (void)state;
    bbd_config c;
    bb_error err = {0};
    bbd_config_init(&c);
    assert_int_equal(load(&c, "{\"targets\": \"A,B,C\", \"peers\": {\"" PEER
                              "\": \"/ip4/1.2.3.4/tcp/1\"}}",
                          &err),
                     BB_OK);
    assert_int_equal(c.targets.n, 3);
    assert_string_equal(c.targets.v[2], "C");
    assert_int_equal(c.n_peers, 1);
    bbd_config_free(&c);
}

static void test_errors_name_the_key(void **state)
{
    (void)state;
    expect_error("{\"listn\": []}", BB_ECONFIG, "unknown key 'listn'");
    expect_error("{\"caps\": {\"bus_capacty\": 1}}", BB_ECONFIG, "unknown key 'caps.bus_capacty'");
    expect_error("{\"transport\": {\"x\": 1}}", BB_ECONFIG, "unknown key 'transport.x'");
    expect_error("{\"listen\": 5}", BB_ECONFIG, "key 'listen' must be");
    expect_error("{\"fresh\": \"yes\"}", BB_ECONFIG, "key 'fresh' must be true or false");
    expect_error("{\"caps\": {\"bus_capacity\": -1}}", BB_ECONFIG, "caps.bus_capacity");
    expect_error("{\"caps\": {\"bus_capacity\": 1.5}}", BB_ECONFIG, "caps.bus_capacity");
    expect_error("{\"caps\": {\"peer_failure_threshold\": 5000000000}}", BB_ECONFIG,
                 "caps.peer_failure_threshold");
    expect_error("{\"caps\": {\"preset\": \"tiny\"}}", BB_ECONFIG, "caps.preset");
    expect_error("{\"bootstrap\": \"some\"}", BB_ECONFIG, "'bootstrap'");
    expect_error("{\"log_level\": \"loud\"}", BB_EINVAL, "loud");
    expect_error("{\"seed\": \"-3\"}", BB_ECONFIG, "'seed'");
    expect_error("{\"components\": []}", BB_ECONFIG, "'components'");
    expect_error("{\"peers\": {\"notapeer\": \"/ip4/1.2.3.4/tcp/1\"}}", BB_EUNSUPPORTED, "notapeer");
    expect_error("{\"peers\": {\"0OIl\": \"/ip4/1.2.3.4/tcp/1\"}}", BB_EPARSE, "0OIl");
    expect_error("{\"peers\": {\"" PEER "\": \"/ip4/1.2.3.4\"}}", BB_EUNSUPPORTED, "peer");
    expect_error("{\"peers\": {\"" PEER "\": [1]}}", BB_ECONFIG, "'peers'");
    expect_error("{\"state_dir\": \"\"}", BB_ECONFIG, "non-empty");
    expect_error("[1, 2]", BB_ECONFIG, "top level must be a JSON object");
    expect_error("{\"a\": }", BB_ECONFIG, "line 1, column");
    expect_error("{\n\n  \"a\" 1}", BB_ECONFIG, "line 3");
    expect_error("{} {}", BB_ECONFIG, "unexpected text after");
}

/* Issue 21: "caps": {"bus_capacity": 2^53} got as far as the engine's
 * allocation. Every numeric key of the caps and transport objects (and the
 * node's own) has a maximum bbd.json(5) documents ("At most N."): N is
 * accepted, N + 1 is refused naming the key, and so is 2^53. The page is
 * the list, so a key without a documented maximum fails here. */
static void test_every_cap_has_a_documented_maximum(void **state)
{
    (void)state;
    FILE *f = fopen("man/bbd.json.5", "r");
    assert_non_null(f);
    char line[512], key[128] = "", section[128] = "";
    int checked = 0, in_sub = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long long max;
        char k[128];
        if (sscanf(line, ".BR %127s", k) == 1 && strstr(line, "(object)") &&
            (!strcmp(k, "caps") || !strcmp(k, "transport"))) {
            snprintf(section, sizeof section, "%s", k);
            in_sub = 1;
        } else if (!strncmp(line, ".RE", 3)) {
            in_sub = 0;
        } else if (sscanf(line, ".B %127s", k) == 1 && in_sub) {
            snprintf(key, sizeof key, "%s", k);
        } else if (sscanf(line, ".BR %127s", k) == 1 && strstr(line, "(integer)") && !in_sub) {
            snprintf(key, sizeof key, "%s", k);
            section[0] = '\0';
        } else if (sscanf(line, "At most %llu.", &max) == 1) {
            assert_true(key[0]);
            char dotted[272], value[3][32];
            snprintf(dotted, sizeof dotted, "%s%s%s", section, section[0] ? "." : "", key);
            snprintf(value[0], sizeof value[0], "%llu", max);
            snprintf(value[1], sizeof value[1], "%llu", max + 1);
            snprintf(value[2], sizeof value[2], "9007199254740992");
            for (int i = 0; i < 3; i++) {
                char json[512];
                if (section[0])
                    snprintf(json, sizeof json, "{\"%s\": {\"%s\": %s}}", section, key,
                             value[i]);
                else
                    snprintf(json, sizeof json, "{\"%s\": %s}", key, value[i]);
                if (i > 0) {
                    expect_error(json, BB_ECONFIG, dotted);
                    continue;
                }
                bbd_config c;
                bb_error err = {0};
                bbd_config_init(&c);
                if (load(&c, json, &err) != BB_OK)
                    fail_msg("%s: the documented maximum is refused: %s", json, err.msg);
                bbd_config_free(&c);
            }
            key[0] = '\0';
            checked++;
        }
    }
    fclose(f);
    /* 20 caps, 12 transport keys, the node's own */
    if (checked < 36)
        fail_msg("only %d documented maxima found in man/bbd.json.5", checked);
}

static void test_size_cap(void **state)
{
    (void)state;
    bbd_config c;
    bb_error err = {0};
    bbd_config_init(&c);
    assert_int_equal(bbd_config_load_mem(&c, "{}", BBD_CONFIG_MAX_BYTES + 1, "big.json", NULL,
                                         &err),
                     BB_ELIMIT);
    assert_non_null(strstr(err.msg, "big.json"));
    bbd_config_free(&c);
}

static void test_load_file(void **state)
{
    (void)state;
    char dir[] = "/tmp/bbd-config-XXXXXX", path[128];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/node.json", dir);
    FILE *f = fopen(path, "w");
    fputs("{\"artifact\": \"a.onnx\", \"state_dir\": \"s\"}", f);
    fclose(f);
    bbd_config c;
    bb_error err = {0};
    bbd_config_init(&c);
    assert_int_equal(bbd_config_load_file(&c, path, &err), BB_OK);
    char want[160];
    snprintf(want, sizeof want, "%s/a.onnx", dir);
    assert_string_equal(c.artifact, want);
    assert_int_equal(bbd_config_finish(&c, &err), BB_OK);
    snprintf(want, sizeof want, "%s/s/control.sock", dir);
    assert_string_equal(c.control, want);
    snprintf(want, sizeof want, "%s/s/node.key", dir);
    assert_string_equal(c.key_file, want);
    bbd_config_free(&c);
    bbd_config_init(&c);
    snprintf(want, sizeof want, "%s/missing.json", dir);
    assert_int_equal(bbd_config_load_file(&c, want, &err), BB_ENOTFOUND);
    assert_non_null(strstr(err.msg, "missing.json"));
    assert_int_equal(bbd_config_load_file(&c, dir, &err), BB_EIO);
    bbd_config_free(&c);
    unlink(path);
    rmdir(dir);
}

static void test_setters(void **state)
{
    (void)state;
    bbd_config c;
    bb_error err = {0};
    bbd_config_init(&c);
    assert_int_equal(bbd_config_set_targets(&c, "A,B", &err), BB_OK);
    assert_int_equal(c.targets.n, 2);
    assert_int_equal(bbd_config_set_targets(&c, "A,,B", &err), BB_EINVAL);
    assert_int_equal(bbd_config_set_targets(&c, "A,", &err), BB_EINVAL);
    assert_int_equal(bbd_config_add_peer_arg(&c, PEER "=/ip4/127.0.0.1/udp/9", &err), BB_OK);
    assert_int_equal(c.n_peers, 1);
    assert_int_equal(bbd_config_add_peer_arg(&c, "=/ip4/127.0.0.1/udp/9", &err), BB_EINVAL);
    assert_int_equal(bbd_config_add_peer_arg(&c, PEER, &err), BB_EINVAL);
    assert_int_equal(bbd_config_add_peer_arg(&c, PEER "=/ip4/999.0.0.1/udp/9", &err), BB_EPARSE);
    bbd_config_clear_peers(&c);
    assert_int_equal(c.n_peers, 0);
    bbd_config_free(&c);
}

/* security, access lists, dial rules, signers, and /p2p/ peer addresses */
static void test_secure_keys(void **state)
{
    (void)state;
    bbd_config c;
    bb_error err = {0};
    bbd_config_init(&c);
    assert_int_equal(c.transport.security, BBD_SECURITY_NOISE);
    const char *json = "{\"security\": \"off\", \"allow\": [\"" PEER "\"], \"deny\": \"" PEER "\",\n"
                       " \"require_signed_by\": [\"" PEER "\"],\n"
                       " \"dial_allow\": [\"10.0.0.0/8\", \"fd00::/8\"], \"dial_deny\": \"10.1.2.3\",\n"
                       " \"transport\": {\"max_connections_per_source\": 4, \"idle_timeout_ms\": 5,\n"
                       "               \"min_rx_bytes_per_s\": 6}}";
    assert_int_equal(load(&c, json, &err), BB_OK);
    assert_int_equal(c.transport.security, BBD_SECURITY_OFF);
    assert_int_equal(c.allow.n, 1);
    assert_int_equal(c.deny.n, 1);
    assert_int_equal(c.require_signed_by.n, 1);
    assert_int_equal(c.dial_allow.n, 2);
    assert_int_equal(c.dial_deny.n, 1);
    assert_int_equal(c.dial_deny.v[0].prefix, 32);
    uint8_t in[4] = {10, 200, 0, 1}, out[4] = {11, 0, 0, 1};
    assert_true(bbd_cidr_contains(&c.dial_allow.v[0], AF_INET, in));
    assert_false(bbd_cidr_contains(&c.dial_allow.v[0], AF_INET, out));
    assert_false(bbd_cidr_contains(&c.dial_allow.v[1], AF_INET, in)); /* other family */
    assert_int_equal(c.transport.max_connections_per_source, 4);
    assert_int_equal(c.transport.idle_timeout_ms, 5);
    assert_int_equal(c.transport.min_rx_bytes_per_s, 6);
    assert_int_equal(bbd_config_set_security(&c, "on", &err), BB_OK);
    assert_int_equal(c.transport.security, BBD_SECURITY_NOISE);
    assert_int_equal(bbd_config_set_security(&c, "maybe", &err), BB_EINVAL);
    /* a peer given as MULTIADDR/p2p/ID; an address naming another PeerId */
    assert_int_equal(bbd_config_add_peer_arg(&c, "/ip4/127.0.0.1/tcp/9/p2p/" PEER, &err), BB_OK);
    assert_int_equal(c.n_peers, 1);
    assert_int_equal(bbd_config_add_peer_arg(&c, "/ip4/127.0.0.1/tcp/9", &err), BB_EINVAL);
    assert_non_null(strstr(err.msg, "/p2p/PEERID"));
    assert_int_equal(bbd_config_add_peer_arg(&c, "12D3KooWSrKnMZUcSxK8G7wmBbXdU8nFEfWGhLu6H8xjn8LmCSJb"
                                                 "=/ip4/127.0.0.1/tcp/9/p2p/" PEER, &err),
                     BB_EINVAL);
    assert_non_null(strstr(err.msg, "names another PeerId"));
    bbd_config_free(&c);
    expect_error("{\"security\": \"maybe\"}", BB_ECONFIG, "'security'");
    expect_error("{\"allow\": [\"nope\"]}", BB_EUNSUPPORTED, "allow 'nope'");
    expect_error("{\"deny\": [1]}", BB_ECONFIG, "'deny'");
    expect_error("{\"dial_allow\": [\"10.0.0.0/33\"]}", BB_EINVAL, "prefix must be 0..32");
    expect_error("{\"dial_deny\": \"host.example\"}", BB_EINVAL, "not an IP address");
}

static void test_finish_checks(void **state)
{
    (void)state;
    bbd_config c;
    bb_error err = {0};
    bbd_config_init(&c);
    assert_int_equal(bbd_config_set_str(&c.state_dir, "/tmp/x", &err), BB_OK);
    assert_int_equal(bbd_config_strlist_add(&c.listen, "/ip4/127.0.0.1/tcp/notaport", "l", &err),
                     BB_OK);
    assert_int_not_equal(bbd_config_finish(&c, &err), BB_OK);
    assert_non_null(strstr(err.msg, "notaport"));
    bbd_strlist_clear(&c.listen);
    assert_int_equal(bbd_config_set_str(&c.metrics, "/ip4/127.0.0.1/udp/9100", &err), BB_OK);
    assert_int_equal(bbd_config_finish(&c, &err), BB_ECONFIG);
    assert_non_null(strstr(err.msg, "not a /tcp"));
    assert_int_equal(bbd_config_set_str(&c.metrics, NULL, &err), BB_OK);
    char longp[200];
    memset(longp, 'a', sizeof longp - 1);
    longp[0] = '/';
    longp[sizeof longp - 1] = '\0';
    assert_int_equal(bbd_config_set_str(&c.control, longp, &err), BB_OK);
    assert_int_equal(bbd_config_finish(&c, &err), BB_ECONFIG);
    assert_non_null(strstr(err.msg, "longer than"));
    bbd_config_free(&c);
    /* the state dir defaults to $STATE_DIRECTORY under systemd */
    bbd_config_init(&c);
    setenv("STATE_DIRECTORY", "/var/lib/bb-node:/other", 1);
    unsetenv("RUNTIME_DIRECTORY");
    assert_int_equal(bbd_config_finish(&c, &err), BB_OK);
    assert_string_equal(c.state_dir, "/var/lib/bb-node");
    assert_string_equal(c.control, "/var/lib/bb-node/control.sock");
    unsetenv("STATE_DIRECTORY");
    bbd_config_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_every_key),
        cmocka_unit_test(test_targets_as_string_and_peer_as_string),
        cmocka_unit_test(test_errors_name_the_key),
        cmocka_unit_test(test_every_cap_has_a_documented_maximum),
        cmocka_unit_test(test_size_cap),
        cmocka_unit_test(test_load_file),
        cmocka_unit_test(test_setters),
        cmocka_unit_test(test_secure_keys),
        cmocka_unit_test(test_finish_checks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
