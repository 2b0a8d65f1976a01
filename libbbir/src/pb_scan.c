/*
 * pb_scan.c — bounds-checked walk of protobuf wire data against the
 * protobuf-c schema, before anything untrusted reaches protobuf-c's unpack
 * (see pb_scan.h). Recursion follows message fields only and is bounded by
 * BB__PB_MAX_MSG_DEPTH; unknown fields are skipped, length-checked.
 */
#include "pb_scan.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bb/uvarint.h"
#include "onnx-ml.pb-c.h"

#define MAX_MSG_DEPTH BB__PB_MAX_MSG_DEPTH
/* protobuf-c reads length prefixes as 32-bit varints of at most 5 bytes. */
#define MAX_LEN_PREFIX_BYTES 5

typedef struct scan {
    const uint8_t *buf;
    size_t len;
    const char *name; /* file name for messages */
    bb_error *err;
    unsigned depth;       /* message nesting, 0 = top level */
    unsigned graph_depth; /* GraphProto nesting */
    const char *path[MAX_MSG_DEPTH + 2]; /* field name per level */
} scan;

/* "graph.node.attribute.g" for the current position; long paths keep their
 * first two and last five components. */
static const char *scan_path(const scan *s, const char *leaf, char *buf, size_t cap)
{
    size_t n = s->depth, off = 0;
    const char *parts[MAX_MSG_DEPTH + 3];
    size_t np = 0;
    for (size_t i = 0; i < n; i++)
        parts[np++] = s->path[i];
    if (leaf)
        parts[np++] = leaf;
    buf[0] = '\0';
    for (size_t i = 0; i < np && off + 1 < cap; i++) {
        if (np > 8 && i == 2) {
            off += (size_t)snprintf(buf + off, cap - off, ".(%zu more)", np - 7);
            i = np - 6;
            continue;
        }
        int w = snprintf(buf + off, cap - off, "%s%s", i ? "." : "", parts[i]);
        if (w < 0)
            break;
        off += (size_t)w;
    }
    if (off >= cap)
        buf[cap - 1] = '\0';
    return buf;
}

static const char *wire_name(unsigned wt)
{
    switch (wt) {
    case 0: return "varint";
    case 1: return "64-bit";
    case 2: return "length-delimited";
    case 3: return "start-group";
    case 4: return "end-group";
    case 5: return "32-bit";
    }
    return "invalid";
}

/* Wire type a scalar field uses when not packed. */
static unsigned scalar_wire(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_FIXED32:
    case PROTOBUF_C_TYPE_FLOAT:
        return 5;
    case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_FIXED64:
    case PROTOBUF_C_TYPE_DOUBLE:
        return 1;
    case PROTOBUF_C_TYPE_STRING:
    case PROTOBUF_C_TYPE_BYTES:
    case PROTOBUF_C_TYPE_MESSAGE:
        return 2;
    default:
        return 0;
    }
}

/* A problem inside the region [.., end): running past end is truncation
 * when end is the end of the buffer, corruption when it is the end of an
 * enclosing message. */
static int scan_overrun(scan *s, size_t end, size_t at, const char *what, const char *field)
{
    char path[256];
    scan_path(s, field, path, sizeof path);
    if (end == s->len)
        return bb_error_set(s->err, BB_ETRUNC, "%s: truncated at byte %zu: %s%s%s runs past the end "
                            "of the data (%zu bytes)", s->name, at, what, path[0] ? " of " : "",
                            path, s->len);
    return bb_error_set(s->err, BB_EPARSE, "%s: malformed protobuf at byte %zu: %s%s%s runs past "
                        "the end of its enclosing message (byte %zu)", s->name, at, what,
                        path[0] ? " of " : "", path, end);
}

static int scan_message(scan *s, const ProtobufCMessageDescriptor *d, size_t pos, size_t end,
                        size_t *known_ok);

