/* Unit tests for bbd's small host pieces: the logfmt log (bbd/host/log.h),
 * sd_notify datagrams (notify.h), the snapshot file (snapshot_file.h), the
 * state-dir lock (state_dir.h), values as JSON (bb/value_json.h) and the
 * metrics exposition text (metrics.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "bb/peerid.h"
#include "bbd/host/log.h"
#include "bbd/host/metrics.h"
#include "bbd/host/notify.h"
#include "bbd/host/snapshot_file.h"
#include "bbd/host/state_dir.h"
#include "bb/value_json.h"

static char *tmpdir(void)
{
    static char dir[64];
    snprintf(dir, sizeof dir, "/tmp/bbd-parts-XXXXXX");
    assert_non_null(mkdtemp(dir));
    return dir;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    static char buf[65536];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* ---- log ------------------------------------------------------------------- */

static void test_log_lines(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "%s/bbd.log", tmpdir());
    bbd_log log;
    bb_error err = {0};
    assert_int_equal(bbd_log_open(&log, BB_LOG_INFO, path, &err), BB_OK);
    bbd_logline l;
    assert_true(bbd_log_begin(&l, &log, BB_LOG_WARN, "engine", "peer down"));
    bbd_log_str(&l, "peer", "12D3Koo");
    bbd_log_str(&l, "evil", "a \"b\"\nc=d\\");
    bbd_log_u64(&l, "n", 42);
    bbd_log_i64(&l, "d", -7);
    bbd_log_str(&l, "empty", "");
    bbd_log_end(&l);
    assert_false(bbd_log_begin(&l, &log, BB_LOG_DEBUG, "engine", "filtered"));
    bbd_log_msg(&log, BB_LOG_ERROR, "daemon", "x");
    bbd_log_close(&log);
    const char *text = slurp(path);
    assert_non_null(strstr(text, " level=warn comp=engine msg=\"peer down\" peer=12D3Koo "
                                 "evil=\"a \\\"b\\\"\\nc=d\\\\\" n=42 d=-7 empty=\"\"\n"));
    assert_non_null(strstr(text, "level=error comp=daemon msg=x\n"));
    assert_null(strstr(text, "filtered"));
    assert_true(strncmp(text, "ts=", 3) == 0);
    /* exactly two lines: a value with a newline never splits one */
    int lines = 0;
    for (const char *p = text; *p; p++)
        lines += *p == '\n';
    assert_int_equal(lines, 2);
    unlink(path);
}

static void test_log_long_line_is_cut(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "%s/long.log", tmpdir());
    bbd_log log;
    assert_int_equal(bbd_log_open(&log, BB_LOG_DEBUG, path, NULL), BB_OK);
    char *big = malloc(3 * BBD_LOG_LINE_MAX);
    memset(big, 'x', 3 * BBD_LOG_LINE_MAX - 1);
    big[3 * BBD_LOG_LINE_MAX - 1] = '\0';
    bbd_logline l;
    assert_true(bbd_log_begin(&l, &log, BB_LOG_INFO, "c", "m"));
    bbd_log_str(&l, "big", big);
    bbd_log_end(&l);
    bbd_log_close(&log);
    free(big);
    const char *text = slurp(path);
    size_t n = strlen(text);
    assert_true(n <= BBD_LOG_LINE_MAX);
    assert_memory_equal(text + n - 4, "...\n", 4);
    unlink(path);
}

static void test_log_levels_and_reopen(void **state)
{
    (void)state;
    bb_log_level lv;
    bb_error err = {0};
    assert_int_equal(bbd_log_level_parse("debug", &lv, &err), BB_OK);
    assert_int_equal(lv, BB_LOG_DEBUG);
    assert_int_equal(bbd_log_level_parse("verbose", &lv, &err), BB_EINVAL);
    assert_non_null(strstr(err.msg, "verbose"));
    assert_string_equal(bbd_log_level_name(BB_LOG_WARN), "warn");

    char path[128], moved[140];
    snprintf(path, sizeof path, "%s/rot.log", tmpdir());
    snprintf(moved, sizeof moved, "%s.1", path);
    bbd_log log;
    assert_int_equal(bbd_log_open(&log, BB_LOG_INFO, path, &err), BB_OK);
    bbd_log_msg(&log, BB_LOG_INFO, "a", "before");
    assert_int_equal(rename(path, moved), 0); /* logrotate */
    assert_int_equal(bbd_log_reopen(&log, &err), BB_OK);
    bbd_log_msg(&log, BB_LOG_INFO, "a", "after");
    bbd_log_close(&log);
    assert_non_null(strstr(slurp(moved), "msg=before"));
    assert_non_null(strstr(slurp(path), "msg=after"));
    assert_null(strstr(slurp(path), "before"));
    assert_int_equal(bbd_log_open(&log, BB_LOG_INFO, "/nonexistent-dir/x.log", &err), BB_EIO);
    assert_non_null(strstr(err.msg, "/nonexistent-dir/x.log"));
    unlink(path);
    unlink(moved);
}

