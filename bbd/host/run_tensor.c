/*
 * run_tensor.c — the tensor files of `bbd run`: ONNX TensorProto .pb files
 * in (untrusted: bounded size, checked dtype, rank and byte count) and out
 * (written atomically), the one-line summary, and the allclose comparison
 * of --test-dir (|got - want| <= atol + rtol * |want|, NaN equals NaN,
 * exact for integer and bool tensors).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bb/model_io.h"
#include "bb/types.h"
#include "bbd/host/run_internal.h"

static int read_file(const char *path, uint8_t **out, size_t *len, bb_error *err)
{
    *out = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return bb_error_set(err, BB_EIO, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return bb_error_set(err, BB_EIO, "%s: not a regular file", path);
    }
    if ((uint64_t)st.st_size > BBD_RUN_MAX_TENSOR_FILE) {
        fclose(f);
        return bb_error_set(err, BB_ELIMIT, "%s: %lld bytes exceed the tensor file limit of %zu",
                            path, (long long)st.st_size, BBD_RUN_MAX_TENSOR_FILE);
    }
    size_t n = (size_t)st.st_size;
    uint8_t *buf = malloc(n ? n : 1);
    if (!buf) {
        fclose(f);
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory for %zu bytes", path, n);
    }
    if (fread(buf, 1, n, f) != n) {
        free(buf);
        fclose(f);
        return bb_error_set(err, BB_EIO, "%s: short read", path);
    }
    fclose(f);
    *out = buf;
    *len = n;
    return BB_OK;
}

int bbd_run_tensor_read(const char *path, bb_value **out, char **name_out, bb_error *err)
{
    *out = NULL;
    if (name_out)
        *name_out = NULL;
    uint8_t *data;
    size_t len;
    int rc = read_file(path, &data, &len, err);
    if (rc)
        return rc;
    bb_arena *a = bb_arena_create();
    bb_tensor_proto *tp = NULL;
    if (!a)
        rc = bb_error_set(err, BB_ENOMEM, "%s: out of memory", path);
    else
        rc = bb_tensor_proto_decode(a, data, len, path, &tp, err);
    free(data);
    if (rc == BB_OK && tp->data_location == 1)
        rc = bb_error_set(err, BB_EUNSUPPORTED, "%s: tensors with external data are not "
                          "supported", path);
    if (rc == BB_OK && (tp->dims.n > BB_MAX_DIMS))
        rc = bb_error_set(err, BB_ELIMIT, "%s: rank %zu exceeds %d", path, tp->dims.n,
                          BB_MAX_DIMS);
    uint64_t numel = 1;
    for (size_t i = 0; rc == BB_OK && i < tp->dims.n; i++) {
        if (tp->dims.v[i] < 0)
            rc = bb_error_set(err, BB_EPARSE, "%s: dimension %zu is negative (%lld)", path, i,
                              (long long)tp->dims.v[i]);
        else if (tp->dims.v[i] && numel > UINT64_MAX / (uint64_t)tp->dims.v[i])
            rc = bb_error_set(err, BB_ELIMIT, "%s: the shape overflows", path);
        else
            numel *= (uint64_t)tp->dims.v[i];
    }
    if (rc == BB_OK && (tp->data_type == BB_DT_STRING || !bb_dtype_size(tp->data_type) ||
                        !bb_type_tensor_of(tp->data_type)))
        rc = bb_error_set(err, BB_EUNSUPPORTED, "%s: tensors of dtype %s are not supported",
                          path, bb_dtype_name(tp->data_type));
    if (rc == BB_OK) {
        size_t want = bb_dtype_nbytes(tp->data_type, numel);
        size_t have = tp->raw_data.len;
        if (want == SIZE_MAX || want != have) {
            rc = bb_error_set(err, BB_EPARSE, "%s: %zu data bytes for %llu elements of %s "
                              "(want %zu)", path, have, (unsigned long long)numel,
                              bb_dtype_name(tp->data_type), want);
        } else {
            *out = bb_value_tensor_copy(tp->data_type, (uint32_t)tp->dims.n, tp->dims.v,
                                        tp->raw_data.data, have);
            if (!*out)
                rc = bb_error_set(err, BB_ENOMEM, "%s: out of memory", path);
        }
    }
    if (rc == BB_OK && name_out && tp->name && *tp->name && !(*name_out = strdup(tp->name))) {
        bb_value_unref(*out);
        *out = NULL;
        rc = bb_error_set(err, BB_ENOMEM, "%s: out of memory", path);
    }
    bb_arena_destroy(a);
    return rc;
}

static bool is_tensor(const bb_value *v)
{
    return v && v->type && v->type->kind == BB_VK_TENSOR;
}

int bbd_run_tensor_write(const char *path, const char *name, const bb_value *v, bb_error *err)
{
    if (!is_tensor(v))
        return bb_error_set(err, BB_ETYPE, "%s: output '%s' is a %s, not a tensor", path, name,
                            v && v->type ? v->type->name : "value without a type");
    const bb_tensor_view *t = &v->u.tensor;
    bb_tensor_proto tp = {.name = name, .data_type = t->dtype, .has_raw_data = true};
    tp.dims.v = (int64_t *)t->dims;
    tp.dims.n = t->ndim;
    tp.raw_data.data = t->data;
    tp.raw_data.len = t->nbytes;
    uint8_t *bytes;
    size_t len;
    int rc = bb_tensor_proto_encode(&tp, &bytes, &len, err);
    if (rc)
        return bb_error_prefix(err, "%s", path);
    size_t plen = strlen(path) + 16;
    char *tmp = malloc(plen);
    if (!tmp) {
        free(bytes);
        return bb_error_set(err, BB_ENOMEM, "%s: out of memory", path);
    }
    snprintf(tmp, plen, "%s.tmp", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        rc = bb_error_set(err, BB_EIO, "%s: %s", tmp, strerror(errno));
    } else {
        bool ok = fwrite(bytes, 1, len, f) == len;
        ok = (fclose(f) == 0) && ok;
        if (!ok || rename(tmp, path) != 0) {
            rc = bb_error_set(err, BB_EIO, "%s: %s", path, strerror(errno ? errno : EIO));
            unlink(tmp);
        }
    }
    free(tmp);
    free(bytes);
    return rc;
}

const char *bbd_run_summary(const char *name, const bb_value *v, char *buf, size_t cap)
{
    if (!is_tensor(v)) {
        snprintf(buf, cap, "%s: %s", name, v && v->type ? v->type->name : "(no value)");
        return buf;
    }
    const bb_tensor_view *t = &v->u.tensor;
    size_t used = (size_t)snprintf(buf, cap, "%s: %s [", name, bb_dtype_name(t->dtype));
    for (uint32_t i = 0; i < t->ndim && used < cap; i++)
        used += (size_t)snprintf(buf + used, cap - used, "%s%lld", i ? "," : "",
                                 (long long)t->dims[i]);
    if (used < cap)
        snprintf(buf + used, cap - used, "]");
    return buf;
}

static double elem_f(const bb_tensor_view *t, size_t i)
{
    return t->dtype == BB_DT_DOUBLE ? ((const double *)(const void *)t->data)[i]
                                    : (double)((const float *)(const void *)t->data)[i];
}

/* Integer and bool elements as long long (uint64 above LLONG_MAX wraps:
 * only for messages). */