/* Packed repeated scalars: the payload must hold whole elements. */
static int scan_packed(scan *s, const ProtobufCFieldDescriptor *fd, size_t pos, size_t end)
{
    char path[256];
    unsigned w = scalar_wire(fd->type);
    size_t n = end - pos;
    if (w == 5 || w == 1) {
        size_t el = w == 5 ? 4 : 8;
        if (n % el)
            return bb_error_set(s->err, BB_EPARSE, "%s: malformed protobuf at byte %zu: packed "
                                "field %s has %zu bytes, not a multiple of %zu", s->name, pos,
                                scan_path(s, fd->name, path, sizeof path), n, el);
        return BB_OK;
    }
    while (pos < end) {
        uint64_t v;
        size_t used;
        bb_uvarint_rc rc = bb_uvarint_read_u64(s->buf + pos, end - pos, &v, &used);
        if (rc == BB_UVARINT_TRUNC)
            return bb_error_set(s->err, BB_EPARSE, "%s: malformed protobuf at byte %zu: packed "
                                "field %s ends inside a varint", s->name, pos,
                                scan_path(s, fd->name, path, sizeof path));
        if (rc != BB_UVARINT_OK)
            return bb_error_set(s->err, BB_EPARSE, "%s: malformed protobuf at byte %zu: varint "
                                "longer than 10 bytes or over 64 bits in %s", s->name, pos,
                                scan_path(s, fd->name, path, sizeof path));
        pos += used;
    }
    return BB_OK;
}

/* A field's key, read and checked against the schema. */
typedef struct field_key {
    size_t at;                         /* offset of the tag */
    uint32_t num;
    unsigned wt;                       /* wire type */
    const ProtobufCFieldDescriptor *fd; /* NULL: not in the schema */
    bool packed;                       /* packed repeated scalars */
} field_key;

/* Read the tag at *pos (advanced past it) and check its wire type against
 * the schema. */
static int scan_key(scan *s, const ProtobufCMessageDescriptor *d, size_t *pos, size_t end,
                    field_key *k)
{
    char path[256];
    size_t used;
    uint64_t tag;
    k->at = *pos;
    bb_uvarint_rc rc = bb_uvarint_read_u64(s->buf + k->at, end - k->at, &tag, &used);
    if (rc == BB_UVARINT_TRUNC)
        return scan_overrun(s, end, k->at, "a field tag", NULL);
    if (rc != BB_UVARINT_OK || used > 5 || tag > UINT32_MAX)
        return bb_error_set(s->err, BB_EPARSE, "%s: malformed protobuf at byte %zu: field tag is "
                            "not a valid varint%s%s", s->name, k->at, s->depth ? " in " : "",
                            scan_path(s, NULL, path, sizeof path));
    k->num = (uint32_t)(tag >> 3);
    k->wt = (unsigned)(tag & 7);
    if (k->num == 0)
        return bb_error_set(s->err, BB_EPARSE, "%s: malformed protobuf at byte %zu: field number "
                            "0 is invalid%s%s", s->name, k->at, s->depth ? " in " : "",
                            scan_path(s, NULL, path, sizeof path));
    if (k->wt == 3 || k->wt == 4 || k->wt > 5)
        return bb_error_set(s->err, BB_EPARSE, "%s: malformed protobuf at byte %zu: field %u has "
                            "%s wire type %u%s%s", s->name, k->at, k->num,
                            k->wt == 3 || k->wt == 4 ? "unsupported" : "invalid", k->wt,
                            s->depth ? " in " : "", scan_path(s, NULL, path, sizeof path));
    *pos = k->at + used;
    k->fd = protobuf_c_message_descriptor_get_field(d, k->num);
    k->packed = false;
    if (!k->fd)
        return BB_OK;
    unsigned want = scalar_wire(k->fd->type);
    k->packed = k->fd->label == PROTOBUF_C_LABEL_REPEATED && want != 2 && k->wt == 2;
    if (k->wt != want && !k->packed)
        return bb_error_set(s->err, BB_EPARSE, "%s: malformed protobuf at byte %zu: field %s "
                            "(%s.%u) has wire type %s, expected %s", s->name, k->at,
                            scan_path(s, k->fd->name, path, sizeof path), d->short_name, k->num,
                            wire_name(k->wt), wire_name(want));
    return BB_OK;
}

/* "graph.name", or "field 7" (with where it is, when wanted) for a field
 * the schema does not know. */
