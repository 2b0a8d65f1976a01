/*
 * config.c — the node configuration: defaults, the JSON file, setters the
 * command line shares, and the derived values (see config.h, bbd.json(5)).
 */
#include "bbd/host/config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cJSON.h>

#include "bb/multiaddr.h"
#include "bbd/host/log.h"

#define MIB ((size_t)1 << 20)
#define JSON_MAX_INT 9007199254740992.0 /* 2^53: larger integers lose precision */

void bbd_config_init(bbd_config *c)
{
    memset(c, 0, sizeof *c);
    c->log_level = BB_LOG_INFO;
    c->bootstrap_all = true;
    c->snapshot_on_exit = true;
    c->control_max_line_bytes = 16 * MIB;
    c->control_max_clients = 64;
    c->control_client_output_bytes = 4 * MIB;
    c->control_output_budget_bytes = 64 * MIB;
    c->control_idle_timeout_ms = 60000;
    c->max_snapshot_bytes = (size_t)1 << 30;
    c->max_peers_per_source = 64;
    bb_engine_caps_default(&c->caps);
    bbd_transport_config_init(&c->transport);
}

void bbd_strlist_clear(bbd_strlist *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

void bbd_config_clear_peers(bbd_config *c)
{
    for (size_t i = 0; i < c->n_peers; i++) {
        free(c->peers[i].addr_text);
        free(c->peers[i].addr);
    }
    free(c->peers);
    c->peers = NULL;
    c->n_peers = 0;
}

static void peerlist_clear(bbd_peerlist *l)
{
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

static void cidrlist_clear(bbd_cidrlist *l)
{
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

void bbd_config_free(bbd_config *c)
{
    peerlist_clear(&c->allow);
    peerlist_clear(&c->deny);
    peerlist_clear(&c->require_signed_by);
    cidrlist_clear(&c->dial_allow);
    cidrlist_clear(&c->dial_deny);
    free(c->artifact);
    bbd_strlist_clear(&c->targets);
    bbd_strlist_clear(&c->listen);
    bbd_config_clear_peers(c);
    free(c->state_dir);
    free(c->control);
    bbd_strlist_clear(&c->plugin_path);
    free(c->log_file);
    free(c->metrics);
    free(c->key_file);
    free(c->components_json);
    memset(c, 0, sizeof *c);
}

int bbd_config_set_str(char **dst, const char *s, bb_error *err)
{
    char *copy = NULL;
    if (s && !(copy = strdup(s)))
        return bb_error_set(err, BB_ENOMEM, "out of memory");
    free(*dst);
    *dst = copy;
    return BB_OK;
}

int bbd_config_strlist_add(bbd_strlist *l, const char *s, const char *what, bb_error *err)
{
    if (l->n >= BBD_CONFIG_MAX_LIST)
        return bb_error_set(err, BB_ELIMIT, "too many %s (at most %d)", what,
                            BBD_CONFIG_MAX_LIST);
    char **v = realloc(l->v, (l->n + 1) * sizeof *v);
    if (!v)
        return bb_error_set(err, BB_ENOMEM, "out of memory");
    l->v = v;
    if (!(v[l->n] = strdup(s)))
        return bb_error_set(err, BB_ENOMEM, "out of memory");
    l->n++;
    return BB_OK;
}

int bbd_config_set_targets(bbd_config *c, const char *list, bb_error *err)
{
    bbd_strlist_clear(&c->targets);
    const char *p = list;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == 0 || n > 255)
            return bb_error_set(err, BB_EINVAL, "targets '%s': %s", list,
                                n ? "a target name is longer than 255 bytes"
                                  : "empty target name");
        char name[256];
        memcpy(name, p, n);
        name[n] = '\0';
        int rc = bbd_config_strlist_add(&c->targets, name, "targets", err);
        if (rc)
            return rc;
        p += n + (end ? 1 : 0);
        if (end && !*p)
            return bb_error_set(err, BB_EINVAL, "targets '%s': empty target name", list);
    }
    return BB_OK;
}

/* The PeerId a multiaddr names with /p2p/, if any: BB_OK and *has. */
static int addr_p2p(const uint8_t *a, size_t len, bb_peerid *id, bool *has, bb_error *err)
{
    bb_multiaddr_component comp[BB_MULTIADDR_MAX_COMPONENTS];
    size_t n = 0;
    *has = false;
    int rc = bb_multiaddr_decode(a, len, comp, BB_MULTIADDR_MAX_COMPONENTS, &n, err);
    for (size_t i = 0; rc == BB_OK && i < n; i++) {
        if (comp[i].code != BB_MA_P2P)
            continue;
        if ((rc = bb_peerid_from_bytes(comp[i].value, comp[i].value_len, id, err)))
            return rc;
        *has = true;
    }
    return rc;
}

int bbd_config_add_peer(bbd_config *c, const char *peer_text, const char *addr_text,
                        bb_error *err)
{
    if (c->n_peers >= BBD_CONFIG_MAX_LIST * 16)
        return bb_error_set(err, BB_ELIMIT, "too many peer addresses (at most %d)",
                            BBD_CONFIG_MAX_LIST * 16);
    bbd_peer_cfg p = {0};
    if (bb_peerid_from_text(peer_text, &p.id, err) != BB_OK)
        return bb_error_prefix(err, "peer '%s'", peer_text);
    if (bb_multiaddr_parse_alloc(addr_text, &p.addr, &p.addr_len, err) != BB_OK)
        return bb_error_prefix(err, "peer %s address", peer_text);
    bb_ma_endpoint t; /* an IP address, or a host name resolved at each dial */
    bb_peerid named;
    bool has = false;
    if (bb_multiaddr_endpoint(p.addr, p.addr_len, &t, err) != BB_OK ||
        addr_p2p(p.addr, p.addr_len, &named, &has, err) != BB_OK) {
        free(p.addr);
        return bb_error_prefix(err, "peer %s address %s", peer_text, addr_text);
    }
    if (has && !bb_peerid_equal(&named, &p.id)) {
        free(p.addr);
        return bb_error_set(err, BB_EINVAL, "peer %s: address %s names another PeerId", peer_text,
                            addr_text);
    }
    bbd_peer_cfg *v = realloc(c->peers, (c->n_peers + 1) * sizeof *v);
    if (!v || !(p.addr_text = strdup(addr_text))) {
        if (v)
            c->peers = v;
        free(p.addr);
        return bb_error_set(err, BB_ENOMEM, "out of memory");
    }
    c->peers = v;
    c->peers[c->n_peers++] = p;
    return BB_OK;
}

int bbd_config_add_peer_arg(bbd_config *c, const char *arg, bb_error *err)
{
    if (arg[0] == '/') { /* MULTIADDR/p2p/PEERID */
        uint8_t *a = NULL;
        size_t len = 0;
        bb_peerid id;
        bool has = false;
        char text[BB_PEERID_TEXT_MAX];
        int rc = bb_multiaddr_parse_alloc(arg, &a, &len, err);
        if (rc == BB_OK)
            rc = addr_p2p(a, len, &id, &has, err);
        free(a);
        if (rc)
            return bb_error_prefix(err, "peer '%s'", arg);
        if (!has)
            return bb_error_set(err, BB_EINVAL,
                                "peer '%s' is not PEERID=MULTIADDR nor a MULTIADDR ending in "
                                "/p2p/PEERID", arg);
        if ((rc = bb_peerid_to_text(&id, text, sizeof text, err)))
            return rc;
        return bbd_config_add_peer(c, text, arg, err);
    }
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || !eq[1])
        return bb_error_set(err, BB_EINVAL, "peer '%s' is not PEERID=MULTIADDR", arg);
    size_t n = (size_t)(eq - arg);
    if (n >= BB_PEERID_TEXT_MAX)
        return bb_error_set(err, BB_EINVAL, "peer '%s': PeerId too long", arg);
    char id[BB_PEERID_TEXT_MAX];
    memcpy(id, arg, n);
    id[n] = '\0';
    return bbd_config_add_peer(c, id, eq + 1, err);
}

