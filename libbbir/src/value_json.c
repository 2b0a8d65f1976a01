/*
 * value_json.c — values <-> JSON (see bb/value_json.h).
 */
#include "bb/value_json.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "bb/ir.h"
#include "bb/multiaddr.h"
#include "bb/peerid.h"
#include "bb/types.h"

#define JSON_MAX_INT 9007199254740992.0 /* 2^53 */

/* base64 (standard alphabet, padded) over libsodium; *out is malloc'd.
 * Decoding rejects anything but the standard alphabet. */
static char *base64_encode(const uint8_t *data, size_t len)
{
    size_t n = sodium_base64_ENCODED_LEN(len, sodium_base64_VARIANT_ORIGINAL);
    char *s = malloc(n);
    if (s)
        sodium_bin2base64(s, n, data, len, sodium_base64_VARIANT_ORIGINAL);
    return s;
}

static int base64_decode(const char *text, uint8_t **out, size_t *out_len, bb_error *err)
{
    size_t tl = strlen(text);
    uint8_t *buf = malloc(tl / 4 * 3 + 3);
    size_t n = 0;
    const char *end = NULL;
    if (!buf)
        return bb_error_set(err, BB_ENOMEM, "out of memory");
    if (sodium_base642bin(buf, tl / 4 * 3 + 3, text, tl, NULL, &n, &end,
                          sodium_base64_VARIANT_ORIGINAL) != 0 ||
        (end && *end)) {
        free(buf);
        return bb_error_set(err, BB_EDECODE, "invalid base64 at offset %zu",
                            end ? (size_t)(end - text) : (size_t)0);
    }
    *out = buf;
    *out_len = n;
    return BB_OK;
}

/* ---- value -> JSON ------------------------------------------------------------- */

static bool json_number_dtype(int32_t dt)
{
    switch (dt) {
    case BB_DT_FLOAT: case BB_DT_DOUBLE: case BB_DT_INT8: case BB_DT_INT16:
    case BB_DT_INT32: case BB_DT_INT64: case BB_DT_UINT8: case BB_DT_UINT16:
    case BB_DT_UINT32: case BB_DT_UINT64: case BB_DT_BOOL:
        return true;
    default:
        return false;
    }
}