static void test_log_journal_prefix(void **state)
{
    (void)state;
    /* under systemd, stderr is the journal stream $JOURNAL_STREAM names */
    int saved = dup(2);
    char path[128];
    snprintf(path, sizeof path, "%s/journal", tmpdir());
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0600);
    dup2(fd, 2);
    struct stat st;
    fstat(2, &st);
    char js[64];
    snprintf(js, sizeof js, "%llu:%llu", (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino);
    setenv("JOURNAL_STREAM", js, 1);
    bbd_log log;
    assert_int_equal(bbd_log_open(&log, BB_LOG_DEBUG, NULL, NULL), BB_OK);
    assert_true(log.journal);
    bbd_log_msg(&log, BB_LOG_WARN, "t", "w");
    bbd_log_msg(&log, BB_LOG_DEBUG, "t", "d");
    bbd_log_close(&log);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(fd);
    unsetenv("JOURNAL_STREAM");
    const char *text = slurp(path);
    assert_non_null(strstr(text, "<4>level=warn comp=t msg=w\n"));
    assert_non_null(strstr(text, "<7>level=debug comp=t msg=d\n"));
    unlink(path);
}

/* ---- sd_notify ----------------------------------------------------------------- */

static int dgram_server(const struct sockaddr_un *sa, socklen_t len)
{
    int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (const struct sockaddr *)sa, len), 0);
    return fd;
}

static void expect_dgram(int fd, const char *want)
{
    char buf[1024];
    ssize_t n = recv(fd, buf, sizeof buf - 1, MSG_DONTWAIT);
    assert_true(n > 0);
    buf[n] = '\0';
    assert_string_equal(buf, want);
}

static void test_notify_path_socket(void **state)
{
    (void)state;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s/notify", tmpdir());
    int fd = dgram_server(&sa, sizeof sa);
    setenv("NOTIFY_SOCKET", sa.sun_path, 1);
    char pid[32];
    snprintf(pid, sizeof pid, "%ld", (long)getpid());
    setenv("WATCHDOG_USEC", "3000000", 1);
    setenv("WATCHDOG_PID", pid, 1);
    bbd_notify n;
    bb_error err = {0};
    assert_int_equal(bbd_notify_init(&n, &err), BB_OK);
    assert_true(bbd_notify_enabled(&n));
    assert_int_equal(bbd_notify_watchdog_period_ms(&n), 1500);
    assert_int_equal(bbd_notify_send(&n, "READY=1"), BB_OK);
    expect_dgram(fd, "READY=1");
    assert_int_equal(bbd_notify_status(&n, "two\nlines"), BB_OK);
    expect_dgram(fd, "STATUS=two lines");
    bbd_notify_close(&n);
    /* a watchdog meant for another process is not ours */
    setenv("WATCHDOG_PID", "1", 1);
    assert_int_equal(bbd_notify_init(&n, &err), BB_OK);
    assert_int_equal(bbd_notify_watchdog_period_ms(&n), 0);
    bbd_notify_close(&n);
    unsetenv("WATCHDOG_USEC");
    unsetenv("WATCHDOG_PID");
    close(fd);
    unlink(sa.sun_path);
}

static void test_notify_abstract_and_off(void **state)
{
    (void)state;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    char name[64];
    int k = snprintf(name, sizeof name, "bbd-notify-test-%ld", (long)getpid());
    memcpy(sa.sun_path + 1, name, (size_t)k);
    int fd = dgram_server(&sa, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + k));
    char env[80];
    snprintf(env, sizeof env, "@%s", name);
    setenv("NOTIFY_SOCKET", env, 1);
    bbd_notify n;
    bb_error err = {0};
    assert_int_equal(bbd_notify_init(&n, &err), BB_OK);
    assert_int_equal(bbd_notify_send(&n, "WATCHDOG=1"), BB_OK);
    expect_dgram(fd, "WATCHDOG=1");
    bbd_notify_close(&n);
    close(fd);
    setenv("NOTIFY_SOCKET", "relative/path", 1);
    assert_int_equal(bbd_notify_init(&n, &err), BB_ECONFIG);
    assert_non_null(strstr(err.msg, "relative/path"));
    unsetenv("NOTIFY_SOCKET");
    assert_int_equal(bbd_notify_init(&n, &err), BB_OK);
    assert_false(bbd_notify_enabled(&n));
    assert_int_equal(bbd_notify_send(&n, "READY=1"), BB_OK);
    assert_int_equal(bbd_notify_watchdog_period_ms(&n), 0);
    bbd_notify_close(&n);
}