int bbd_config_peerlist_add(bbd_peerlist *l, const char *text, const char *what,
                            bb_error *err)
{
    bb_peerid id;
    if (l->n >= BBD_CONFIG_MAX_LIST * 16)
        return bb_error_set(err, BB_ELIMIT, "too many %s (at most %d)", what,
                            BBD_CONFIG_MAX_LIST * 16);
    if (bb_peerid_from_text(text, &id, err) != BB_OK)
        return bb_error_prefix(err, "%s '%.80s'", what, text);
    bb_peerid *v = realloc(l->v, (l->n + 1) * sizeof *v);
    if (!v)
        return bb_error_set(err, BB_ENOMEM, "out of memory");
    l->v = v;
    l->v[l->n++] = id;
    return BB_OK;
}

int bbd_config_cidrlist_add(bbd_cidrlist *l, const char *text, const char *what,
                            bb_error *err)
{
    bbd_cidr r;
    if (l->n >= BBD_CONFIG_MAX_LIST)
        return bb_error_set(err, BB_ELIMIT, "too many %s (at most %d)", what,
                            BBD_CONFIG_MAX_LIST);
    if (bbd_cidr_parse(text, &r, err) != BB_OK)
        return bb_error_prefix(err, "%s", what);
    bbd_cidr *v = realloc(l->v, (l->n + 1) * sizeof *v);
    if (!v)
        return bb_error_set(err, BB_ENOMEM, "out of memory");
    l->v = v;
    l->v[l->n++] = r;
    return BB_OK;
}