static double elem_get(const uint8_t *p, int32_t dt, size_t i)
{
    switch (dt) {
    case BB_DT_FLOAT: { float f; memcpy(&f, p + 4 * i, 4); return f; }
    case BB_DT_DOUBLE: { double d; memcpy(&d, p + 8 * i, 8); return d; }
    case BB_DT_INT8: return ((const int8_t *)p)[i];
    case BB_DT_UINT8: case BB_DT_BOOL: return p[i];
    case BB_DT_INT16: { int16_t v; memcpy(&v, p + 2 * i, 2); return v; }
    case BB_DT_UINT16: { uint16_t v; memcpy(&v, p + 2 * i, 2); return v; }
    case BB_DT_INT32: { int32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    case BB_DT_UINT32: { uint32_t v; memcpy(&v, p + 4 * i, 4); return v; }
    case BB_DT_INT64: { int64_t v; memcpy(&v, p + 8 * i, 8); return (double)v; }
    case BB_DT_UINT64: { uint64_t v; memcpy(&v, p + 8 * i, 8); return (double)v; }
    default: return 0;
    }
}

static cJSON *u64_json(uint64_t v)
{
    if ((double)v <= JSON_MAX_INT)
        return cJSON_CreateNumber((double)v);
    char b[24];
    snprintf(b, sizeof b, "%llu", (unsigned long long)v);
    return cJSON_CreateString(b);
}

static bool add(cJSON *o, const char *k, cJSON *v)
{
    if (!v)
        return false;
    cJSON_AddItemToObject(o, k, v);
    return true;
}

static bool tensor_json(cJSON *o, const bb_value *v, size_t max_elems)
{
    const bb_tensor_view *t = &v->u.tensor;
    if (!add(o, "dtype", cJSON_CreateString(bb_dtype_name(t->dtype))))
        return false;
    cJSON *shape = cJSON_AddArrayToObject(o, "shape");
    for (uint32_t i = 0; shape && i < t->ndim; i++)
        if (!add(shape, "", cJSON_CreateNumber((double)t->dims[i])))
            return false;
    if (!shape)
        return false;
    size_t n = bb_tensor_numel(v);
    if (n <= max_elems && json_number_dtype(t->dtype)) {
        cJSON *data = cJSON_AddArrayToObject(o, "data");
        for (size_t i = 0; data && i < n; i++) {
            double d = elem_get(t->data, t->dtype, i);
            cJSON *x = t->dtype == BB_DT_BOOL ? cJSON_CreateBool(d != 0)
                       : isfinite(d)          ? cJSON_CreateNumber(d)
                       : cJSON_CreateString(isnan(d) ? "NaN" : d > 0 ? "Infinity" : "-Infinity");
            if (!add(data, "", x))
                return false;
        }
        return data != NULL;
    }
    uint8_t *bytes;
    size_t len;
    if (bb_value_encode(v, &bytes, &len, NULL))
        return false;
    char *b64 = base64_encode(bytes, len);
    free(bytes);
    bool ok = b64 && add(o, "tensor_proto", cJSON_CreateString(b64));
    free(b64);
    return ok;
}

static cJSON *to_json(const bb_value *v, size_t max_elems, int depth);

static bool items_json(cJSON *o, bb_value *const *items, size_t n, size_t max_elems, int depth)
{
    cJSON *arr = cJSON_AddArrayToObject(o, "items");
    for (size_t i = 0; arr && i < n; i++)
        if (!add(arr, "", to_json(items[i], max_elems, depth + 1)))
            return false;
    return arr != NULL;
}

static bool bytes_json(cJSON *o, const bb_value *v)
{
    const uint8_t *d = v->u.bytes.data;
    size_t len = v->u.bytes.len;
    if (v->type->kind == BB_VK_PEER_ID) {
        bb_peerid id;
        char text[BB_PEERID_TEXT_MAX];
        if (bb_peerid_from_bytes(d, len, &id, NULL) == BB_OK &&
            bb_peerid_to_text(&id, text, sizeof text, NULL) == BB_OK)
            return add(o, "peer", cJSON_CreateString(text));
    } else if (v->type->kind == BB_VK_ADDRESS) {
        char *text;
        if (bb_multiaddr_format_alloc(d, len, &text, NULL) == BB_OK) {
            bool ok = add(o, "addr", cJSON_CreateString(text));
            free(text);
            return ok;
        }
    }
    char *b64 = base64_encode(d, len);
    bool ok = b64 && add(o, "base64", cJSON_CreateString(b64));
    free(b64);
    return ok;
}

static cJSON *to_json(const bb_value *v, size_t max_elems, int depth)
{
    cJSON *o = cJSON_CreateObject();
    if (!o)
        return NULL;
    bool ok;
    if (!v || !v->type || depth > BB_VALUE_JSON_MAX_DEPTH) {
        ok = add(o, "type", cJSON_CreateString(v ? "too_deep" : "none"));
    } else {
        ok = add(o, "type",
                 cJSON_CreateString(v->type->kind == BB_VK_TENSOR ? "tensor" : v->type->name));
        switch (v->type->kind) {
        case BB_VK_TENSOR: ok = ok && tensor_json(o, v, max_elems); break;
        case BB_VK_U64: ok = ok && add(o, "value", u64_json(v->u.u64)); break;
        case BB_VK_BYTES: case BB_VK_PEER_ID: case BB_VK_ADDRESS:
            ok = ok && bytes_json(o, v);
            break;
        case BB_VK_PEER_ID_VEC: case BB_VK_ADDRESS_VEC: case BB_VK_COMPOSITE:
            ok = ok && items_json(o, v->u.list.items, v->u.list.n, max_elems, depth);
            break;
        case BB_VK_RESPONSE_BATCH: {
            cJSON *arr = cJSON_AddArrayToObject(o, "items");
            for (size_t i = 0; ok && arr && i < v->u.batch.n; i++) {
                cJSON *it = cJSON_CreateObject();
                ok = add(arr, "", it) &&
                     bytes_json(it, v->u.batch.peers[i]) &&
                     add(it, "value", to_json(v->u.batch.items[i], max_elems, depth + 1));
            }
            ok = ok && arr;
            break;
        }
        default: break;
        }
    }
    if (!ok) {
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

cJSON *bb_value_to_json(const bb_value *v, size_t max_elems)
{
    return to_json(v, max_elems, 0);
}

/* ---- JSON -> value ------------------------------------------------------------------ */

void bb_json_input_free(bb_json_input *in)
{
    free(in->name);
    bb_value_unref(in->value);
    free(in->bytes);
    memset(in, 0, sizeof *in);
}

static int32_t dtype_by_name(const char *s)
{
    for (int32_t dt = 1; dt <= BB_DT_MAX; dt++)
        if (strcmp(bb_dtype_name(dt), s) == 0)
            return dt;
    if (!strcmp(s, "float32"))
        return BB_DT_FLOAT;
    if (!strcmp(s, "float64"))
        return BB_DT_DOUBLE;
    return BB_DT_UNDEFINED;
}

/* Store element i of a tensor from a JSON number (range-checked). */
static bool elem_set(uint8_t *p, int32_t dt, size_t i, const cJSON *x)
{
    double d;
    if (cJSON_IsBool(x))
        d = cJSON_IsTrue(x) ? 1 : 0;
    else if (cJSON_IsNumber(x))
        d = x->valuedouble;
    else
        return false;
    bool integral = d == floor(d);
    switch (dt) {
    case BB_DT_FLOAT: { float f = (float)d; memcpy(p + 4 * i, &f, 4); return true; }
    case BB_DT_DOUBLE: memcpy(p + 8 * i, &d, 8); return true;
    case BB_DT_BOOL:
        if (d != 0 && d != 1)
            return false;
        p[i] = (uint8_t)d;
        return true;
    default: break;
    }
    if (!integral)
        return false;
#define SET_INT(T, lo, hi)                         \
    do {                                           \
        if (d < (lo) || d > (hi))                  \
            return false;                          \
        T v = (T)d;                                \
        memcpy(p + sizeof(T) * i, &v, sizeof(T));  \
        return true;                               \
    } while (0)
    switch (dt) {
    case BB_DT_INT8: SET_INT(int8_t, -128.0, 127.0);
    case BB_DT_UINT8: SET_INT(uint8_t, 0.0, 255.0);
    case BB_DT_INT16: SET_INT(int16_t, -32768.0, 32767.0);
    case BB_DT_UINT16: SET_INT(uint16_t, 0.0, 65535.0);
    case BB_DT_INT32: SET_INT(int32_t, -2147483648.0, 2147483647.0);
    case BB_DT_UINT32: SET_INT(uint32_t, 0.0, 4294967295.0);
    case BB_DT_INT64: SET_INT(int64_t, -JSON_MAX_INT, JSON_MAX_INT);
    case BB_DT_UINT64: SET_INT(uint64_t, 0.0, JSON_MAX_INT);
    default: return false;
    }
#undef SET_INT
}

/* Shape of a (nested) JSON array: every level must be rectangular. */
static int nested_shape(const cJSON *a, uint32_t *ndim, int64_t *dims, bb_error *err,
                        const char *name)
{
    *ndim = 0;
    for (const cJSON *x = a; cJSON_IsArray(x); x = x->child) {
        if (*ndim == BB_MAX_DIMS)
            return bb_error_set(err, BB_ELIMIT, "input '%s': more than %d dimensions", name,
                                BB_MAX_DIMS);
        dims[(*ndim)++] = cJSON_GetArraySize(x);
        if (!x->child)
            break;
    }
    return BB_OK;
}

static int flatten(const cJSON *a, uint32_t level, uint32_t ndim, const int64_t *dims,
                   uint8_t *data, int32_t dt, size_t *pos, const char *name, bb_error *err)
{
    if (level == ndim) {
        if (!elem_set(data, dt, (*pos)++, a))
            return bb_error_set(err, BB_ETYPE, "input '%s': element %zu is not a %s", name,
                                *pos - 1, bb_dtype_name(dt));
        return BB_OK;
    }
    if (!cJSON_IsArray(a) || cJSON_GetArraySize(a) != dims[level])
        return bb_error_set(err, BB_EINVAL, "input '%s': ragged array at depth %u", name, level);
    for (const cJSON *x = a->child; x; x = x->next) {
        int rc = flatten(x, level + 1, ndim, dims, data, dt, pos, name, err);
        if (rc)
            return rc;
    }
    return BB_OK;
}

static int tensor_from_json(const char *name, const cJSON *j, bb_value **out, bb_error *err)
{
    int32_t dt = BB_DT_FLOAT;
    const cJSON *data = j, *shape = NULL;
    uint32_t ndim = 0;
    int64_t dims[BB_MAX_DIMS];
    if (cJSON_IsObject(j)) {
        const cJSON *d = cJSON_GetObjectItemCaseSensitive(j, "dtype");
        if (d && (!cJSON_IsString(d) || !(dt = dtype_by_name(d->valuestring)) ||
                  !json_number_dtype(dt)))
            return bb_error_set(err, BB_EINVAL,
                                "input '%s': dtype must be one of float, double, int8..int64, "
                                "uint8..uint64, bool (use tensor_proto for others)",
                                name);
        data = cJSON_GetObjectItemCaseSensitive(j, "data");
        shape = cJSON_GetObjectItemCaseSensitive(j, "shape");
        if (!cJSON_IsArray(data))
            return bb_error_set(err, BB_EINVAL, "input '%s': \"data\" must be an array", name);
    }
    int rc = nested_shape(data, &ndim, dims, err, name);
    if (rc)
        return rc;
    if (shape) {
        if (!cJSON_IsArray(shape) || cJSON_GetArraySize(shape) > BB_MAX_DIMS)
            return bb_error_set(err, BB_EINVAL,
                                "input '%s': \"shape\" must be an array of at most %d sizes",
                                name, BB_MAX_DIMS);
        if (ndim != 1 && !(ndim == 0 && cJSON_GetArraySize(data) == 0))
            return bb_error_set(err, BB_EINVAL,
                                "input '%s': with \"shape\", \"data\" must be a flat array", name);
        size_t n = 0;
        uint32_t sd = 0;
        int64_t sdims[BB_MAX_DIMS];
        for (const cJSON *x = shape->child; x; x = x->next) {
            if (!cJSON_IsNumber(x) || x->valuedouble < 0 || x->valuedouble > JSON_MAX_INT ||
                x->valuedouble != floor(x->valuedouble))
                return bb_error_set(err, BB_EINVAL, "input '%s': bad shape entry", name);
            sdims[sd++] = (int64_t)x->valuedouble;
        }
        n = bb_shape_numel(sd, sdims);
        if (n == SIZE_MAX || n != (size_t)cJSON_GetArraySize(data))
            return bb_error_set(err, BB_EINVAL,
                                "input '%s': shape holds %zu elements, data has %d", name, n,
                                cJSON_GetArraySize(data));
        bb_value *t = bb_value_tensor_new(dt, sd, sdims);
        if (!t)
            return bb_error_set(err, BB_ENOMEM, "input '%s': out of memory", name);
        size_t pos = 0;
        for (const cJSON *x = data->child; x; x = x->next) {
            if (!elem_set(t->u.tensor.data, dt, pos++, x)) {
                bb_value_unref(t);
                return bb_error_set(err, BB_ETYPE, "input '%s': element %zu is not a %s", name,
                                    pos - 1, bb_dtype_name(dt));
            }
        }
        *out = t;
        return BB_OK;
    }
    if (bb_shape_numel(ndim, dims) == SIZE_MAX)
        return bb_error_set(err, BB_ELIMIT, "input '%s': too many elements", name);
    bb_value *t = bb_value_tensor_new(dt, ndim, dims);
    if (!t)
        return bb_error_set(err, BB_ENOMEM, "input '%s': out of memory", name);
    size_t pos = 0;
    if (bb_tensor_numel(t) && (rc = flatten(data, 0, ndim, dims, t->u.tensor.data, dt, &pos,
                                            name, err))) {
        bb_value_unref(t);
        return rc;
    }
    *out = t;
    return BB_OK;
}

static int b64_field(const char *name, const cJSON *j, const char *key, uint8_t **out,
                     size_t *len, bb_error *err)
{
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, key);
    if (!cJSON_IsString(s))
        return bb_error_set(err, BB_EINVAL, "input '%s': \"%s\" must be a base64 string", name,
                            key);
    if (base64_decode(s->valuestring, out, len, err))
        return bb_error_prefix(err, "input '%s': \"%s\"", name, key);
    return BB_OK;
}

static int typed_from_json(const char *name, const cJSON *j, const bb_type_node *t,
                           bb_value **out, int depth, bb_error *err);

static int list_from_json(const char *name, const cJSON *j, const bb_type_node *t,
                          bb_value **out, int depth, bb_error *err)
{
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(j, "items");
    if (!cJSON_IsArray(items))
        return bb_error_set(err, BB_EINVAL, "input '%s': \"items\" must be an array", name);
    size_t n = (size_t)cJSON_GetArraySize(items);
    if (n > 65536)
        return bb_error_set(err, BB_ELIMIT, "input '%s': more than 65536 items", name);
    bb_value **v = calloc(n ? n : 1, sizeof *v);
    if (!v)
        return bb_error_set(err, BB_ENOMEM, "out of memory");
    size_t i = 0;
    int rc = BB_OK;
    const bb_type_node *elem = t->kind == BB_VK_PEER_ID_VEC   ? &BB_TYPE_PEER_ID
                               : t->kind == BB_VK_ADDRESS_VEC ? &BB_TYPE_MULTIADDRESS
                                                              : NULL;
    for (const cJSON *x = items->child; x && !rc; x = x->next, i++)
        rc = typed_from_json(name, x, elem, &v[i], depth + 1, err);
    if (rc) {
        for (size_t k = 0; k < n; k++)
            bb_value_unref(v[k]);
        free(v);
        return rc;
    }
    *out = bb_value_list(t, v, n);
    free(v);
    return *out ? BB_OK : bb_error_set(err, BB_ENOMEM, "out of memory");
}

/* A value of JSON object j; want (may be NULL) is the type a list element
 * must have. */
static int typed_from_json(const char *name, const cJSON *j, const bb_type_node *want,
                           bb_value **out, int depth, bb_error *err)
{
    *out = NULL;
    if (depth > BB_VALUE_JSON_MAX_DEPTH)
        return bb_error_set(err, BB_ELIMIT, "input '%s': nested deeper than %d", name,
                            BB_VALUE_JSON_MAX_DEPTH);
    if (cJSON_IsNull(j))
        return (*out = bb_value_trigger()) ? BB_OK : bb_error_set(err, BB_ENOMEM, "out of memory");
    if (cJSON_IsArray(j))
        return tensor_from_json(name, j, out, err);
    if (!cJSON_IsObject(j))
        return bb_error_set(err, BB_EINVAL, "input '%s': expected an object, an array or null",
                            name);
    const cJSON *ty = cJSON_GetObjectItemCaseSensitive(j, "type");
    const bb_type_node *t = NULL;
    if (ty && (!cJSON_IsString(ty) ||
               (strcmp(ty->valuestring, "tensor") && !(t = bb_type_by_name(ty->valuestring)))))
        return bb_error_set(err, BB_EINVAL, "input '%s': unknown type '%.64s'", name,
                            cJSON_IsString(ty) ? ty->valuestring : "?");
    if (!t || t->kind == BB_VK_TENSOR) {
        if (cJSON_GetObjectItemCaseSensitive(j, "tensor_proto"))
            return bb_error_set(err, BB_EINVAL,
                                "input '%s': tensor_proto is accepted only at the top level",
                                name);
        return tensor_from_json(name, j, out, err);
    }
    if (want && !bb_type_same(t, want))
        return bb_error_set(err, BB_ETYPE, "input '%s': list items must be %s values, not %s",
                            name, want->name, t->name);
    uint8_t *b = NULL;
    size_t len = 0;
    int rc = BB_OK;
    const cJSON *f;
    switch (t->kind) {
    case BB_VK_TRIGGER: *out = bb_value_trigger(); break;
    case BB_VK_U64:
        f = cJSON_GetObjectItemCaseSensitive(j, "value");
        if (cJSON_IsNumber(f) && f->valuedouble >= 0 && f->valuedouble <= JSON_MAX_INT &&
            f->valuedouble == floor(f->valuedouble)) {
            *out = bb_value_u64(t, (uint64_t)f->valuedouble);
        } else if (cJSON_IsString(f) && f->valuestring[0] >= '0' && f->valuestring[0] <= '9') {
            char *end;
            unsigned long long x = strtoull(f->valuestring, &end, 10);
            if (*end)
                return bb_error_set(err, BB_EINVAL, "input '%s': bad \"value\"", name);
            *out = bb_value_u64(t, x);
        } else {
            return bb_error_set(err, BB_EINVAL,
                                "input '%s': \"value\" must be a non-negative integer", name);
        }
        break;
    case BB_VK_BYTES:
        if ((rc = b64_field(name, j, "base64", &b, &len, err)))
            return rc;
        *out = bb_value_bytes(t, b, len);
        break;
    case BB_VK_PEER_ID: {
        f = cJSON_GetObjectItemCaseSensitive(j, "peer");
        bb_peerid id;
        if (!cJSON_IsString(f))
            return bb_error_set(err, BB_EINVAL, "input '%s': \"peer\" must be a PeerId", name);
        if (bb_peerid_from_text(f->valuestring, &id, err))
            return bb_error_prefix(err, "input '%s'", name);
        *out = bb_value_bytes(t, id.bytes, id.len);
        break;
    }
    case BB_VK_ADDRESS:
        f = cJSON_GetObjectItemCaseSensitive(j, "addr");
        if (!cJSON_IsString(f))
            return bb_error_set(err, BB_EINVAL, "input '%s': \"addr\" must be a multiaddr", name);
        if (bb_multiaddr_parse_alloc(f->valuestring, &b, &len, err))
            return bb_error_prefix(err, "input '%s'", name);
        *out = bb_value_bytes(t, b, len);
        break;
    case BB_VK_PEER_ID_VEC: case BB_VK_ADDRESS_VEC: case BB_VK_COMPOSITE:
        return list_from_json(name, j, t, out, depth, err);
    default:
        return bb_error_set(err, BB_EUNSUPPORTED,
                            "input '%s': %s values cannot be written as JSON (use \"wire\")",
                            name, t->name);
    }
    free(b);
    return *out ? rc : bb_error_set(err, BB_ENOMEM, "out of memory");
}

int bb_json_input_parse(const char *name, const cJSON *j, bb_json_input *out, bb_error *err)
{
    memset(out, 0, sizeof *out);
    if (!(out->name = strdup(name)))
        return bb_error_set(err, BB_ENOMEM, "out of memory");
    int rc;
    if (cJSON_IsObject(j) && cJSON_GetObjectItemCaseSensitive(j, "wire"))
        rc = b64_field(name, j, "wire", &out->bytes, &out->len, err);
    else if (cJSON_IsObject(j) && cJSON_GetObjectItemCaseSensitive(j, "tensor_proto"))
        rc = b64_field(name, j, "tensor_proto", &out->bytes, &out->len, err);
    else
        rc = typed_from_json(name, j, NULL, &out->value, 0, err);
    if (rc)
        bb_json_input_free(out);
    return rc;
}
