/*
 * multiaddr.c — multiaddr text <-> binary, component walk, the intra-node
 * suffixes (/site, /component/../op) and IP transport helpers.
 *
 * Layout, codes and limits are in bb/multiaddr.h. Binary input is untrusted:
 * every read is bounded by the given length and every problem is an error
 * naming the byte offset. All work happens in caller memory or on the stack
 * (at most one 1 KiB and one 4 KiB buffer); only the *_alloc variants malloc.
 */
#include "bb/multiaddr.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/peerid.h"
#include "bb/uvarint.h"

/* ---- protocol table ------------------------------------------------------- */

typedef enum value_kind {
    VK_FIXED,  /* size bytes */
    VK_VARINT, /* one varint (u64) */
    VK_LENGTH  /* varint length + bytes */
} value_kind;

typedef struct proto_info {
    uint64_t code;
    const char *name;
    value_kind vk;
    size_t size; /* VK_FIXED only */
} proto_info;

static const proto_info PROTOS[] = {
    {BB_MA_IP4, "ip4", VK_FIXED, 4},
    {BB_MA_TCP, "tcp", VK_FIXED, 2},
    {BB_MA_UDP, "udp", VK_FIXED, 2},
    {BB_MA_IP6, "ip6", VK_FIXED, 16},
    {BB_MA_DNS, "dns", VK_LENGTH, 0},
    {BB_MA_DNS4, "dns4", VK_LENGTH, 0},
    {BB_MA_DNS6, "dns6", VK_LENGTH, 0},
    {BB_MA_P2P, "p2p", VK_LENGTH, 0},
    {BB_MA_SITE, "site", VK_VARINT, 0},
    {BB_MA_COMPONENT, "component", VK_VARINT, 0},
    {BB_MA_OP, "op", VK_LENGTH, 0},
};
#define N_PROTOS (sizeof PROTOS / sizeof PROTOS[0])

static const proto_info *proto_by_code(uint64_t code)
{
    for (size_t i = 0; i < N_PROTOS; i++)
        if (PROTOS[i].code == code)
            return &PROTOS[i];
    return NULL;
}

static const proto_info *proto_by_name(const char *s, size_t n)
{
    for (size_t i = 0; i < N_PROTOS; i++)
        if (strlen(PROTOS[i].name) == n && memcmp(PROTOS[i].name, s, n) == 0)
            return &PROTOS[i];
    if (n == 4 && memcmp(s, "ipfs", 4) == 0) /* legacy alias of p2p */
        return proto_by_code(BB_MA_P2P);
    return NULL;
}

const char *bb_ma_proto_name(uint64_t code)
{
    const proto_info *p = proto_by_code(code);
    return p ? p->name : NULL;
}

static bool is_intra(uint64_t code)
{
    return code == BB_MA_SITE || code == BB_MA_COMPONENT || code == BB_MA_OP;
}

/* Names (dns, op): 1..255 bytes of printable ASCII without '/'. Returns the
 * offset of the first bad byte, or n if all are fine. */
static size_t bad_name_byte(const uint8_t *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (s[i] < 0x21 || s[i] > 0x7e || s[i] == '/')
            return i;
    return n;
}

/* Order rule shared by text and binary: /op only right after /component,
 * and /component only followed by /op. */
static const char *order_problem(uint64_t prev, uint64_t code)
{
    if (code == BB_MA_OP && prev != BB_MA_COMPONENT)
        return "/op must directly follow /component";
    if (prev == BB_MA_COMPONENT && code != BB_MA_OP)
        return "/component must be followed by /op";
    return NULL;
}

/* ---- binary walk ----------------------------------------------------------- */

void bb_multiaddr_iter_init(bb_multiaddr_iter *it, const uint8_t *addr, size_t len)
{
    it->addr = addr;
    it->len = len;
    it->pos = 0;
    it->count = 0;
    it->prev_code = 0;
}

static int varint_error(bb_uvarint_rc vr, bb_error *err, size_t off, const char *what)
{
    return bb_error_set(err, vr == BB_UVARINT_TRUNC ? BB_ETRUNC : BB_EPARSE,
                        "multiaddr byte %zu: %s in %s", off, bb_uvarint_rc_str(vr), what);
}