int bbd_config_set_security(bbd_config *c, const char *mode, bb_error *err)
{
    if (!strcmp(mode, "noise") || !strcmp(mode, "on"))
        c->transport.security = BBD_SECURITY_NOISE;
    else if (!strcmp(mode, "off"))
        c->transport.security = BBD_SECURITY_OFF;
    else
        return bb_error_set(err, BB_EINVAL, "security '%.40s' must be \"noise\" or \"off\"",
                            mode);
    return BB_OK;
}

/* ---- the JSON file ---------------------------------------------------------------- */

typedef struct loader {
    bbd_config *c;
    const char *name;     /* file name for messages */
    const char *base_dir; /* relative paths resolve here (NULL: as given) */
    bb_error *err;
} loader;

static int bad(loader *ld, const char *key, const char *want)
{
    return bb_error_set(ld->err, BB_ECONFIG, "%s: key '%s' must be %s", ld->name, key, want);
}

static int get_string(loader *ld, const cJSON *v, const char *key, const char **out)
{
    if (!cJSON_IsString(v) || !v->valuestring)
        return bad(ld, key, "a string");
    *out = v->valuestring;
    return BB_OK;
}

static int get_uint(loader *ld, const cJSON *v, const char *key, uint64_t max, uint64_t *out)
{
    *out = 0; /* set on every path: the compiler cannot see bad() never returns BB_OK */
    if (cJSON_IsNumber(v)) {
        double d = v->valuedouble;
        if (d >= 0 && d <= JSON_MAX_INT && d == (double)(uint64_t)d && (uint64_t)d <= max) {
            *out = (uint64_t)d;
            return BB_OK;
        }
    }
    char want[64];
    snprintf(want, sizeof want, "an integer from 0 to %llu", (unsigned long long)max);
    return bad(ld, key, want);
}

static int get_bool(loader *ld, const cJSON *v, const char *key, bool *out)
{
    if (!cJSON_IsBool(v))
        return bad(ld, key, "true or false");
    *out = cJSON_IsTrue(v);
    return BB_OK;
}

/* A path from the file: relative ones are taken from the file's directory. */
static int set_path(loader *ld, const cJSON *v, const char *key, char **dst)
{
    const char *s = NULL;
    if (get_string(ld, v, key, &s))
        return BB_ECONFIG;
    if (!*s)
        return bad(ld, key, "a non-empty path");
    if (s[0] == '/' || !ld->base_dir)
        return bbd_config_set_str(dst, s, ld->err);
    size_t n = strlen(ld->base_dir) + strlen(s) + 2;
    if (n > PATH_MAX)
        return bb_error_set(ld->err, BB_ECONFIG, "%s: key '%s': path too long", ld->name, key);
    char *p = malloc(n);
    if (!p)
        return bb_error_set(ld->err, BB_ENOMEM, "out of memory");
    size_t bl = strlen(ld->base_dir);
    memcpy(p, ld->base_dir, bl);
    p[bl] = '/';
    memcpy(p + bl + 1, s, strlen(s) + 1);
    free(*dst);
    *dst = p;
    return BB_OK;
}

/* A string, or an array of strings, into a list (replacing it). */
static int set_list(loader *ld, const cJSON *v, const char *key, bbd_strlist *l, bool paths)
{
    bbd_strlist_clear(l);
    if (cJSON_IsString(v))
        return bbd_config_strlist_add(l, v->valuestring, key, ld->err);
    if (!cJSON_IsArray(v))
        return bad(ld, key, "a string or an array of strings");
    const cJSON *it;
    cJSON_ArrayForEach(it, v) {
        if (!cJSON_IsString(it) || !*it->valuestring)
            return bad(ld, key, "an array of non-empty strings");
        int rc;
        if (paths) {
            char *p = NULL;
            if ((rc = set_path(ld, it, key, &p)) == BB_OK)
                rc = bbd_config_strlist_add(l, p, key, ld->err);
            free(p);
        } else {
            rc = bbd_config_strlist_add(l, it->valuestring, key, ld->err);
        }
        if (rc)
            return rc;
    }
    return BB_OK;
}

