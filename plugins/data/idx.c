/*
 * idx.c — data::Idx's reader: IDX files (LeCun's MNIST format, also
 * Fashion-MNIST's), plain or gzip-compressed (zlib's gzread reads both),
 * into a table of f32 features and an optional f32 label.
 *
 * An IDX file is a 4-byte magic (0x00 0x00, a type byte, a dimension count),
 * one big-endian u32 per dimension, then the values, big-endian, row-major.
 * The first dimension counts the samples; the others are flattened into the
 * features (28 x 28 images give 784). The label file has one dimension and
 * as many values as the sample file has samples.
 *
 * The files are untrusted: every header field is checked (magic, type,
 * dimension count, each dimension), the data size is computed with overflow
 * checks and capped by max_bytes before anything is allocated, a file that
 * ends early or runs on past the data its header describes is refused, and
 * float values must be finite. Every error names the file. The values are
 * read in chunks and converted as they come, so the file's bytes are never
 * held next to the table.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "data.h"

#define IDX_MAX_FEATURES (1u << 24)
#define CHUNK_BYTES (1u << 16)

typedef enum idx_type {
    IDX_U8 = 0x08, IDX_I8 = 0x09, IDX_I16 = 0x0B, IDX_I32 = 0x0C, IDX_F32 = 0x0D, IDX_F64 = 0x0E
} idx_type;

static size_t type_size(uint8_t t)
{
    switch (t) {
    case IDX_U8:
    case IDX_I8: return 1;
    case IDX_I16: return 2;
    case IDX_I32:
    case IDX_F32: return 4;
    case IDX_F64: return 8;
    default: return 0;
    }
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

int data_idx_header(const char *file, const uint8_t *p, size_t len, uint64_t max_bytes,
                    data_idx_info *h, bb_error *err)
{
    memset(h, 0, sizeof *h);
    if (len < 4)
        return bb_error_set(err, BB_EPARSE, "%s: %zu bytes: too short for an IDX header", file,
                            len);
    if (p[0] || p[1])
        return bb_error_set(err, BB_EPARSE,
                            "%s: not an IDX file (magic 0x%02x%02x%02x%02x; IDX starts 0x0000)",
                            file, p[0], p[1], p[2], p[3]);
    h->type = p[2];
    h->elem_size = type_size(p[2]);
    if (!h->elem_size)
        return bb_error_set(err, BB_EPARSE, "%s: unknown IDX value type 0x%02x (known: 0x08 "
                            "u8, 0x09 i8, 0x0b i16, 0x0c i32, 0x0d f32, 0x0e f64)", file, p[2]);
    h->ndims = p[3];
    if (h->ndims == 0 || h->ndims > DATA_IDX_MAX_DIMS)
        return bb_error_set(err, BB_EPARSE, "%s: %u dimensions (an IDX data set has 1 to %d)",
                            file, h->ndims, DATA_IDX_MAX_DIMS);
    h->header_bytes = 4 + 4 * (size_t)h->ndims;
    if (len < h->header_bytes)
        return bb_error_set(err, BB_EPARSE, "%s: truncated header: %u dimensions need %zu bytes, "
                            "the file has %zu", file, h->ndims, h->header_bytes, len);
    uint64_t values = 1, features = 1;
    for (uint32_t i = 0; i < h->ndims; i++) {
        uint32_t d = be32(p + 4 + 4 * i);
        h->dims[i] = d;
        if (d == 0)
            return bb_error_set(err, BB_EPARSE, "%s: dimension %u is 0 (an empty data set)", file,
                                i);
        if (values > max_bytes / h->elem_size / d) /* values * d * size would pass the cap */
            return bb_error_set(err, BB_ELIMIT,
                                "%s: the header describes more than max_bytes (%llu bytes) of "
                                "data (dimension %u is %u)",
                                file, (unsigned long long)max_bytes, i, d);
        values *= d;
        if (i > 0)
            features *= d;
    }
    if (features > IDX_MAX_FEATURES)
        return bb_error_set(err, BB_ELIMIT, "%s: %llu values per sample (at most %u)", file,
                            (unsigned long long)features, IDX_MAX_FEATURES);
    h->rows = h->dims[0];
    h->features = (size_t)features;
    h->data_bytes = (size_t)values * h->elem_size;
    return BB_OK;
}