int bb_multiaddr_iter_next(bb_multiaddr_iter *it, bb_multiaddr_component *c, bool *more,
                           bb_error *err)
{
    const uint8_t *a = it->addr;
    size_t len = it->len, pos = it->pos;
    uint64_t prev = it->prev_code;
    *more = false;
    if (!a && len)
        return bb_error_set(err, BB_EINVAL, "multiaddr: NULL buffer");
    if (len > BB_MULTIADDR_MAX_LEN)
        return bb_error_set(err, BB_ELIMIT, "multiaddr: %zu bytes exceeds the limit of %d", len,
                            BB_MULTIADDR_MAX_LEN);
    if (len == 0)
        return bb_error_set(err, BB_EPARSE, "multiaddr: empty");
    if (pos >= len) {
        if (prev == BB_MA_COMPONENT)
            return bb_error_set(err, BB_EPARSE, "multiaddr byte %zu: %s", len,
                                "/component must be followed by /op");
        return BB_OK;
    }
    if (it->count >= BB_MULTIADDR_MAX_COMPONENTS)
        return bb_error_set(err, BB_ELIMIT,
                            "multiaddr byte %zu: more than %d components", pos,
                            BB_MULTIADDR_MAX_COMPONENTS);

    uint64_t code;
    size_t used;
    bb_uvarint_rc vr = bb_uvarint_decode(a + pos, len - pos, BB_UVARINT_MAX_SPEC, &code, &used);
    if (vr != BB_UVARINT_OK)
        return varint_error(vr, err, pos, "protocol code");
    const proto_info *p = proto_by_code(code);
    if (!p)
        return bb_error_set(err, BB_EUNSUPPORTED, "multiaddr byte %zu: unknown protocol code 0x%llx",
                            pos, (unsigned long long)code);
    const char *order = order_problem(prev, code);
    if (order)
        return bb_error_set(err, BB_EPARSE, "multiaddr byte %zu: %s", pos, order);

    size_t vpos = pos + used, left = len - vpos;
    memset(c, 0, sizeof *c);
    c->code = code;
    c->name = p->name;
    c->offset = pos;
    switch (p->vk) {
    case VK_FIXED:
        if (left < p->size)
            return bb_error_set(err, BB_ETRUNC,
                                "multiaddr byte %zu: /%s value needs %zu bytes, %zu left", vpos,
                                p->name, p->size, left);
        c->value = a + vpos;
        c->value_len = p->size;
        if (p->size == 2)
            c->num = (uint64_t)a[vpos] << 8 | a[vpos + 1];
        break;
    case VK_VARINT: {
        uint64_t v;
        size_t vu;
        vr = bb_uvarint_decode(a + vpos, left, BB_UVARINT_MAX_U64, &v, &vu);
        if (vr != BB_UVARINT_OK)
            return varint_error(vr, err, vpos, p->name);
        c->value = a + vpos;
        c->value_len = vu;
        c->num = v;
        break;
    }
    case VK_LENGTH: {
        uint64_t n;
        size_t lu;
        vr = bb_uvarint_decode(a + vpos, left, BB_UVARINT_MAX_SPEC, &n, &lu);
        if (vr != BB_UVARINT_OK)
            return varint_error(vr, err, vpos, "value length");
        if (n > left - lu)
            return bb_error_set(err, BB_ETRUNC,
                                "multiaddr byte %zu: /%s value of %llu bytes, %zu left", vpos,
                                p->name, (unsigned long long)n, left - lu);
        c->value = a + vpos + lu;
        c->value_len = (size_t)n;
        if (code == BB_MA_P2P) {
            bb_error sub;
            int rc = bb_peerid_validate(c->value, c->value_len, &sub);
            if (rc)
                return bb_error_set(err, BB_EPARSE, "multiaddr byte %zu: bad /p2p value: %s",
                                    vpos + lu, sub.msg);
        } else {
            if (n == 0 || n > BB_MULTIADDR_NAME_MAX)
                return bb_error_set(err, BB_EPARSE,
                                    "multiaddr byte %zu: /%s name of %llu bytes (must be 1..%d)",
                                    vpos, p->name, (unsigned long long)n, BB_MULTIADDR_NAME_MAX);
            size_t bad = bad_name_byte(c->value, c->value_len);
            if (bad < c->value_len)
                return bb_error_set(err, BB_EPARSE,
                                    "multiaddr byte %zu: /%s name has byte 0x%02x (printable "
                                    "ASCII other than '/' only)",
                                    vpos + lu + bad, p->name, c->value[bad]);
        }
        vpos += lu;
        break;
    }
    }
    c->len = vpos + c->value_len - pos;
    it->pos = pos + c->len;
    it->count++;
    it->prev_code = code;
    *more = true;
    return BB_OK;
}

/* Walk everything; comps may be NULL (validation only). */
static int decode_all(const uint8_t *addr, size_t len, bb_multiaddr_component *comps,
                      size_t cap, size_t *n, bb_error *err)
{
    bb_multiaddr_iter it;
    bb_multiaddr_component c;
    bool more = true;
    bb_multiaddr_iter_init(&it, addr, len);
    size_t k = 0;
    if (n) /* set on every path: the compiler cannot see bb_error_set() is never BB_OK */
        *n = 0;
    for (;;) {
        int rc = bb_multiaddr_iter_next(&it, &c, &more, err);
        if (rc)
            return rc;
        if (!more)
            break;
        if (comps) {
            if (k >= cap)
                return bb_error_set(err, BB_EFULL, "multiaddr: more than %zu components", cap);
            comps[k] = c;
        }
        k++;
    }
    if (n)
        *n = k;
    return BB_OK;
}

int bb_multiaddr_validate(const uint8_t *addr, size_t len, bb_error *err)
{
    return decode_all(addr, len, NULL, 0, NULL, err);
}