static int set_targets(loader *ld, const cJSON *v)
{
    if (cJSON_IsString(v)) {
        int rc = bbd_config_set_targets(ld->c, v->valuestring, ld->err);
        return rc ? bb_error_prefix(ld->err, "%s: key 'targets'", ld->name) : BB_OK;
    }
    return set_list(ld, v, "targets", &ld->c->targets, false);
}

static int set_peers(loader *ld, const cJSON *v)
{
    if (!cJSON_IsObject(v))
        return bad(ld, "peers", "an object mapping PeerIds to a multiaddr or a list of them");
    bbd_config_clear_peers(ld->c);
    const cJSON *p;
    cJSON_ArrayForEach(p, v) {
        const cJSON *a, *one = cJSON_IsString(p) ? p : NULL;
        if (!one && !cJSON_IsArray(p))
            return bad(ld, "peers", "an object mapping PeerIds to a multiaddr or a list of them");
        for (a = one ? one : p->child; a; a = one ? NULL : a->next) {
            if (!cJSON_IsString(a))
                return bad(ld, "peers", "an object mapping PeerIds to multiaddr strings");
            if (bbd_config_add_peer(ld->c, p->string, a->valuestring, ld->err))
                return bb_error_prefix(ld->err, "%s: key 'peers'", ld->name);
            if (one)
                break;
        }
    }
    return BB_OK;
}

/* Engine caps and transport limits: name -> field, by table, each with the
 * largest value accepted (bbd.json(5) lists them). A cap sizes a queue the
 * engine allocates up front or bounds what one peer may make it hold, so
 * an absurd value is refused here, naming its key, instead of surfacing as
 * an allocation failure (or the sanitizers' allocation-size-too-big) when
 * the engine is made. */
enum { F_SIZE, F_U32, F_U64 };
typedef struct field {
    const char *name;
    size_t offset;
    int kind;
    uint64_t max;
} field;

#define KI ((uint64_t)1 << 10)
#define MI ((uint64_t)1 << 20)
#define GI ((uint64_t)1 << 30)
#define DAY_MS ((uint64_t)86400000)
#define CAP(n, k, max) {#n, offsetof(bb_engine_caps, n), k, max}
static const field CAP_FIELDS[] = {
    CAP(bus_capacity, F_SIZE, MI),
    CAP(ingress_capacity, F_SIZE, 4 * MI),
    CAP(ingress_byte_budget, F_SIZE, 64 * GI),
    CAP(max_app_event_bytes, F_SIZE, GI),
    CAP(max_invoke_inputs, F_SIZE, 64 * KI),
    CAP(max_invoke_bytes, F_SIZE, 4 * GI),
    CAP(max_completion_result_bytes, F_SIZE, 4 * GI),
    CAP(max_pending_async, F_SIZE, 16 * MI),
    CAP(max_envelope_bytes, F_SIZE, 4 * GI),
    CAP(max_envelope_fills, F_SIZE, MI),
    CAP(max_envelope_addresses, F_SIZE, 4 * KI),
    CAP(address_book_max_peers, F_SIZE, 16 * MI),
    CAP(address_book_max_addrs, F_SIZE, KI),
    CAP(dedup_window, F_SIZE, 4 * MI),
    CAP(inbound_requests_max, F_SIZE, 16 * MI),
    CAP(record_ring, F_SIZE, MI),
    CAP(completion_quarantine, F_SIZE, 16 * MI),
    CAP(peer_failure_threshold, F_U32, MI),
    CAP(backoff_base_ns, F_U64, 3600 * (uint64_t)1000000000),
    CAP(backoff_max_ns, F_U64, DAY_MS * 1000000),
    CAP(max_streams_in, F_SIZE, 64 * KI),
    CAP(stream_window, F_U32, 64 * KI),
    CAP(stream_stall_ns, F_U64, DAY_MS * 1000000),
};
#undef CAP
#define TRF(n, k, max) {#n, offsetof(bbd_transport_config, n), k, max}
static const field TRANSPORT_FIELDS[] = {
    TRF(max_frame_bytes, F_SIZE, 4 * GI),
    TRF(max_queue_per_peer_bytes, F_SIZE, 64 * GI),
    TRF(max_queue_total_bytes, F_SIZE, 64 * GI),
    TRF(max_connections, F_SIZE, 64 * KI),
    TRF(udp_payload_bytes, F_SIZE, 65507), /* an IPv4 UDP payload */
    TRF(udp_reassembly_bytes, F_SIZE, 64 * GI),
    TRF(udp_reassembly_timeout_ms, F_U64, DAY_MS),
    TRF(connect_timeout_ms, F_U64, DAY_MS),
    TRF(handshake_timeout_ms, F_U64, DAY_MS),
    TRF(max_rx_buffer_total_bytes, F_SIZE, 64 * GI),
    TRF(stall_timeout_ms, F_U64, DAY_MS),
    TRF(udp_session_timeout_ms, F_U64, DAY_MS),
    TRF(max_connections_per_source, F_SIZE, 64 * KI),
    TRF(idle_timeout_ms, F_U64, DAY_MS),
    TRF(min_rx_bytes_per_s, F_SIZE, 64 * GI),
};
#undef TRF
/* The node's own numeric keys (top level of the file). */
#define NODE(n, k, max) {#n, offsetof(bbd_config, n), k, max}
static const field NODE_FIELDS[] = {
    NODE(cycle_op_budget, F_SIZE, GI),
    NODE(control_max_line_bytes, F_SIZE, GI),
    NODE(control_max_clients, F_SIZE, 4 * KI),
    NODE(control_client_output_bytes, F_SIZE, 4 * GI),
    NODE(control_output_budget_bytes, F_SIZE, 16 * GI),
    NODE(control_idle_timeout_ms, F_U64, DAY_MS),
    NODE(max_snapshot_bytes, F_SIZE, 64 * GI),
    NODE(max_peers_per_source, F_SIZE, 64 * KI),
};
#undef NODE