static const char *field_label(scan *s, const field_key *k, bool where, char *buf, size_t cap)
{
    char path[256];
    if (k->fd)
        return scan_path(s, k->fd->name, buf, cap);
    snprintf(buf, cap, "field %u%s%s", k->num, where && s->depth ? " of " : "",
             where ? scan_path(s, NULL, path, sizeof path) : "");
    return buf;
}

/* A length prefix at *pos (advanced past it) whose run fits the
 * enclosing region: *len gets the run's size. */
static int scan_length(scan *s, const field_key *k, size_t *pos, size_t end, uint64_t *len)
{
    char label[300];
    size_t at = *pos, used;
    bb_uvarint_rc rc = bb_uvarint_read_u64(s->buf + at, end - at, len, &used);
    if (rc == BB_UVARINT_TRUNC)
        return scan_overrun(s, end, at, "a length prefix", k->fd ? k->fd->name : NULL);
    if (rc != BB_UVARINT_OK)
        return bb_error_set(s->err, BB_EPARSE, "%s: malformed protobuf at byte %zu: length "
                            "prefix longer than 10 bytes or over 64 bits (field %u)", s->name,
                            at, k->num);
    if (*len > BB_MODEL_MAX_BYTES)
        return bb_error_set(s->err, BB_ELIMIT, "%s: %s at byte %zu declares a length of "
                            "%llu bytes, over the %zu-byte limit", s->name,
                            field_label(s, k, false, label, sizeof label), k->at,
                            (unsigned long long)*len, (size_t)BB_MODEL_MAX_BYTES);
    if (used > MAX_LEN_PREFIX_BYTES)
        return bb_error_set(s->err, BB_EPARSE, "%s: malformed protobuf at byte %zu: "
                            "non-canonical %zu-byte length prefix (field %u)", s->name, at,
                            used, k->num);
    at += used;
    if (*len > end - at) {
        field_label(s, k, true, label, sizeof label);
        if (end == s->len)
            return bb_error_set(s->err, BB_ETRUNC, "%s: truncated at byte %zu: %s declares "
                                "%llu bytes but only %zu remain", s->name, k->at, label,
                                (unsigned long long)*len, end - at);
        return bb_error_set(s->err, BB_EPARSE, "%s: malformed protobuf at byte %zu: %s "
                            "declares %llu bytes, past the end of its enclosing message "
                            "(byte %zu)", s->name, k->at, label, (unsigned long long)*len, end);
    }
    *pos = at;
    return BB_OK;
}

/* The message field k whose bytes are [at, end): scanned one level down. */
static int scan_submessage(scan *s, const field_key *k, size_t at, size_t end)
{
    char path[256];
    const ProtobufCMessageDescriptor *sd = k->fd->descriptor;
    bool is_graph = sd == &onnx__graph_proto__descriptor;
    if (s->depth + 1 > MAX_MSG_DEPTH)
        return bb_error_set(s->err, BB_ELIMIT, "%s: messages nested deeper than %d at "
                            "byte %zu (%s)", s->name, MAX_MSG_DEPTH, at,
                            scan_path(s, k->fd->name, path, sizeof path));
    if (is_graph && s->graph_depth + 1 > BB_MODEL_MAX_GRAPH_DEPTH)
        return bb_error_set(s->err, BB_ELIMIT, "%s: graphs nested deeper than %d at "
                            "byte %zu (%s)", s->name, BB_MODEL_MAX_GRAPH_DEPTH, at,
                            scan_path(s, k->fd->name, path, sizeof path));
    s->path[s->depth++] = k->fd->name;
    s->graph_depth += is_graph;
    int rc = scan_message(s, sd, at, end, NULL);
    s->graph_depth -= is_graph;
    s->depth--;
    return rc;
}

/* Scan one field starting at *pos; *known is set when the field is in the
 * schema with a matching wire type. */