/* Value i of a chunk of type t, big-endian. */
static double idx_value(uint8_t t, const uint8_t *p)
{
    switch (t) {
    case IDX_U8: return p[0];
    case IDX_I8: return (int8_t)p[0];
    case IDX_I16: return (int16_t)(uint16_t)(p[0] << 8 | p[1]);
    case IDX_I32: return (int32_t)be32(p);
    case IDX_F32: {
        uint32_t u = be32(p);
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    default: {
        uint64_t u = (uint64_t)be32(p) << 32 | be32(p + 4);
        double d;
        memcpy(&d, &u, 8);
        return d;
    }
    }
}

/* Reads up to n bytes; *got < n only at the end of the file. */
static int read_some(gzFile gz, const char *file, uint8_t *buf, size_t n, size_t *got,
                     bb_error *err)
{
    *got = 0;
    while (*got < n) {
        int r = gzread(gz, buf + *got, (unsigned)(n - *got));
        if (r < 0) {
            int zerr = Z_OK;
            const char *m = gzerror(gz, &zerr);
            return bb_error_set(err, BB_EIO, "%s: read failed: %s", file,
                                zerr == Z_ERRNO ? strerror(errno) : m);
        }
        if (r == 0)
            break;
        *got += (size_t)r;
    }
    return BB_OK;
}

/* One IDX file into out (malloc'd, rows x features floats, each value x
 * *scale; scale NULL: 1/255 for u8 data, which takes pixels to [0, 1], else 1). */
static int idx_read(const char *file, uint64_t max_bytes, const double *scale, data_idx_info *h,
                    float **out, bb_error *err)
{
    *out = NULL;
    gzFile gz = gzopen(file, "rb");
    if (!gz)
        return bb_error_set(err, BB_EIO, "%s: cannot open: %s", file,
                            errno ? strerror(errno) : "out of memory");
    uint8_t head[4 + 4 * DATA_IDX_MAX_DIMS];
    size_t got = 0;
    int rc = read_some(gz, file, head, 4, &got, err);
    if (!rc && got == 4 && head[0] == 0 && head[1] == 0 && head[3] <= DATA_IDX_MAX_DIMS) {
        size_t more = 0;
        rc = read_some(gz, file, head + 4, 4 * (size_t)head[3], &more, err);
        got += more;
    }
    if (!rc)
        rc = data_idx_header(file, head, got, max_bytes, h, err);
    float *v = NULL;
    if (!rc && !(v = malloc((h->data_bytes / h->elem_size) * sizeof *v)))
        rc = bb_error_set(err, BB_ENOMEM, "%s: out of memory for %zu values", file,
                          h->data_bytes / h->elem_size);
    double mul = scale ? *scale : !rc && h->type == IDX_U8 ? 1.0 / 255.0 : 1.0;
    uint8_t *buf = rc ? NULL : malloc(CHUNK_BYTES);
    if (!rc && !buf)
        rc = bb_error_set(err, BB_ENOMEM, "%s: out of memory", file);
    size_t done = 0, chunk = rc ? 0 : CHUNK_BYTES - CHUNK_BYTES % h->elem_size;
    while (!rc && done < h->data_bytes) {
        size_t want = h->data_bytes - done < chunk ? h->data_bytes - done : chunk;
        rc = read_some(gz, file, buf, want, &got, err);
        if (!rc && got < want)
            rc = bb_error_set(err, BB_EPARSE, "%s: truncated: the header describes %zu data "
                              "bytes, the file ends after %zu", file, h->data_bytes, done + got);
        for (size_t k = 0; !rc && k < got / h->elem_size; k++) {
            size_t i = done / h->elem_size + k;
            double d = idx_value(h->type, buf + k * h->elem_size) * mul;
            if (!isfinite(d) || fabs(d) > 3.4028234663852886e38)
                rc = bb_error_set(err, BB_EPARSE, "%s: value %zu (sample %zu) is %g, not a "
                                  "finite float", file, i, i / h->features, d);
            v[i] = (float)d;
        }
        done += got;
    }
    if (!rc && read_some(gz, file, buf, 1, &got, err) == BB_OK && got)
        rc = bb_error_set(err, BB_EPARSE, "%s: more bytes after the %zu data bytes its header "
                          "describes (the dimensions are wrong?)", file, h->data_bytes);
    free(buf);
    gzclose(gz);
    if (rc) {
        free(v);
        return rc;
    }
    *out = v;
    return BB_OK;
}

int data_idx_load(const bbp_config *cfg, data_table *t, bb_error *err)
{
    char path[4096], labels[4096];
    int64_t cap = 0;
    double scale = 1;
    bool has_scale = false;
    const double one = 1.0;
    int rc = bbp_config_string(cfg, "path", path, sizeof path, err);
    if (!rc && !path[0])
        rc = bb_error_set(err, BB_ECONFIG, "%s: config key 'path' (the IDX file of samples) is "
                          "required", cfg->who);
    if (!rc)
        rc = bbp_config_string(cfg, "label_path", labels, sizeof labels, err);
    if (!rc)
        rc = bbp_config_int(cfg, "max_bytes", 1, INT64_C(1) << 40, &cap, err);
    if (!rc)
        rc = bbp_config_number(cfg, "scale", false, -1e30, 1e30, &scale, &has_scale, err);
    if (rc)
        return rc;
    data_idx_info hx, hy;
    float *x = NULL, *y = NULL;
    rc = idx_read(path, (uint64_t)cap, has_scale ? &scale : NULL, &hx, &x, err);
    if (!rc && labels[0])
        rc = idx_read(labels, (uint64_t)cap, &one, &hy, &y, err);
    if (!rc && labels[0] && (hy.ndims != 1 || hy.rows != hx.rows))
        rc = bb_error_set(err, BB_EPARSE,
                          "%s: %zu labels (%u dimensions) for the %zu samples of %s; a label "
                          "file holds one value per sample",
                          labels, hy.rows, hy.ndims, hx.rows, path);
    if (rc) {
        free(x);
        free(y);
        return rc;
    }
    t->rows = hx.rows;
    t->cols = hx.features;
    t->x = x;
    t->y = y;
    return BB_OK;
}
