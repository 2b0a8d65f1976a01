/*
 * csv.c — data::Csv's reader: a numeric CSV file, plain or gzip-compressed
 * (zlib's gzread reads both, so compression is detected, not configured),
 * into a table of f32 features and an optional f32 label column.
 *
 * The file is untrusted: its decompressed size is capped (max_bytes) before
 * it is held in memory, every cell must be a finite number that fits a
 * float, every row must have the first row's column count, and each failure
 * names the file, the line and the column (1-based, physical lines of the
 * decompressed text). Blank lines are skipped; skip_rows lines are skipped
 * before anything else (sklearn's bundled files start with a one-line
 * "n_samples,n_features,names..." preamble); with header = true the next
 * line names the columns, so label_column may be a name.
 */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "data.h"

#define MAX_CELL 255

typedef struct growf {
    float *v;
    size_t n, cap;
} growf;

static int growf_push(growf *g, float x)
{
    if (g->n == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 4096;
        float *v = realloc(g->v, cap * sizeof *v);
        if (!v)
            return BB_ENOMEM;
        g->v = v;
        g->cap = cap;
    }
    g->v[g->n++] = x;
    return BB_OK;
}

void data_table_free(data_table *t)
{
    free(t->x);
    free(t->y);
    memset(t, 0, sizeof *t);
}

/* The next field of a line: [*p, end of field), advancing past the delimiter. */
typedef struct line_cursor {
    const char *p, *end;
    char delim;
    bool done;
} line_cursor;

static void next_field(line_cursor *c, const char **f, size_t *n)
{
    const char *s = c->p;
    const char *e = memchr(s, c->delim, (size_t)(c->end - s));
    if (!e) {
        e = c->end;
        c->done = true;
    }
    while (s < e && (*s == ' ' || *s == '\t'))
        s++;
    const char *t = e;
    while (t > s && (t[-1] == ' ' || t[-1] == '\t'))
        t--;
    *f = s;
    *n = (size_t)(t - s);
    c->p = e < c->end ? e + 1 : e;
}

static size_t count_fields(const char *p, const char *end, char delim)
{
    size_t n = 1;
    for (; p < end; p++)
        n += *p == delim;
    return n;
}

static int parse_cell(const char *file, size_t line, size_t col, const char *f, size_t n,
                      float *out, bb_error *err)
{
    char buf[MAX_CELL + 1];
    if (n == 0)
        return bb_error_set(err, BB_EPARSE, "%s: line %zu, column %zu: empty cell", file, line, col);
    if (n > MAX_CELL)
        return bb_error_set(err, BB_EPARSE, "%s: line %zu, column %zu: cell of %zu characters is "
                            "not a number", file, line, col, n);
    memcpy(buf, f, n);
    buf[n] = '\0';
    char *endp;
    errno = 0;
    double d = strtod(buf, &endp);
    if (endp != buf + n)
        return bb_error_set(err, BB_EPARSE, "%s: line %zu, column %zu: '%.40s' is not a number",
                            file, line, col, buf);
    if (!isfinite(d) || fabs(d) > FLT_MAX)
        return bb_error_set(err, BB_EPARSE, "%s: line %zu, column %zu: %.40s is not a finite float",
                            file, line, col, buf);
    *out = (float)d;
    return BB_OK;
}

/* Resolves label_column against the column count (and header names). */
static int label_index(const char *file, const bbp_config *cfg, size_t cols, const char *hdr,
                       const char *hdr_end, char delim, size_t hdr_line, size_t data_line,
                       long *out, bb_error *err)
{
    cJSON *owned;
    const cJSON *v = bbp_config_get(cfg, "label_column", &owned);
    int rc = BB_OK;
    *out = -1;
    if (!v) {
        /* unsupervised */
    } else if (cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble)) {
        double i = v->valuedouble < 0 ? (double)cols + v->valuedouble : v->valuedouble;
        if (i < 0 || i >= (double)cols)
            rc = bb_error_set(err, BB_EPARSE,
                              "%s: no label column %g: line %zu has %zu columns (label_column "
                              "counts from 0, negative from the end)",
                              file, v->valuedouble, data_line, cols);
        else
            *out = (long)i;
    } else if (cJSON_IsString(v)) {
        if (!hdr) {
            rc = bb_error_set(err, BB_ECONFIG,
                              "%s: label_column \"%s\" is a name, but header is false", file,
                              v->valuestring);
        } else {
            line_cursor c = {hdr, hdr_end, delim, false};
            for (size_t col = 0; !c.done; col++) {
                const char *f;
                size_t n;
                next_field(&c, &f, &n);
                if (n == strlen(v->valuestring) && memcmp(f, v->valuestring, n) == 0) {
                    *out = (long)col;
                    break;
                }
            }
            if (*out < 0)
                rc = bb_error_set(err, BB_EPARSE, "%s: line %zu: the header has no column named "
                                  "\"%s\" (the label column)", file, hdr_line, v->valuestring);
        }
    } else {
        rc = bb_error_set(err, BB_ECONFIG, "%s: label_column must be a column number, a column "
                          "name or null", cfg->who);
    }
    cJSON_Delete(owned);
    if (!rc && cols - (*out >= 0) == 0)
        rc = bb_error_set(err, BB_EPARSE, "%s: line %zu has only the label column: no features",
                          file, data_line);
    return rc;
}