static bool elem_int(const bb_tensor_view *t, size_t i, long long *out)
{
    const void *p = t->data + i * bb_dtype_size(t->dtype);
    switch (t->dtype) {
    case BB_DT_INT8: *out = *(const int8_t *)p; return true;
    case BB_DT_UINT8: case BB_DT_BOOL: *out = *(const uint8_t *)p; return true;
    case BB_DT_INT16: *out = *(const int16_t *)p; return true;
    case BB_DT_UINT16: *out = *(const uint16_t *)p; return true;
    case BB_DT_INT32: *out = *(const int32_t *)p; return true;
    case BB_DT_UINT32: *out = *(const uint32_t *)p; return true;
    case BB_DT_INT64: *out = *(const int64_t *)p; return true;
    case BB_DT_UINT64: *out = (long long)*(const uint64_t *)p; return true;
    default: return false;
    }
}

bool bbd_run_tensor_close(const bb_value *got, const bb_value *want, double rtol, double atol,
                          char *why, size_t cap)
{
    char a[160], b[160];
    if (!is_tensor(got) || !is_tensor(want)) {
        snprintf(why, cap, "not a tensor");
        return false;
    }
    const bb_tensor_view *g = &got->u.tensor, *w = &want->u.tensor;
    if (g->dtype != w->dtype) {
        snprintf(why, cap, "dtype %s, expected %s", bb_dtype_name(g->dtype),
                 bb_dtype_name(w->dtype));
        return false;
    }
    if (g->ndim != w->ndim || memcmp(g->dims, w->dims, g->ndim * sizeof *g->dims) != 0) {
        snprintf(why, cap, "shape %s, expected %s", bbd_run_summary("", got, a, sizeof a) + 2,
                 bbd_run_summary("", want, b, sizeof b) + 2);
        return false;
    }
    size_t n = bb_tensor_numel(got);
    if (g->dtype == BB_DT_FLOAT || g->dtype == BB_DT_DOUBLE) {
        for (size_t i = 0; i < n; i++) {
            double x = elem_f(g, i), y = elem_f(w, i);
            if (isnan(x) && isnan(y))
                continue;
            if (x == y) /* also equal infinities */
                continue;
            if (!(fabs(x - y) <= atol + rtol * fabs(y))) {
                snprintf(why, cap, "element %zu is %.9g, expected %.9g (rtol %g, atol %g)", i, x,
                         y, rtol, atol);
                return false;
            }
        }
        return true;
    }
    size_t es = bb_dtype_size(g->dtype);
    for (size_t i = 0; es && i < n; i++) {
        if (memcmp(g->data + i * es, w->data + i * es, es) != 0) {
            long long x, y;
            if (elem_int(g, i, &x) && elem_int(w, i, &y))
                snprintf(why, cap, "element %zu is %lld, expected %lld (%s: exact)", i, x, y,
                         bb_dtype_name(g->dtype));
            else
                snprintf(why, cap, "element %zu differs (%s: exact)", i,
                         bb_dtype_name(g->dtype));
            return false;
        }
    }
    return true;
}
