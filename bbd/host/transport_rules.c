/*
 * transport_rules.c — who the transport talks to, by address: the
 * operator's dial rules (address ranges a node may dial: dial_allow,
 * dial_deny) and the per-source share of inbound connections.
 *
 * Dial rules exist because a node dials addresses it learned from others
 * (announced listen addresses, address-book entries a program adds): the
 * operator bounds where those dials may go. They apply to every dial, TCP
 * and UDP, whatever asked for it; a refused address is skipped (another of
 * the peer's addresses may be allowed) and counted.
 *
 * The per-source share bounds what one IP address can hold of the
 * connection table (max_connections_per_source), whatever it claims to
 * be: counted from accept to close, checked before any byte is read.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bbd/host/transport_internal.h"

struct bbd_source {
    int family;
    uint8_t ip[16];
    size_t conns;
};

/* ---- CIDR ---------------------------------------------------------------------------- */

int bbd_cidr_parse(const char *text, bbd_cidr *out, bb_error *err)
{
    char buf[64];
    memset(out, 0, sizeof *out);
    const char *slash = strchr(text, '/');
    size_t n = slash ? (size_t)(slash - text) : strlen(text);
    if (n == 0 || n >= sizeof buf)
        return bb_error_set(err, BB_EINVAL, "address range '%.80s' is not ADDRESS[/PREFIX]", text);
    memcpy(buf, text, n);
    buf[n] = '\0';
    if (inet_pton(AF_INET, buf, out->addr) == 1)
        out->family = AF_INET;
    else if (inet_pton(AF_INET6, buf, out->addr) == 1)
        out->family = AF_INET6;
    else
        return bb_error_set(err, BB_EINVAL, "address range '%.80s': '%s' is not an IP address",
                            text, buf);
    unsigned max = out->family == AF_INET ? 32 : 128, prefix = max;
    if (slash) {
        char *end;
        unsigned long v = strtoul(slash + 1, &end, 10);
        if (!slash[1] || *end || slash[1] == '-' || slash[1] == '+' || v > max)
            return bb_error_set(err, BB_EINVAL, "address range '%.80s': prefix must be 0..%u",
                                text, max);
        prefix = (unsigned)v;
    }
    out->prefix = (uint8_t)prefix;
    /* the network address: bits past the prefix cleared */
    for (unsigned bit = prefix; bit < max; bit++)
        out->addr[bit / 8] &= (uint8_t) ~(0x80u >> (bit % 8));
    return BB_OK;
}

bool bbd_cidr_contains(const bbd_cidr *c, int family, const uint8_t *ip)
{
    if (c->family != family)
        return false;
    unsigned full = c->prefix / 8, rest = c->prefix % 8;
    if (memcmp(c->addr, ip, full) != 0)
        return false;
    uint8_t mask = (uint8_t)(0xff00u >> rest);
    return !rest || (ip[full] & mask) == c->addr[full];
}

/* ---- dial rules ----------------------------------------------------------------------- */

static bool in_any(const bbd_cidr *v, size_t n, const bb_ma_transport *ma)
{
    for (size_t i = 0; i < n; i++)
        if (bbd_cidr_contains(&v[i], ma->family, ma->ip))
            return true;
    return false;
}

bool bbd__dial_allowed(bbd_transport *t, const bb_ma_transport *ma)
{
    const bbd_transport_config *c = &t->cfg;
    bool ok = (!c->n_dial_allow || in_any(t->dial_allow, c->n_dial_allow, ma)) &&
              !in_any(t->dial_deny, c->n_dial_deny, ma);
    if (!ok) {
        t->stats.dials_refused++;
        uint8_t a[BBD_ADDR_BYTES];
        size_t n = 0;
        char text[BB_MULTIADDR_TEXT_MAX + 1];
        if (bb_ma_transport_encode(ma, a, sizeof a, &n, NULL) != BB_OK)
            n = 0;
        bbd__log_remote(t, BB_LOG_WARN, "dial to %s refused by the dial rules (dial_allow, "
                                        "dial_deny)",
                        bbd__addr_text(a, n, text, sizeof text));
    }
    return ok;
}

static bbd_cidr *copy_rules(const bbd_cidr *v, size_t n)
{
    bbd_cidr *c = malloc((n ? n : 1) * sizeof *c);
    if (c && n)
        memcpy(c, v, n * sizeof *c);
    return c;
}

int bbd__rules_init(bbd_transport *t)
{
    t->dial_allow = copy_rules(t->cfg.dial_allow, t->cfg.n_dial_allow);
    t->dial_deny = copy_rules(t->cfg.dial_deny, t->cfg.n_dial_deny);
    t->cfg.dial_allow = t->cfg.dial_deny = NULL; /* borrowed: use the copies */
    return t->dial_allow && t->dial_deny ? BB_OK : BB_ENOMEM;
}

void bbd__rules_free(bbd_transport *t)
{
    free(t->dial_allow);
    free(t->dial_deny);
    free(t->sources);
}

/* ---- per-source connections -------------------------------------------------------------- */

static struct bbd_source *source_find(bbd_transport *t, const bb_ma_transport *ma)
{
    size_t len = ma->family == AF_INET ? 4 : 16;
    for (size_t i = 0; i < t->n_sources; i++)
        if (t->sources[i].family == ma->family && memcmp(t->sources[i].ip, ma->ip, len) == 0)
            return &t->sources[i];
    return NULL;
}

bool bbd__source_add(bbd_transport *t, const bb_ma_transport *ma)
{
    struct bbd_source *s = source_find(t, ma);
    if (s) {
        if (s->conns >= t->cfg.max_connections_per_source)
            return false;
        s->conns++;
        return true;
    }
    if (t->n_sources == t->cap_sources) {
        size_t cap = t->cap_sources ? 2 * t->cap_sources : 16;
        struct bbd_source *v = realloc(t->sources, cap * sizeof *v);
        if (!v)
            return false;
        t->sources = v;
        t->cap_sources = cap;
    }
    s = &t->sources[t->n_sources++];
    memset(s, 0, sizeof *s);
    s->family = ma->family;
    memcpy(s->ip, ma->ip, ma->family == AF_INET ? 4 : 16);
    s->conns = 1;
    return true;
}

void bbd__source_remove(bbd_transport *t, const bb_ma_transport *ma)
{
    struct bbd_source *s = source_find(t, ma);
    if (s && --s->conns == 0)
        *s = t->sources[--t->n_sources];
}