int bb_multiaddr_decode(const uint8_t *addr, size_t len, bb_multiaddr_component *comps,
                        size_t cap, size_t *n, bb_error *err)
{
    if (!comps || !n)
        return bb_error_set(err, BB_EINVAL, "multiaddr decode: NULL output");
    return decode_all(addr, len, comps, cap, n, err);
}

/* ---- text -> binary ---------------------------------------------------------- */

/* Quote text for a message: at most 64 bytes, non-printables as '?'. */
static void quote_text(const char *text, size_t n, char out[72])
{
    size_t k = n > 64 ? 61 : n;
    for (size_t i = 0; i < k; i++) {
        unsigned char ch = (unsigned char)text[i];
        out[i] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
    }
    if (n > 64) {
        memcpy(out + k, "...", 3);
        k += 3;
    }
    out[k] = '\0';
}

/* Canonical decimal u64 from s[0..n): digits only, no leading zero. */
static bool parse_u64(const char *s, size_t n, uint64_t max, uint64_t *out)
{
    if (n == 0 || n > 20 || (n > 1 && s[0] == '0'))
        return false;
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        unsigned d = (unsigned)(s[i] - '0');
        if (v > (max - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

typedef struct text_ctx {
    const char *text;
    size_t n;
    bb_error *err;
} text_ctx;

static int text_fail(const text_ctx *t, int code, size_t off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5), cold));
static int text_fail(const text_ctx *t, int code, size_t off, const char *fmt, ...)
{
    char q[72], msg[BB_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    quote_text(t->text, t->n, q);
    return bb_error_set(t->err, code, "multiaddr \"%s\" offset %zu: %s", q, off, msg);
}

/* Encode one component's value from text v[0..vn) (at offset voff) into
 * buf at *pos (buf has BB_MULTIADDR_MAX_LEN bytes). */
static int encode_value(const text_ctx *t, const proto_info *p, const char *v, size_t vn,
                        size_t voff, uint8_t *buf, size_t *pos)
{
    uint8_t tmp[BB_MULTIADDR_NAME_MAX + 16];
    size_t tn = 0;
    switch (p->code) {
    case BB_MA_IP4:
    case BB_MA_IP6: {
        char ip[INET6_ADDRSTRLEN];
        int af = p->code == BB_MA_IP4 ? AF_INET : AF_INET6;
        if (vn >= sizeof ip)
            return text_fail(t, BB_EPARSE, voff, "bad %s address (too long)", p->name);
        memcpy(ip, v, vn);
        ip[vn] = '\0';
        if (inet_pton(af, ip, tmp) != 1)
            return text_fail(t, BB_EPARSE, voff, "bad %s address '%s'", p->name, ip);
        tn = p->size;
        break;
    }
    case BB_MA_TCP:
    case BB_MA_UDP: {
        uint64_t port;
        if (!parse_u64(v, vn, UINT64_MAX, &port))
            return text_fail(t, BB_EPARSE, voff, "bad /%s port '%.*s' (decimal 0..65535)",
                             p->name, (int)(vn > 24 ? 24 : vn), v);
        if (port > 65535)
            return text_fail(t, BB_EPARSE, voff, "/%s port %llu > 65535", p->name,
                             (unsigned long long)port);
        tmp[0] = (uint8_t)(port >> 8);
        tmp[1] = (uint8_t)port;
        tn = 2;
        break;
    }
    case BB_MA_SITE:
    case BB_MA_COMPONENT: {
        uint64_t id;
        if (!parse_u64(v, vn, UINT64_MAX, &id))
            return text_fail(t, BB_EPARSE, voff, "bad /%s id '%.*s' (decimal u64)", p->name,
                             (int)(vn > 24 ? 24 : vn), v);
        tn = bb_uvarint_encode(id, tmp);
        break;
    }
    case BB_MA_P2P: {
        char pt[BB_PEERID_TEXT_MAX + 1];
        bb_peerid id;
        bb_error sub;
        if (vn > BB_PEERID_TEXT_MAX)
            return text_fail(t, BB_EPARSE, voff, "bad /p2p PeerId (longer than %d characters)",
                             BB_PEERID_TEXT_MAX);
        memcpy(pt, v, vn);
        pt[vn] = '\0';
        if (bb_peerid_from_text(pt, &id, &sub) != BB_OK)
            return text_fail(t, BB_EPARSE, voff, "bad /p2p value: %s", sub.msg);
        tn = bb_uvarint_encode(id.len, tmp);
        memcpy(tmp + tn, id.bytes, id.len);
        tn += id.len;
        break;
    }
    default: { /* names: dns, dns4, dns6, op */
        if (vn > BB_MULTIADDR_NAME_MAX)
            return text_fail(t, BB_EPARSE, voff, "/%s name longer than %d bytes", p->name,
                             BB_MULTIADDR_NAME_MAX);
        size_t bad = bad_name_byte((const uint8_t *)v, vn);
        if (bad < vn)
            return text_fail(t, BB_EPARSE, voff + bad,
                             "/%s name has byte 0x%02x (printable ASCII other than '/' only)",
                             p->name, (unsigned char)v[bad]);
        tn = bb_uvarint_encode(vn, tmp);
        memcpy(tmp + tn, v, vn);
        tn += vn;
        break;
    }
    }
    if (*pos + tn > BB_MULTIADDR_MAX_LEN)
        return text_fail(t, BB_ELIMIT, voff, "binary form exceeds %d bytes",
                         BB_MULTIADDR_MAX_LEN);
    memcpy(buf + *pos, tmp, tn);
    *pos += tn;
    return BB_OK;
}

/* Parse into buf[BB_MULTIADDR_MAX_LEN]. */
static int parse_text(const char *text, uint8_t *buf, size_t *out_len, bb_error *err)
{
    if (!text)
        return bb_error_set(err, BB_EINVAL, "multiaddr: NULL text");
    text_ctx t = {text, strnlen(text, BB_MULTIADDR_TEXT_MAX + 1), err};
    if (t.n > BB_MULTIADDR_TEXT_MAX)
        return text_fail(&t, BB_ELIMIT, 0, "text longer than %d characters",
                         BB_MULTIADDR_TEXT_MAX);
    if (t.n == 0)
        return text_fail(&t, BB_EPARSE, 0, "empty multiaddr");
    size_t i = 0, pos = 0, count = 0;
    uint64_t prev = 0;
    while (i < t.n) {
        if (text[i] != '/')
            return text_fail(&t, BB_EPARSE, i, "expected '/'");
        size_t ns = ++i;
        while (i < t.n && text[i] != '/')
            i++;
        size_t nn = i - ns;
        if (nn == 0)
            return text_fail(&t, BB_EPARSE, ns, "empty protocol name");
        const proto_info *p = proto_by_name(text + ns, nn);
        if (!p)
            return text_fail(&t, BB_EUNSUPPORTED, ns, "unknown protocol '%.*s'",
                             (int)(nn > 32 ? 32 : nn), text + ns);
        if (count >= BB_MULTIADDR_MAX_COMPONENTS)
            return text_fail(&t, BB_ELIMIT, ns - 1, "more than %d components",
                             BB_MULTIADDR_MAX_COMPONENTS);
        const char *order = order_problem(prev, p->code);
        if (order)
            return text_fail(&t, BB_EPARSE, ns - 1, "%s", order);
        if (i >= t.n)
            return text_fail(&t, BB_EPARSE, i, "missing value for /%s", p->name);
        size_t vs = ++i;
        while (i < t.n && text[i] != '/')
            i++;
        if (i == vs)
            return text_fail(&t, BB_EPARSE, vs, "empty value for /%s", p->name);
        uint8_t code[BB_UVARINT_MAX_SPEC];
        size_t cn = bb_uvarint_encode(p->code, code);
        if (pos + cn > BB_MULTIADDR_MAX_LEN)
            return text_fail(&t, BB_ELIMIT, ns, "binary form exceeds %d bytes",
                             BB_MULTIADDR_MAX_LEN);
        memcpy(buf + pos, code, cn);
        pos += cn;
        int rc = encode_value(&t, p, text + vs, i - vs, vs, buf, &pos);
        if (rc)
            return rc;
        prev = p->code;
        count++;
    }
    if (prev == BB_MA_COMPONENT)
        return text_fail(&t, BB_EPARSE, t.n, "/component must be followed by /op");
    *out_len = pos;
    return BB_OK;
}

int bb_multiaddr_parse(const char *text, uint8_t *out, size_t cap, size_t *out_len,
                       bb_error *err)
{
    uint8_t buf[BB_MULTIADDR_MAX_LEN];
    size_t n = 0;
    int rc = parse_text(text, buf, &n, err);
    if (rc)
        return rc;
    if (!out || n > cap)
        return bb_error_set(err, BB_EFULL, "multiaddr parse: needs %zu bytes, buffer has %zu", n,
                            out ? cap : 0);
    memcpy(out, buf, n);
    if (out_len)
        *out_len = n;
    return BB_OK;
}

int bb_multiaddr_parse_alloc(const char *text, uint8_t **out, size_t *out_len, bb_error *err)
{
    uint8_t buf[BB_MULTIADDR_MAX_LEN];
    size_t n = 0;
    *out = NULL;
    int rc = parse_text(text, buf, &n, err);
    if (rc)
        return rc;
    uint8_t *p = malloc(n);
    if (!p)
        return bb_error_set(err, BB_ENOMEM, "multiaddr parse: out of memory");
    memcpy(p, buf, n);
    *out = p;
    if (out_len)
        *out_len = n;
    return BB_OK;
}

/* ---- binary -> text ---------------------------------------------------------- */

typedef struct text_buf {
    char *p;
    size_t cap, len;
} text_buf;

static void tb_put(text_buf *b, const char *s, size_t n)
{
    /* callers size the buffer from BB_MULTIADDR_TEXT_MAX; keep it bounded anyway */
    if (b->len + n < b->cap) {
        memcpy(b->p + b->len, s, n);
        b->len += n;
    } else {
        b->len = b->cap; /* mark overflow */
    }
}

static int format_text(const uint8_t *addr, size_t len, char *out, size_t cap, size_t *out_len,
                       bb_error *err)
{
    bb_multiaddr_component comps[BB_MULTIADDR_MAX_COMPONENTS];
    size_t nc;
    int rc = decode_all(addr, len, comps, BB_MULTIADDR_MAX_COMPONENTS, &nc, err);
    if (rc)
        return rc;
    text_buf b = {out, cap, 0};
    for (size_t i = 0; i < nc; i++) {
        const bb_multiaddr_component *c = &comps[i];
        char v[INET6_ADDRSTRLEN + BB_PEERID_TEXT_MAX];
        const char *vs = v;
        size_t vn;
        switch (c->code) {
        case BB_MA_IP4:
        case BB_MA_IP6:
            if (!inet_ntop(c->code == BB_MA_IP4 ? AF_INET : AF_INET6, c->value, v, sizeof v))
                return bb_error_set(err, BB_EPARSE, "multiaddr byte %zu: unprintable /%s",
                                    c->offset, c->name);
            vn = strlen(v);
            break;
        case BB_MA_TCP:
        case BB_MA_UDP:
        case BB_MA_SITE:
        case BB_MA_COMPONENT:
            vn = (size_t)snprintf(v, sizeof v, "%llu", (unsigned long long)c->num);
            break;
        case BB_MA_P2P:
            rc = bb_base58_encode(c->value, c->value_len, v, sizeof v, &vn, err);
            if (rc)
                return rc;
            break;
        default: /* names */
            vs = (const char *)c->value;
            vn = c->value_len;
            break;
        }
        tb_put(&b, "/", 1);
        tb_put(&b, c->name, strlen(c->name));
        tb_put(&b, "/", 1);
        tb_put(&b, vs, vn);
    }
    if (b.len >= cap)
        return bb_error_set(err, BB_EFULL, "multiaddr format: text does not fit in %zu bytes",
                            cap);
    out[b.len] = '\0';
    if (out_len)
        *out_len = b.len;
    return BB_OK;
}

int bb_multiaddr_format(const uint8_t *addr, size_t len, char *out, size_t cap,
                        size_t *out_len, bb_error *err)
{
    if (!out || cap == 0)
        return bb_error_set(err, BB_EFULL, "multiaddr format: no output buffer");
    return format_text(addr, len, out, cap, out_len, err);
}

int bb_multiaddr_format_alloc(const uint8_t *addr, size_t len, char **out, bb_error *err)
{
    char buf[BB_MULTIADDR_TEXT_MAX + 1];
    size_t n;
    *out = NULL;
    int rc = format_text(addr, len, buf, sizeof buf, &n, err);
    if (rc)
        return rc;
    char *s = malloc(n + 1);
    if (!s)
        return bb_error_set(err, BB_ENOMEM, "multiaddr format: out of memory");
    memcpy(s, buf, n + 1);
    *out = s;
    return BB_OK;
}

/* ---- split / join ------------------------------------------------------------ */

static int split_decoded(const bb_multiaddr_component *comps, size_t nc, size_t len,
                         size_t *first_intra, size_t *transport_len, bb_error *err)
{
    size_t k = 0;
    *first_intra = 0; /* see decode_all */
    *transport_len = 0;
    while (k < nc && !is_intra(comps[k].code))
        k++;
    for (size_t j = k; j < nc; j++)
        if (!is_intra(comps[j].code))
            return bb_error_set(err, BB_EPARSE,
                                "multiaddr byte %zu: /%s after the intra-node suffix",
                                comps[j].offset, comps[j].name);
    *first_intra = k;
    *transport_len = k < nc ? comps[k].offset : len;
    return BB_OK;
}

int bb_multiaddr_split(const uint8_t *addr, size_t len, size_t *transport_len, bb_error *err)
{
    bb_multiaddr_component comps[BB_MULTIADDR_MAX_COMPONENTS];
    size_t nc, k;
    int rc = decode_all(addr, len, comps, BB_MULTIADDR_MAX_COMPONENTS, &nc, err);
    if (rc)
        return rc;
    return split_decoded(comps, nc, len, &k, transport_len, err);
}

int bb_multiaddr_join(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen,
                      uint8_t *out, size_t cap, size_t *out_len, bb_error *err)
{
    if (alen > BB_MULTIADDR_MAX_LEN || blen > BB_MULTIADDR_MAX_LEN - alen)
        return bb_error_set(err, BB_ELIMIT, "multiaddr join: %zu + %zu bytes exceeds %d", alen,
                            blen, BB_MULTIADDR_MAX_LEN);
    uint8_t buf[BB_MULTIADDR_MAX_LEN];
    if (alen)
        memcpy(buf, a, alen);
    if (blen)
        memcpy(buf + alen, b, blen);
    int rc = bb_multiaddr_validate(buf, alen + blen, err);
    if (rc)
        return bb_error_prefix(err, "multiaddr join");
    if (!out || alen + blen > cap)
        return bb_error_set(err, BB_EFULL, "multiaddr join: needs %zu bytes, buffer has %zu",
                            alen + blen, out ? cap : 0);
    memcpy(out, buf, alen + blen);
    if (out_len)
        *out_len = alen + blen;
    return BB_OK;
}

/* ---- suffixes ------------------------------------------------------------------ */

int bb_suffix_site(uint64_t site_id, uint8_t *out, size_t cap, size_t *out_len, bb_error *err)
{
    uint8_t buf[2 * BB_UVARINT_MAX_U64];
    size_t n = bb_uvarint_encode(BB_MA_SITE, buf);
    n += bb_uvarint_encode(site_id, buf + n);
    if (!out || n > cap)
        return bb_error_set(err, BB_EFULL, "suffix /site/%llu: needs %zu bytes, buffer has %zu",
                            (unsigned long long)site_id, n, out ? cap : 0);
    memcpy(out, buf, n);
    if (out_len)
        *out_len = n;
    return BB_OK;
}

int bb_suffix_component_op(uint64_t cref, const char *op, uint8_t *out, size_t cap,
                           size_t *out_len, bb_error *err)
{
    if (!op)
        return bb_error_set(err, BB_EINVAL, "suffix /component/%llu/op: NULL op name",
                            (unsigned long long)cref);
    size_t on = strnlen(op, BB_MULTIADDR_NAME_MAX + 1);
    if (on == 0 || on > BB_MULTIADDR_NAME_MAX)
        return bb_error_set(err, BB_EINVAL,
                            "suffix /component/%llu/op: op name of %s bytes (must be 1..%d)",
                            (unsigned long long)cref, on ? "too many" : "0",
                            BB_MULTIADDR_NAME_MAX);
    size_t bad = bad_name_byte((const uint8_t *)op, on);
    if (bad < on)
        return bb_error_set(err, BB_EINVAL,
                            "suffix /component/%llu/op/%s: byte 0x%02x at offset %zu (printable "
                            "ASCII other than '/' only)",
                            (unsigned long long)cref, op, (unsigned char)op[bad], bad);
    uint8_t buf[4 * BB_UVARINT_MAX_U64 + BB_MULTIADDR_NAME_MAX];
    size_t n = bb_uvarint_encode(BB_MA_COMPONENT, buf);
    n += bb_uvarint_encode(cref, buf + n);
    n += bb_uvarint_encode(BB_MA_OP, buf + n);
    n += bb_uvarint_encode(on, buf + n);
    memcpy(buf + n, op, on);
    n += on;
    if (!out || n > cap)
        return bb_error_set(err, BB_EFULL,
                            "suffix /component/%llu/op/%s: needs %zu bytes, buffer has %zu",
                            (unsigned long long)cref, op, n, out ? cap : 0);
    memcpy(out, buf, n);
    if (out_len)
        *out_len = n;
    return BB_OK;
}

int bb_suffix_parse(const uint8_t *addr, size_t len, bb_suffix *out, bb_error *err)
{
    /* Every data fill names a bare /site/<id>: read it without the general
     * component walk (same checks: minimal varints, nothing left over). */
    uint64_t code, id;
    size_t cu, iu;
    if (addr && len <= BB_MULTIADDR_MAX_LEN &&
        bb_uvarint_decode(addr, len, BB_UVARINT_MAX_SPEC, &code, &cu) == BB_UVARINT_OK &&
        code == BB_MA_SITE &&
        bb_uvarint_decode(addr + cu, len - cu, BB_UVARINT_MAX_U64, &id, &iu) == BB_UVARINT_OK &&
        cu + iu == len) {
        memset(out, 0, sizeof *out);
        out->kind = BB_SUFFIX_SITE;
        out->site_id = id;
        return BB_OK;
    }
    bb_multiaddr_component comps[BB_MULTIADDR_MAX_COMPONENTS];
    size_t nc, k, tlen;
    int rc = decode_all(addr, len, comps, BB_MULTIADDR_MAX_COMPONENTS, &nc, err);
    if (rc == BB_OK)
        rc = split_decoded(comps, nc, len, &k, &tlen, err);
    if (rc)
        return rc;
    memset(out, 0, sizeof *out);
    size_t ns = nc - k;
    if (ns == 0)
        return bb_error_set(err, BB_ENOTFOUND, "multiaddr: no intra-node suffix");
    const bb_multiaddr_component *s = &comps[k];
    if (ns == 1 && s[0].code == BB_MA_SITE) {
        out->kind = BB_SUFFIX_SITE;
        out->site_id = s[0].num;
        return BB_OK;
    }
    if (ns == 2 && s[0].code == BB_MA_COMPONENT && s[1].code == BB_MA_OP) {
        out->kind = BB_SUFFIX_COMPONENT_OP;
        out->cref = s[0].num;
        memcpy(out->op, s[1].value, s[1].value_len); /* <= BB_MULTIADDR_NAME_MAX */
        out->op[s[1].value_len] = '\0';
        return BB_OK;
    }
    return bb_error_set(err, BB_EPARSE,
                        "multiaddr byte %zu: suffix must be /site/<id> or "
                        "/component/<cref>/op/<name>, not %zu components starting with /%s",
                        s[0].offset, ns, s[0].name);
}

/* ---- transports ---------------------------------------------------------------- */

static bool is_name_code(uint64_t c)
{
    return c == BB_MA_DNS || c == BB_MA_DNS4 || c == BB_MA_DNS6;
}

/* The first two components of an endpoint: a host (IP, or a name when
 * names are accepted) then /tcp or /udp. */
static int endpoint_parts(const uint8_t *addr, size_t len, bool names,
                          bb_multiaddr_component *comps, bb_error *err)
{
    size_t nc;
    int rc = decode_all(addr, len, comps, BB_MULTIADDR_MAX_COMPONENTS, &nc, err);
    if (rc)
        return rc;
    uint64_t c0 = comps[0].code;
    if (c0 != BB_MA_IP4 && c0 != BB_MA_IP6 && !(names && is_name_code(c0)))
        return bb_error_set(err, BB_EUNSUPPORTED,
                            "multiaddr byte 0: transport needs /ip4 or /ip6%s first, not /%s",
                            names ? " (or /dns, /dns4, /dns6)" : "", comps[0].name);
    if (nc < 2 || (comps[1].code != BB_MA_TCP && comps[1].code != BB_MA_UDP))
        return bb_error_set(err, BB_EUNSUPPORTED,
                            "multiaddr byte %zu: transport needs /tcp or /udp after /%s",
                            nc < 2 ? len : comps[1].offset, comps[0].name);
    return BB_OK;
}

static void transport_of(const bb_multiaddr_component *comps, bb_ma_transport *out)
{
    memset(out, 0, sizeof *out);
    out->family = comps[0].code == BB_MA_IP4 ? AF_INET : AF_INET6;
    memcpy(out->ip, comps[0].value, comps[0].value_len);
    out->proto = (bb_ma_proto)comps[1].code;
    out->port = (uint16_t)comps[1].num;
}

int bb_multiaddr_transport(const uint8_t *addr, size_t len, bb_ma_transport *out,
                           bb_error *err)
{
    bb_multiaddr_component comps[BB_MULTIADDR_MAX_COMPONENTS];
    int rc = endpoint_parts(addr, len, false, comps, err);
    if (rc)
        return rc;
    transport_of(comps, out);
    return BB_OK;
}

int bb_multiaddr_endpoint(const uint8_t *addr, size_t len, bb_ma_endpoint *out, bb_error *err)
{
    bb_multiaddr_component comps[BB_MULTIADDR_MAX_COMPONENTS];
    int rc = endpoint_parts(addr, len, true, comps, err);
    if (rc)
        return rc;
    memset(out, 0, sizeof *out);
    out->proto = (bb_ma_proto)comps[1].code;
    out->port = (uint16_t)comps[1].num;
    if (!is_name_code(comps[0].code)) {
        transport_of(comps, &out->ip);
        return BB_OK;
    }
    out->is_name = true;
    memcpy(out->name, comps[0].value, comps[0].value_len); /* <= BB_MULTIADDR_NAME_MAX */
    out->name[comps[0].value_len] = '\0';
    out->family = comps[0].code == BB_MA_DNS4   ? AF_INET
                  : comps[0].code == BB_MA_DNS6 ? AF_INET6
                                                : AF_UNSPEC;
    return BB_OK;
}

int bb_ma_transport_encode(const bb_ma_transport *t, uint8_t *out, size_t cap,
                           size_t *out_len, bb_error *err)
{
    if (t->proto != BB_MA_TCP && t->proto != BB_MA_UDP)
        return bb_error_set(err, BB_EINVAL, "transport: protocol 0x%x is not tcp or udp",
                            (unsigned)t->proto);
    if (t->family != AF_INET && t->family != AF_INET6)
        return bb_error_set(err, BB_EINVAL, "transport: address family %d is not IPv4/IPv6",
                            t->family);
    uint8_t buf[32];
    size_t n = bb_uvarint_encode(t->family == AF_INET ? BB_MA_IP4 : BB_MA_IP6, buf);
    size_t iplen = t->family == AF_INET ? 4 : 16;
    memcpy(buf + n, t->ip, iplen);
    n += iplen;
    n += bb_uvarint_encode((uint64_t)t->proto, buf + n);
    buf[n++] = (uint8_t)(t->port >> 8);
    buf[n++] = (uint8_t)t->port;
    if (!out || n > cap)
        return bb_error_set(err, BB_EFULL, "transport encode: needs %zu bytes, buffer has %zu",
                            n, out ? cap : 0);
    memcpy(out, buf, n);
    if (out_len)
        *out_len = n;
    return BB_OK;
}

int bb_ma_transport_to_sockaddr(const bb_ma_transport *t, struct sockaddr_storage *ss,
                                socklen_t *sslen, bb_error *err)
{
    memset(ss, 0, sizeof *ss);
    if (t->family == AF_INET) {
        struct sockaddr_in *sin = (struct sockaddr_in *)ss;
        sin->sin_family = AF_INET;
        sin->sin_port = htons(t->port);
        memcpy(&sin->sin_addr, t->ip, 4);
        *sslen = sizeof *sin;
        return BB_OK;
    }
    if (t->family == AF_INET6) {
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)ss;
        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons(t->port);
        memcpy(&sin6->sin6_addr, t->ip, 16);
        *sslen = sizeof *sin6;
        return BB_OK;
    }
    return bb_error_set(err, BB_EINVAL, "transport: address family %d is not IPv4/IPv6",
                        t->family);
}

int bb_ma_transport_from_sockaddr(const struct sockaddr *sa, socklen_t salen, bb_ma_proto proto,
                                  bb_ma_transport *out, bb_error *err)
{
    if (proto != BB_MA_TCP && proto != BB_MA_UDP)
        return bb_error_set(err, BB_EINVAL, "sockaddr: protocol 0x%x is not tcp or udp",
                            (unsigned)proto);
    if (!sa || salen < (socklen_t)sizeof(sa_family_t))
        return bb_error_set(err, BB_EINVAL, "sockaddr: too short (%u bytes)", (unsigned)salen);
    memset(out, 0, sizeof *out);
    out->proto = proto;
    if (sa->sa_family == AF_INET) {
        struct sockaddr_in sin;
        if (salen < (socklen_t)sizeof sin)
            return bb_error_set(err, BB_EINVAL, "sockaddr_in: %u bytes, need %zu",
                                (unsigned)salen, sizeof sin);
        memcpy(&sin, sa, sizeof sin);
        out->family = AF_INET;
        memcpy(out->ip, &sin.sin_addr, 4);
        out->port = ntohs(sin.sin_port);
        return BB_OK;
    }
    if (sa->sa_family == AF_INET6) {
        struct sockaddr_in6 sin6;
        if (salen < (socklen_t)sizeof sin6)
            return bb_error_set(err, BB_EINVAL, "sockaddr_in6: %u bytes, need %zu",
                                (unsigned)salen, sizeof sin6);
        memcpy(&sin6, sa, sizeof sin6);
        out->family = AF_INET6;
        memcpy(out->ip, &sin6.sin6_addr, 16);
        out->port = ntohs(sin6.sin6_port);
        return BB_OK;
    }
    return bb_error_set(err, BB_EUNSUPPORTED, "sockaddr: address family %d is not IPv4/IPv6",
                        sa->sa_family);
}

int bb_multiaddr_to_sockaddr(const uint8_t *addr, size_t len, bb_ma_proto *proto,
                             struct sockaddr_storage *ss, socklen_t *sslen, bb_error *err)
{
    bb_ma_transport t;
    int rc = bb_multiaddr_transport(addr, len, &t, err);
    if (rc)
        return rc;
    if (proto)
        *proto = t.proto;
    return bb_ma_transport_to_sockaddr(&t, ss, sslen, err);
}

int bb_multiaddr_from_sockaddr(const struct sockaddr *sa, socklen_t salen, bb_ma_proto proto,
                               uint8_t *out, size_t cap, size_t *out_len, bb_error *err)
{
    bb_ma_transport t;
    int rc = bb_ma_transport_from_sockaddr(sa, salen, proto, &t, err);
    if (rc)
        return rc;
    return bb_ma_transport_encode(&t, out, cap, out_len, err);
}

int bb_multiaddr_pick(const bb_multiaddr_ref *addrs, size_t n, bb_ma_proto proto,
                      unsigned families, size_t *index, bb_ma_transport *out, bb_error *err)
{
    if (proto != BB_MA_TCP && proto != BB_MA_UDP)
        return bb_error_set(err, BB_EINVAL, "multiaddr pick: protocol 0x%x is not tcp or udp",
                            (unsigned)proto);
    for (size_t i = 0; i < n; i++) {
        bb_ma_transport t;
        if (!addrs || !addrs[i].data ||
            bb_multiaddr_transport(addrs[i].data, addrs[i].len, &t, NULL) != BB_OK)
            continue;
        unsigned fam = t.family == AF_INET ? BB_MA_FAMILY_IP4 : BB_MA_FAMILY_IP6;
        if (t.proto != proto || !(families & fam))
            continue;
        if (index)
            *index = i;
        if (out)
            *out = t;
        return BB_OK;
    }
    return bb_error_set(err, BB_ENOTFOUND, "multiaddr pick: none of %zu addresses is a usable /%s "
                        "address", n, proto == BB_MA_TCP ? "tcp" : "udp");
}