/* ---- snapshot file and state dir ------------------------------------------------ */

static void test_snapshot_file(void **state)
{
    (void)state;
    char path[128];
    snprintf(path, sizeof path, "%s/snapshot.bbs", tmpdir());
    uint8_t data[1000];
    for (size_t i = 0; i < sizeof data; i++)
        data[i] = (uint8_t)(i * 7);
    bb_error err = {0};
    uint8_t *back;
    size_t len;
    assert_int_equal(bbd_snapshot_read(path, 1 << 20, &back, &len, &err), BB_ENOTFOUND);
    assert_int_equal(bbd_snapshot_write(path, data, sizeof data, &err), BB_OK);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(bbd_snapshot_read(path, 1 << 20, &back, &len, &err), BB_OK);
    assert_int_equal(len, sizeof data);
    assert_memory_equal(back, data, len);
    free(back);
    /* over the limit: refused before allocating */
    assert_int_equal(bbd_snapshot_read(path, 999, &back, &len, &err), BB_ELIMIT);
    assert_non_null(strstr(err.msg, path));
    /* one flipped byte: the checksum catches it */
    int fd = open(path, O_RDWR);
    uint8_t b;
    assert_int_equal(pread(fd, &b, 1, BBD_SNAPSHOT_HEADER_LEN + 500), 1);
    b ^= 1;
    assert_int_equal(pwrite(fd, &b, 1, BBD_SNAPSHOT_HEADER_LEN + 500), 1);
    assert_int_equal(bbd_snapshot_read(path, 1 << 20, &back, &len, &err), BB_EDECODE);
    assert_non_null(strstr(err.msg, "checksum"));
    /* truncated */
    assert_int_equal(ftruncate(fd, BBD_SNAPSHOT_HEADER_LEN + 10), 0);
    assert_int_equal(bbd_snapshot_read(path, 1 << 20, &back, &len, &err), BB_EDECODE);
    /* not a snapshot at all */
    assert_int_equal(ftruncate(fd, 3), 0);
    assert_int_equal(bbd_snapshot_read(path, 1 << 20, &back, &len, &err), BB_EDECODE);
    assert_non_null(strstr(err.msg, "bad header"));
    close(fd);
    unlink(path);
}