static int scan_field(scan *s, const ProtobufCMessageDescriptor *d, size_t *pos, size_t end,
                      bool *known)
{
    char path[256];
    field_key k;
    size_t at = *pos, used;
    uint64_t v;
    *known = false;
    int rc = scan_key(s, d, &at, end, &k);
    if (rc)
        return rc;
    const char *name = k.fd ? k.fd->name : NULL;
    switch (k.wt) {
    case 0: {
        bb_uvarint_rc vr = bb_uvarint_read_u64(s->buf + at, end - at, &v, &used);
        if (vr == BB_UVARINT_TRUNC)
            return scan_overrun(s, end, at, "a varint", name);
        if (vr != BB_UVARINT_OK)
            return bb_error_set(s->err, BB_EPARSE, "%s: malformed protobuf at byte %zu: varint "
                                "longer than 10 bytes or over 64 bits (field %u%s%s)", s->name,
                                at, k.num, s->depth ? " in " : "",
                                scan_path(s, NULL, path, sizeof path));
        at += used;
        break;
    }
    case 1:
    case 5: {
        size_t n = k.wt == 1 ? 8 : 4;
        if (end - at < n)
            return scan_overrun(s, end, at, k.wt == 1 ? "a 64-bit value" : "a 32-bit value",
                                name);
        at += n;
        break;
    }
    default: { /* 2: length-delimited */
        if ((rc = scan_length(s, &k, &at, end, &v)))
            return rc;
        size_t sub_end = at + (size_t)v;
        if (k.fd && k.fd->type == PROTOBUF_C_TYPE_MESSAGE)
            rc = scan_submessage(s, &k, at, sub_end);
        else if (k.packed)
            rc = scan_packed(s, k.fd, at, sub_end);
        if (rc)
            return rc;
        at = sub_end;
        break;
    }
    }
    *pos = at;
    *known = k.fd != NULL;
    return BB_OK;
}

static int scan_message(scan *s, const ProtobufCMessageDescriptor *d, size_t pos, size_t end,
                        size_t *known_ok)
{
    while (pos < end) {
        bool known;
        int rc = scan_field(s, d, &pos, end, &known);
        if (rc)
            return rc;
        if (known && known_ok)
            (*known_ok)++;
    }
    return BB_OK;
}

static bool looks_like_text(const uint8_t *p, size_t n)
{
    if (n > 256)
        n = 256;
    for (size_t i = 0; i < n; i++)
        if (!((p[i] >= 0x20 && p[i] < 0x7f) || p[i] == '\n' || p[i] == '\r' || p[i] == '\t'))
            return false;
    return n > 0;
}

int bb__pb_scan(const uint8_t *buf, size_t len, const char *name,
                const ProtobufCMessageDescriptor *d, const char *what, bb_error *err)
{
    if (len == 0)
        return bb_error_set(err, BB_EPARSE, "%s: empty (0 bytes), not %s", name, what);
    if (len > BB_MODEL_MAX_BYTES)
        return bb_error_set(err, BB_ELIMIT, "%s: %zu bytes, over the %zu-byte limit", name, len,
                            (size_t)BB_MODEL_MAX_BYTES);
    scan *s = calloc(1, sizeof *s);
    if (!s)
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", name);
    s->buf = buf;
    s->len = len;
    s->name = name;
    s->err = err;
    size_t known_ok = 0;
    int rc = scan_message(s, d, 0, len, &known_ok);
    free(s);
    if (rc && known_ok == 0) {
        /* Nothing recognisable before the first problem: say what the file
         * most likely is rather than where the garbage broke. */
        if (looks_like_text(buf, len)) {
            char old[BB_ERROR_MSG_MAX];
            snprintf(old, sizeof old, "%s", err ? err->msg : "");
            const char *detail = strncmp(old, name, strlen(name)) == 0 ? old + strlen(name) : old;
            if (detail[0] == ':')
                detail += 2;
            return bb_error_set(err, BB_EPARSE, "%s: not %s: the file looks like text, not "
                                "protobuf (%s)", name, what, detail);
        }
        if (rc == BB_EPARSE && err) {
            char old[BB_ERROR_MSG_MAX];
            snprintf(old, sizeof old, "%s", err->msg);
            const char *detail = strncmp(old, name, strlen(name)) == 0 ? old + strlen(name) : old;
            if (detail[0] == ':')
                detail += 2;
            return bb_error_set(err, BB_EPARSE, "%s: not %s (not valid protobuf): %s", name, what,
                                detail);
        }
        return rc;
    }
    if (rc)
        return rc;
    if (known_ok == 0)
        return bb_error_set(err, BB_EPARSE, "%s: not %s: none of its %zu bytes holds a known %s "
                            "field", name, what, len, d->short_name);
    return BB_OK;
}