static const field *field_find(const field *f, size_t nf, const char *name)
{
    for (size_t i = 0; i < nf; i++)
        if (strcmp(f[i].name, name) == 0)
            return &f[i];
    return NULL;
}

/* v into the field f of base, checked against its maximum. */
static int set_field(loader *ld, const field *f, const cJSON *v, const char *key, void *base)
{
    uint64_t x;
    if (get_uint(ld, v, key, f->max, &x))
        return BB_ECONFIG;
    char *p = (char *)base + f->offset;
    if (f->kind == F_SIZE)
        *(size_t *)(void *)p = (size_t)x;
    else if (f->kind == F_U32)
        *(uint32_t *)(void *)p = (uint32_t)x;
    else
        *(uint64_t *)(void *)p = x;
    return BB_OK;
}

static int set_fields(loader *ld, const cJSON *obj, const char *section, const field *f,
                      size_t nf, void *base, bool caps)
{
    char key[128];
    if (!cJSON_IsObject(obj))
        return bad(ld, section, "an object");
    const cJSON *v;
    if (caps && (v = cJSON_GetObjectItemCaseSensitive(obj, "preset"))) {
        const char *p = NULL;
        if (get_string(ld, v, "caps.preset", &p))
            return BB_ECONFIG;
        if (strcmp(p, "edge") == 0)
            bb_engine_caps_edge(base);
        else if (strcmp(p, "default") == 0)
            bb_engine_caps_default(base);
        else
            return bad(ld, "caps.preset", "\"default\" or \"edge\"");
    }
    cJSON_ArrayForEach(v, obj) {
        if (caps && strcmp(v->string, "preset") == 0)
            continue;
        snprintf(key, sizeof key, "%s.%s", section, v->string);
        const field *fi = field_find(f, nf, v->string);
        if (!fi)
            return bb_error_set(ld->err, BB_ECONFIG, "%s: unknown key '%.100s'", ld->name, key);
        if (set_field(ld, fi, v, key, base))
            return BB_ECONFIG;
    }
    return BB_OK;
}

static int set_seed(loader *ld, const cJSON *v)
{
    bbd_config *c = ld->c;
    if (cJSON_IsString(v)) { /* a decimal string keeps all 64 bits */
        char *end;
        errno = 0;
        unsigned long long x = strtoull(v->valuestring, &end, 10);
        if (errno || end == v->valuestring || *end || v->valuestring[0] == '-')
            return bad(ld, "seed", "an integer or a decimal string");
        c->seed = x;
    } else if (get_uint(ld, v, "seed", UINT64_MAX, &c->seed)) {
        return BB_ECONFIG;
    }
    c->has_seed = true;
    return BB_OK;
}