int data_csv_parse(const char *file, const char *text, size_t len, const bbp_config *cfg,
                   data_table *t, bb_error *err)
{
    char delim_s[8];
    bool header = false;
    int64_t skip = 0;
    int rc = bbp_config_string(cfg, "delimiter", delim_s, sizeof delim_s, err);
    if (!rc && strlen(delim_s) != 1)
        rc = bb_error_set(err, BB_ECONFIG, "%s: delimiter must be one character", cfg->who);
    if (!rc)
        rc = bbp_config_bool(cfg, "header", &header, err);
    if (!rc)
        rc = bbp_config_int(cfg, "skip_rows", 0, 1 << 30, &skip, err);
    if (rc)
        return rc;
    char delim = delim_s[0];
    growf x = {0}, y = {0};
    const char *hdr = NULL, *hdr_end = NULL;
    size_t hdr_line = 0, cols = 0, first_line = 0, rows = 0, line = 0;
    long label = -1;
    const char *p = text, *end = text + len;
    while (!rc && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        const char *next = nl ? nl + 1 : end;
        line++;
        if (le > p && le[-1] == '\r')
            le--;
        const char *q = p;
        while (q < le && (*q == ' ' || *q == '\t'))
            q++;
        if ((int64_t)line <= skip || q == le) {
            p = next;
            continue;
        }
        if (memchr(p, '\0', (size_t)(le - p))) {
            rc = bb_error_set(err, BB_EPARSE, "%s: line %zu: a NUL byte (not a text file?)", file,
                              line);
            break;
        }
        size_t n = count_fields(p, le, delim);
        if (header && !hdr) {
            hdr = p;
            hdr_end = le;
            hdr_line = line;
            cols = n;
            p = next;
            continue;
        }
        if (!first_line) {
            if (!cols)
                cols = n;
            first_line = line;
            rc = label_index(file, cfg, cols, hdr, hdr_end, delim, hdr_line, line, &label, err);
            if (rc)
                break;
        }
        if (n != cols) {
            size_t ref = hdr ? hdr_line : first_line;
            rc = bb_error_set(err, BB_EPARSE, "%s: line %zu has %zu columns, but line %zu has %zu",
                              file, line, n, ref, cols);
            break;
        }
        line_cursor c = {p, le, delim, false};
        for (size_t col = 0; col < cols && !rc; col++) {
            const char *f;
            size_t fl;
            float v = 0;
            next_field(&c, &f, &fl);
            rc = parse_cell(file, line, col + 1, f, fl, &v, err);
            if (!rc && growf_push((long)col == label ? &y : &x, v))
                rc = bb_error_set(err, BB_ENOMEM, "%s: out of memory", file);
        }
        rows++;
        p = next;
    }
    if (!rc && rows == 0)
        rc = bb_error_set(err, BB_EPARSE, "%s: no data rows (%zu lines read)", file, line);
    if (rc) {
        free(x.v);
        free(y.v);
        return rc;
    }
    t->rows = rows;
    t->cols = cols - (label >= 0);
    t->x = x.v;
    t->y = y.v;
    return BB_OK;
}

int data_csv_load(const bbp_config *cfg, data_table *t, bb_error *err)
{
    char path[4096];
    int64_t cap = 0;
    int rc = bbp_config_string(cfg, "path", path, sizeof path, err);
    if (!rc && !path[0])
        rc = bb_error_set(err, BB_ECONFIG, "%s: config key 'path' (the CSV file) is required",
                          cfg->who);
    if (!rc)
        rc = bbp_config_int(cfg, "max_bytes", 1, INT64_C(1) << 40, &cap, err);
    if (rc)
        return rc;
    gzFile gz = gzopen(path, "rb");
    if (!gz)
        return bb_error_set(err, BB_EIO, "%s: cannot open: %s", path,
                            errno ? strerror(errno) : "out of memory");
    /* read at most max_bytes + 1: the extra byte tells "too large" */
    size_t limit = (size_t)cap + 1, n = 0, size = limit < (1u << 16) ? limit : 1u << 16;
    char *buf = malloc(size + 1);
    rc = buf ? BB_OK : bb_error_set(err, BB_ENOMEM, "%s: out of memory", path);
    while (!rc) {
        if (n == size) {
            if (size == limit) {
                rc = bb_error_set(err, BB_ELIMIT, "%s: larger than max_bytes (%lld bytes, "
                                  "decompressed)", path, (long long)cap);
                break;
            }
            size_t ns = size * 2 < limit ? size * 2 : limit;
            char *nb = realloc(buf, ns + 1);
            if (!nb) {
                rc = bb_error_set(err, BB_ENOMEM, "%s: out of memory", path);
                break;
            }
            buf = nb;
            size = ns;
        }
        unsigned want = size - n > (1u << 30) ? 1u << 30 : (unsigned)(size - n);
        int got = gzread(gz, buf + n, want);
        int zerr = Z_OK;
        const char *m = got <= 0 ? gzerror(gz, &zerr) : NULL;
        if (got < 0 || (got == 0 && zerr != Z_OK && zerr != Z_STREAM_END)) {
            rc = bb_error_set(err, BB_EIO, "%s: read failed: %s", path,
                              zerr == Z_ERRNO ? strerror(errno) : m);
            break;
        }
        if (got == 0)
            break;
        n += (size_t)got;
    }
    gzclose(gz);
    if (!rc) {
        buf[n] = '\0';
        rc = data_csv_parse(path, buf, n, cfg, t, err);
    }
    free(buf);
    return rc;
}