static void test_state_dir_lock(void **state)
{
    (void)state;
    char dir[128];
    snprintf(dir, sizeof dir, "%s/a/b/state", tmpdir());
    int fd1 = -1, fd2 = -1;
    bb_error err = {0};
    assert_int_equal(bbd_state_dir_lock(dir, &fd1, &err), BB_OK);
    struct stat st;
    assert_int_equal(stat(dir, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    /* flock locks belong to the open file: a second open cannot take it */
    assert_int_equal(bbd_state_dir_lock(dir, &fd2, &err), BB_ESTATE);
    char pid[32];
    snprintf(pid, sizeof pid, "pid %ld", (long)getpid());
    assert_non_null(strstr(err.msg, pid));
    close(fd1);
    assert_int_equal(bbd_state_dir_lock(dir, &fd2, &err), BB_OK);
    close(fd2);
    assert_int_equal(bbd_mkdirs("/proc/no/such", &err), BB_EIO);
}

/* ---- values as JSON -------------------------------------------------------------- */

static cJSON *parse(const char *s)
{
    cJSON *j = cJSON_Parse(s);
    assert_non_null(j);
    return j;
}

static void test_value_json_roundtrip(void **state)
{
    (void)state;
    const char *forms[] = {
        "{\"type\":\"tensor\",\"dtype\":\"float\",\"shape\":[2,2],\"data\":[1,2,3,4.5]}",
        "{\"type\":\"tensor\",\"dtype\":\"int64\",\"shape\":[3],\"data\":[-1,0,9007199254740992]}",
        "{\"type\":\"tensor\",\"dtype\":\"bool\",\"shape\":[2],\"data\":[true,false]}",
        "{\"type\":\"tensor\",\"dtype\":\"uint8\",\"shape\":[],\"data\":[255]}",
        "{\"type\":\"U64\",\"value\":7}",
        "{\"type\":\"RequestId\",\"value\":\"18446744073709551615\"}",
        "{\"type\":\"Trigger\"}",
        "{\"type\":\"Bytes\",\"base64\":\"AAEC\"}",
        "{\"type\":\"PeerId\",\"peer\":\"12D3KooWBtg3aaRMjxwedh83aGiUkwSxDwUZkzuJcfaqUmo7R3pq\"}",
        "{\"type\":\"Multiaddress\",\"addr\":\"/ip4/127.0.0.1/udp/7001\"}",
        "{\"type\":\"Composite\",\"items\":[{\"type\":\"U64\",\"value\":1},"
        "{\"type\":\"tensor\",\"dtype\":\"double\",\"shape\":[1],\"data\":[0.25]}]}",
        "{\"type\":\"address_vec\",\"items\":[{\"type\":\"Multiaddress\",\"addr\":\"/ip4/1.2.3.4/tcp/5\"}]}",
    };
    for (size_t i = 0; i < sizeof forms / sizeof *forms; i++) {
        cJSON *in = parse(forms[i]);
        bb_json_input v;
        bb_error err = {0};
        if (bb_json_input_parse("x", in, &v, &err) != BB_OK)
            fail_msg("%s: %s", forms[i], err.msg);
        assert_non_null(v.value);
        cJSON *out = bb_value_to_json(v.value, 100);
        assert_non_null(out);
        if (!cJSON_Compare(in, out, true)) {
            char *t = cJSON_PrintUnformatted(out);
            fail_msg("%s came back as %s", forms[i], t);
        }
        cJSON_Delete(out);
        cJSON_Delete(in);
        bb_json_input_free(&v);
    }
}

static void test_value_json_shortcuts(void **state)
{
    (void)state;
    bb_json_input v;
    bb_error err = {0};
    cJSON *j = parse("[[1,2,3],[4,5,6]]");
    assert_int_equal(bb_json_input_parse("batch", j, &v, &err), BB_OK);
    assert_int_equal(v.value->u.tensor.dtype, BB_DT_FLOAT);
    assert_int_equal(v.value->u.tensor.ndim, 2);
    assert_int_equal(v.value->u.tensor.dims[1], 3);
    assert_true(bb_tensor_f32(v.value)[5] == 6.0f);
    bb_json_input_free(&v);
    cJSON_Delete(j);
    j = parse("null");
    assert_int_equal(bb_json_input_parse("t", j, &v, &err), BB_OK);
    assert_int_equal(v.value->type->kind, BB_VK_TRIGGER);
    bb_json_input_free(&v);
    cJSON_Delete(j);
    /* raw bytes: TensorProto or any wire encoding, decoded by the engine */
    j = parse("{\"tensor_proto\":\"CAEQAQ==\"}");
    assert_int_equal(bb_json_input_parse("t", j, &v, &err), BB_OK);
    assert_null(v.value);
    assert_int_equal(v.len, 4);
    bb_json_input_free(&v);
    cJSON_Delete(j);
    /* big tensors print as TensorProto */
    int64_t dims[1] = {1000};
    bb_value *big = bb_value_tensor_new(BB_DT_FLOAT, 1, dims);
    cJSON *out = bb_value_to_json(big, 10);
    assert_non_null(cJSON_GetObjectItem(out, "tensor_proto"));
    assert_null(cJSON_GetObjectItem(out, "data"));
    cJSON_Delete(out);
    bb_value_unref(big);
}

static void test_value_json_errors(void **state)
{
    (void)state;
    static const struct {
        const char *json, *needle;
    } bad[] = {
        {"[[1,2],[3]]", "ragged"},
        {"[1,\"a\"]", "element 1"},
        {"{\"dtype\":\"int8\",\"data\":[300]}", "element 0"},
        {"{\"dtype\":\"int32\",\"data\":[1.5]}", "element 0"},
        {"{\"dtype\":\"float16\",\"data\":[1]}", "dtype"},
        {"{\"dtype\":\"float\",\"shape\":[3],\"data\":[1,2]}", "shape holds 3"},
        {"{\"dtype\":\"float\",\"shape\":[-1],\"data\":[]}", "bad shape"},
        {"{\"data\":5}", "\"data\" must be an array"},
        {"{\"type\":\"Nope\"}", "unknown type"},
        {"{\"type\":\"U64\",\"value\":-1}", "non-negative"},
        {"{\"type\":\"Bytes\",\"base64\":\"!!\"}", "base64"},
        {"{\"type\":\"PeerId\",\"peer\":\"xyz\"}", "input 'in'"},
        {"{\"type\":\"Multiaddress\",\"addr\":\"/ip9/x\"}", "input 'in'"},
        {"{\"type\":\"peer_id_vec\",\"items\":[{\"type\":\"U64\",\"value\":1}]}", "must be PeerId"},
        {"{\"type\":\"ResponseBatch\",\"items\":[]}", "cannot be written"},
        {"{\"tensor_proto\":5}", "base64 string"},
        {"\"text\"", "expected an object"},
        {"[[[[[[[[[1]]]]]]]]]", "dimensions"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        cJSON *j = parse(bad[i].json);
        bb_json_input v;
        bb_error err = {0};
        if (bb_json_input_parse("in", j, &v, &err) == BB_OK || !strstr(err.msg, bad[i].needle))
            fail_msg("%s: wanted an error with '%s', got '%s'", bad[i].json, bad[i].needle,
                     err.msg);
        assert_null(v.name);
        cJSON_Delete(j);
    }
    /* nesting is bounded */
    char deep[4096] = "";
    for (int i = 0; i < 40; i++)
        strcat(deep, "{\"type\":\"Composite\",\"items\":[");
    strcat(deep, "null");
    for (int i = 0; i < 40; i++)
        strcat(deep, "]}");
    cJSON *j = parse(deep);
    bb_json_input v;
    bb_error err = {0};
    assert_int_equal(bb_json_input_parse("deep", j, &v, &err), BB_ELIMIT);
    cJSON_Delete(j);
}

/* ---- metrics text ----------------------------------------------------------------- */

static void test_metrics_text(void **state)
{
    (void)state;
    bbd_mtext t = {0};
    bbd_mtext_family(&t, "bbd_polls", "counter", "engine poll cycles");
    bbd_mtext_sample(&t, "bbd_polls", true, 12, NULL, NULL, NULL, NULL);
    bbd_mtext_family(&t, "bbd_peer_connected", "gauge", "connected");
    bbd_mtext_sample(&t, "bbd_peer_connected", false, 1, "peer", "a\"b\\c\nd", "state", "open");
    bbd_mtext_end(&t);
    assert_false(t.oom);
    assert_string_equal(t.buf, "# HELP bbd_polls_total engine poll cycles\n"
                               "# TYPE bbd_polls_total counter\n"
                               "bbd_polls_total 12\n"
                               "# HELP bbd_peer_connected connected\n"
                               "# TYPE bbd_peer_connected gauge\n"
                               "bbd_peer_connected{peer=\"a\\\"b\\\\c\\nd\",state=\"open\"} 1\n");
    bbd_mtext_free(&t);
    t.openmetrics = true;
    bbd_mtext_family(&t, "bbd_polls", "counter", "engine poll cycles");
    bbd_mtext_sample(&t, "bbd_polls", true, 3, NULL, NULL, NULL, NULL);
    bbd_mtext_end(&t);
    assert_string_equal(t.buf, "# HELP bbd_polls engine poll cycles\n"
                               "# TYPE bbd_polls counter\n"
                               "bbd_polls_total 3\n# EOF\n");
    bbd_mtext_free(&t);
    char name[64];
    bbd_metric_name("bbd_engine_", "ops.invoked-x/y", name, sizeof name);
    assert_string_equal(name, "bbd_engine_ops_invoked_x_y");
    bbd_metric_name("", "9lives", name, sizeof name);
    assert_string_equal(name, "_lives");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_log_lines),
        cmocka_unit_test(test_log_long_line_is_cut),
        cmocka_unit_test(test_log_levels_and_reopen),
        cmocka_unit_test(test_log_journal_prefix),
        cmocka_unit_test(test_notify_path_socket),
        cmocka_unit_test(test_notify_abstract_and_off),
        cmocka_unit_test(test_snapshot_file),
        cmocka_unit_test(test_state_dir_lock),
        cmocka_unit_test(test_value_json_roundtrip),
        cmocka_unit_test(test_value_json_shortcuts),
        cmocka_unit_test(test_value_json_errors),
        cmocka_unit_test(test_metrics_text),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