static int set_components(loader *ld, const cJSON *v)
{
    if (!cJSON_IsObject(v))
        return bad(ld, "components", "an object mapping slot names to their configs");
    char *text = cJSON_PrintUnformatted(v);
    if (!text)
        return bb_error_set(ld->err, BB_ENOMEM, "out of memory");
    free(ld->c->components_json);
    ld->c->components_json = text;
    return BB_OK;
}

/* A PeerId or address-range list: a string or an array of strings,
 * replacing the list. */
static int set_peers_list(loader *ld, const cJSON *v, const char *key, bbd_peerlist *pl,
                          bbd_cidrlist *cl)
{
    if (pl)
        peerlist_clear(pl);
    else
        cidrlist_clear(cl);
    const cJSON *one = cJSON_IsString(v) ? v : NULL, *it;
    if (!one && !cJSON_IsArray(v))
        return bad(ld, key, pl ? "a PeerId or an array of PeerIds"
                               : "an address range or an array of them");
    for (it = one ? one : v->child; it; it = one ? NULL : it->next) {
        if (!cJSON_IsString(it))
            return bad(ld, key, pl ? "an array of PeerId strings" : "an array of strings");
        int rc = pl ? bbd_config_peerlist_add(pl, it->valuestring, key, ld->err)
                    : bbd_config_cidrlist_add(cl, it->valuestring, key, ld->err);
        if (rc)
            return bb_error_prefix(ld->err, "%s", ld->name);
    }
    return BB_OK;
}

static int set_key(loader *ld, const cJSON *v)
{
    bbd_config *c = ld->c;
    const char *k = v->string, *s = NULL;
    bb_error *err = ld->err;
    if (!strcmp(k, "artifact"))
        return set_path(ld, v, k, &c->artifact);
    if (!strcmp(k, "targets"))
        return set_targets(ld, v);
    if (!strcmp(k, "listen"))
        return set_list(ld, v, k, &c->listen, false);
    if (!strcmp(k, "peers"))
        return set_peers(ld, v);
    if (!strcmp(k, "state_dir"))
        return set_path(ld, v, k, &c->state_dir);
    if (!strcmp(k, "control"))
        return set_path(ld, v, k, &c->control);
    if (!strcmp(k, "plugin_path"))
        return set_list(ld, v, k, &c->plugin_path, true);
    if (!strcmp(k, "log_level")) {
        if (get_string(ld, v, k, &s))
            return BB_ECONFIG;
        return bbd_log_level_parse(s, &c->log_level, err) ? bb_error_prefix(err, "%s", ld->name)
                                                          : BB_OK;
    }
    if (!strcmp(k, "log_file"))
        return cJSON_IsNull(v) ? bbd_config_set_str(&c->log_file, NULL, err)
                               : set_path(ld, v, k, &c->log_file);
    if (!strcmp(k, "metrics")) {
        if (cJSON_IsNull(v))
            return bbd_config_set_str(&c->metrics, NULL, err);
        return get_string(ld, v, k, &s) ? BB_ECONFIG : bbd_config_set_str(&c->metrics, s, err);
    }
    if (!strcmp(k, "key_file"))
        return set_path(ld, v, k, &c->key_file);
    if (!strcmp(k, "fresh"))
        return get_bool(ld, v, k, &c->fresh);
    if (!strcmp(k, "bootstrap")) {
        if (get_string(ld, v, k, &s))
            return BB_ECONFIG;
        if (strcmp(s, "all") && strcmp(s, "none"))
            return bad(ld, k, "\"all\" or \"none\"");
        c->bootstrap_all = strcmp(s, "all") == 0;
        return BB_OK;
    }
    if (!strcmp(k, "snapshot_on_exit"))
        return get_bool(ld, v, k, &c->snapshot_on_exit);
    if (!strcmp(k, "seed"))
        return set_seed(ld, v);
    const field *nf = field_find(NODE_FIELDS, sizeof NODE_FIELDS / sizeof *NODE_FIELDS, k);
    if (nf)
        return set_field(ld, nf, v, k, c);
    if (!strcmp(k, "caps"))
        return set_fields(ld, v, k, CAP_FIELDS, sizeof CAP_FIELDS / sizeof *CAP_FIELDS,
                          &c->caps, true);
    if (!strcmp(k, "transport"))
        return set_fields(ld, v, k, TRANSPORT_FIELDS,
                          sizeof TRANSPORT_FIELDS / sizeof *TRANSPORT_FIELDS, &c->transport,
                          false);
    if (!strcmp(k, "components"))
        return set_components(ld, v);
    if (!strcmp(k, "security")) {
        if (get_string(ld, v, k, &s))
            return BB_ECONFIG;
        return bbd_config_set_security(c, s, err) ? bad(ld, k, "\"noise\" or \"off\"") : BB_OK;
    }
    if (!strcmp(k, "allow"))
        return set_peers_list(ld, v, k, &c->allow, NULL);
    if (!strcmp(k, "deny"))
        return set_peers_list(ld, v, k, &c->deny, NULL);
    if (!strcmp(k, "require_signed_by"))
        return set_peers_list(ld, v, k, &c->require_signed_by, NULL);
    if (!strcmp(k, "dial_allow"))
        return set_peers_list(ld, v, k, NULL, &c->dial_allow);
    if (!strcmp(k, "dial_deny"))
        return set_peers_list(ld, v, k, NULL, &c->dial_deny);
    return bb_error_set(err, BB_ECONFIG, "%s: unknown key '%.100s'", ld->name, k);
}

/* 1-based line and column of byte offset off. */
static void line_col(const char *s, size_t off, size_t *line, size_t *col)
{
    *line = 1;
    *col = 1;
    for (size_t i = 0; i < off && s[i]; i++) {
        if (s[i] == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

int bbd_config_load_mem(bbd_config *c, const char *json, size_t len, const char *name,
                        const char *base_dir, bb_error *err)
{
    if (len > BBD_CONFIG_MAX_BYTES)
        return bb_error_set(err, BB_ELIMIT, "%s: %zu bytes is over the %zu-byte limit", name,
                            len, BBD_CONFIG_MAX_BYTES);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(json, len, &end, false);
    if (!root) {
        size_t line, col, off = end && end >= json ? (size_t)(end - json) : 0;
        if (!end && cJSON_GetErrorPtr())
            off = (size_t)(cJSON_GetErrorPtr() - json);
        line_col(json, off < len ? off : len, &line, &col);
        return bb_error_set(err, BB_ECONFIG, "%s: not valid JSON (line %zu, column %zu)", name,
                            line, col);
    }
    /* cJSON stops at the end of the value: anything but whitespace after it
     * is an error too. */
    for (size_t i = (size_t)(end - json); i < len; i++) {
        if (json[i] != ' ' && json[i] != '\t' && json[i] != '\n' && json[i] != '\r') {
            size_t line, col;
            line_col(json, i, &line, &col);
            cJSON_Delete(root);
            return bb_error_set(err, BB_ECONFIG,
                                "%s: unexpected text after the JSON object (line %zu, column %zu)",
                                name, line, col);
        }
    }
    loader ld = {c, name, base_dir, err};
    int rc = BB_OK;
    if (!cJSON_IsObject(root)) {
        rc = bb_error_set(err, BB_ECONFIG, "%s: the top level must be a JSON object", name);
    } else {
        const cJSON *v;
        cJSON_ArrayForEach(v, root) {
            if ((rc = set_key(&ld, v)) != BB_OK)
                break;
        }
    }
    cJSON_Delete(root);
    return rc;
}

int bbd_config_load_file(bbd_config *c, const char *path, bb_error *err)
{
    FILE *f = fopen(path, "rbe");
    if (!f)
        return bb_error_set(err, errno == ENOENT ? BB_ENOTFOUND : BB_EIO, "config %s: %s", path,
                            strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return bb_error_set(err, BB_EIO, "config %s: not a regular file", path);
    }
    if ((uint64_t)st.st_size > BBD_CONFIG_MAX_BYTES) {
        fclose(f);
        return bb_error_set(err, BB_ELIMIT, "config %s: %lld bytes is over the %zu-byte limit",
                            path, (long long)st.st_size, BBD_CONFIG_MAX_BYTES);
    }
    size_t n = (size_t)st.st_size;
    char *buf = malloc(n + 1);
    if (!buf) {
        fclose(f);
        return bb_error_set(err, BB_ENOMEM, "out of memory");
    }
    size_t got = fread(buf, 1, n, f);
    fclose(f);
    if (got != n) {
        free(buf);
        return bb_error_set(err, BB_EIO, "config %s: short read", path);
    }
    buf[n] = '\0';
    char *dir = strdup(path);
    if (!dir) {
        free(buf);
        return bb_error_set(err, BB_ENOMEM, "out of memory");
    }
    char *slash = strrchr(dir, '/');
    const char *base = NULL;
    if (slash) {
        slash[slash == dir ? 1 : 0] = '\0';
        base = dir;
    }
    int rc = bbd_config_load_mem(c, buf, n, path, base, err);
    free(dir);
    free(buf);
    return rc;
}

/* ---- derived values --------------------------------------------------------------- */

static int default_state_dir(bbd_config *c, bb_error *err)
{
    const char *sd = getenv("STATE_DIRECTORY"); /* systemd StateDirectory= */
    char buf[PATH_MAX];
    if (sd && *sd) {
        size_t n = strcspn(sd, ":");
        snprintf(buf, sizeof buf, "%.*s", (int)n, sd);
    } else if (geteuid() == 0) {
        snprintf(buf, sizeof buf, "/var/lib/bytesandbrains");
    } else if (getenv("XDG_STATE_HOME") && getenv("XDG_STATE_HOME")[0] == '/') {
        snprintf(buf, sizeof buf, "%s/bytesandbrains", getenv("XDG_STATE_HOME"));
    } else if (getenv("HOME") && getenv("HOME")[0] == '/') {
        snprintf(buf, sizeof buf, "%s/.local/state/bytesandbrains", getenv("HOME"));
    } else {
        return bb_error_set(err, BB_ECONFIG, "no state directory: give --state-dir");
    }
    return bbd_config_set_str(&c->state_dir, buf, err);
}

static int join(char **dst, const char *dir, const char *name, bb_error *err)
{
    char buf[PATH_MAX];
    if ((size_t)snprintf(buf, sizeof buf, "%s/%s", dir, name) >= sizeof buf)
        return bb_error_set(err, BB_ECONFIG, "path %s/%s is too long", dir, name);
    return bbd_config_set_str(dst, buf, err);
}

int bbd_config_finish(bbd_config *c, bb_error *err)
{
    int rc;
    if (!c->state_dir && (rc = default_state_dir(c, err)))
        return rc;
    if (!c->control) {
        const char *rd = getenv("RUNTIME_DIRECTORY"); /* systemd RuntimeDirectory= */
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%.*s", rd && *rd ? (int)strcspn(rd, ":") : 0, rd ? rd : "");
        if ((rc = join(&c->control, *dir ? dir : c->state_dir, "control.sock", err)))
            return rc;
    }
    if (strlen(c->control) >= sizeof(((struct sockaddr_un *)0)->sun_path))
        return bb_error_set(err, BB_ECONFIG, "control socket path %s is longer than %zu bytes",
                            c->control, sizeof(((struct sockaddr_un *)0)->sun_path) - 1);
    if (!c->key_file && (rc = join(&c->key_file, c->state_dir, "node.key", err)))
        return rc;
    for (size_t i = 0; i < c->listen.n; i++) {
        uint8_t a[BB_MULTIADDR_MAX_LEN];
        size_t n;
        bb_ma_transport t;
        if (bb_multiaddr_parse(c->listen.v[i], a, sizeof a, &n, err) ||
            bb_multiaddr_transport(a, n, &t, err))
            return bb_error_prefix(err, "listen address '%s'", c->listen.v[i]);
    }
    if (c->metrics) {
        uint8_t a[BB_MULTIADDR_MAX_LEN];
        size_t n;
        bb_ma_transport t;
        if (bb_multiaddr_parse(c->metrics, a, sizeof a, &n, err) ||
            bb_multiaddr_transport(a, n, &t, err))
            return bb_error_prefix(err, "metrics address '%s'", c->metrics);
        if (t.proto != BB_MA_TCP)
            return bb_error_set(err, BB_ECONFIG, "metrics address '%s' is not a /tcp address",
                                c->metrics);
    }
    if (c->control_max_line_bytes < 1024)
        return bb_error_set(err, BB_ECONFIG, "control_max_line_bytes must be at least 1024");
    if (c->control_max_clients < 1)
        return bb_error_set(err, BB_ECONFIG, "control_max_clients must be at least 1");
    if (c->max_peers_per_source < 1)
        return bb_error_set(err, BB_ECONFIG, "max_peers_per_source must be at least 1");
    if (c->control_client_output_bytes < 64 * 1024)
        return bb_error_set(err, BB_ECONFIG, "control_client_output_bytes must be at least 65536");
    if (c->control_output_budget_bytes < c->control_client_output_bytes)
        return bb_error_set(err, BB_ECONFIG, "control_output_budget_bytes (%zu) must be at least "
                            "control_client_output_bytes (%zu)", c->control_output_budget_bytes,
                            c->control_client_output_bytes);
    return BB_OK;
}
