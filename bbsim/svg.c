/*
 * svg.c — the run's plots as standalone SVG (any browser shows them; no
 * plotting library), drawn like scripts/fed-report's: a metric over virtual
 * time (one node: its line; many nodes: the values as dots, at most
 * MAX_DOTS of them, and each report bucket's median as the line, its 10th
 * and 90th percentile dashed), and the bytes on the wire per round.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bbsim/sim_internal.h"

#define W 720
#define H 420
#define ML 80
#define MR 30
#define MT 50
#define MB 60
#define PW (W - ML - MR)
#define PH (H - MT - MB)

typedef struct axes {
    double x0, x1, y0, y1;
} axes;

static double px(const axes *a, double x)
{
    return ML + PW * (a->x1 > a->x0 ? (x - a->x0) / (a->x1 - a->x0) : 0.5);
}

static double py(const axes *a, double y)
{
    return MT + PH * (1 - (a->y1 > a->y0 ? (y - a->y0) / (a->y1 - a->y0) : 0.5));
}

static void frame(FILE *f, const axes *a, const char *title, const char *xlabel,
                  const char *ylabel)
{
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"12\">\n"
               "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
               "<text x=\"%d\" y=\"28\" font-size=\"16\" text-anchor=\"middle\">%s</text>\n",
            W, H, W, H, W / 2, title);
    for (int i = 0; i <= 10; i++) {
        double y = a->y0 + (a->y1 - a->y0) * i / 10.0, x = a->x0 + (a->x1 - a->x0) * i / 10.0;
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#e5e5e5\"/>\n",
                ML, py(a, y), ML + PW, py(a, y));
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%.4g</text>\n", ML - 8,
                py(a, y) + 4, y);
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%.4g</text>\n", px(a, x),
                MT + PH + 18, x);
    }
    fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" "
               "stroke=\"#333\"/>\n"
               "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">%s</text>\n"
               "<text transform=\"translate(18 %d) rotate(-90)\" text-anchor=\"middle\">%s"
               "</text>\n",
            ML, MT, PW, PH, ML + PW / 2, H - 18, xlabel, MT + PH / 2, ylabel);
}

static FILE *open_svg(const char *path, bb_error *err)
{
    FILE *f = fopen(path, "w");
    if (!f)
        bb_error_set(err, BB_EIO, "%s: cannot write: %s", path, strerror(errno));
    return f;
}

static int close_svg(FILE *f, const char *path, bb_error *err)
{
    fputs("</svg>\n", f);
    return fclose(f) == 0 ? BB_OK
                          : bb_error_set(err, BB_EIO, "%s: cannot write: %s", path, strerror(errno));
}

#define MAX_DOTS 20000 /* a 1,000-node run reports 100,000s of values: every k-th is drawn */

/* A polyline through the points (x[i], y[i]). */
static void polyline(FILE *f, const axes *a, const double *x, const double *y, size_t n,
                     const char *style)
{
    fprintf(f, "<polyline fill=\"none\" %s points=\"", style);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%.1f,%.1f ", px(a, x[i]), py(a, y[i]));
    fputs("\"/>\n", f);
}

/* Many nodes: the median of each bucket as the line, the 10th and 90th
 * percentile dashed, at the bucket's middle. */
static void bucket_lines(FILE *f, const bbsim *s, size_t m, const axes *a)
{
    size_t n = 0;
    bbsim_bucket *b = bbsim__metric_buckets(s, m, &n);
    double *x = malloc((n ? n : 1) * 2 * sizeof *x);
    double *y = x ? x + n : NULL;
    for (size_t i = 0; b && x && i < n; i++)
        x[i] = ((double)b[i].at + (double)s->sc->bucket / 2) / 1e9;
    static const char *const STYLE[] = {
        "stroke=\"#1f77b4\" stroke-width=\"1\" stroke-dasharray=\"4 3\"",
        "stroke=\"#1f77b4\" stroke-width=\"2\"",
        "stroke=\"#1f77b4\" stroke-width=\"1\" stroke-dasharray=\"4 3\""};
    for (int q = 0; b && x && q < 3; q++) {
        for (size_t i = 0; i < n; i++)
            y[i] = q == 0 ? b[i].p10 : q == 1 ? b[i].median : b[i].p90;
        polyline(f, a, x, y, n, STYLE[q]);
    }
    free(x);
    free(b);
}

int bbsim__svg_metric(const bbsim *s, size_t m, const char *path, bb_error *err)
{
    const bbsim_series *sr = &s->series[m];
    axes a = {0, (double)s->sum.virtual_ns / 1e9, INFINITY, -INFINITY};
    bool one_node = bbsim__series_one_node(sr);
    for (size_t i = 0; i < sr->n; i++) {
        a.y0 = fmin(a.y0, sr->v[i].value);
        a.y1 = fmax(a.y1, sr->v[i].value);
    }
    if (!sr->n)
        a.y0 = 0, a.y1 = 1;
    else if (a.y0 >= 0 && a.y1 <= 1) /* a fraction: the whole scale */
        a.y0 = 0, a.y1 = 1;
    FILE *f = open_svg(path, err);
    if (!f)
        return err->code;
    char title[160];
    size_t every = sr->n > MAX_DOTS ? (sr->n + MAX_DOTS - 1) / MAX_DOTS : 1;
    if (one_node)
        snprintf(title, sizeof title, "%s over virtual time (one node)", s->sc->metrics[m].name);
    else
        snprintf(title, sizeof title,
                 "%s over virtual time (%s; line: median, dashed: 10th/90th pct)",
                 s->sc->metrics[m].name, every > 1 ? "dots: a sample of the values" : "dots: every value");
    frame(f, &a, title, "virtual time (s)", s->sc->metrics[m].name);
    for (size_t i = 0; !one_node && i < sr->n; i += every)
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"1.5\" fill=\"#aaa\"/>\n",
                px(&a, (double)sr->v[i].at / 1e9), py(&a, sr->v[i].value));
    if (!one_node) {
        bucket_lines(f, s, m, &a);
        return close_svg(f, path, err);
    }
    fputs("<polyline fill=\"none\" stroke=\"#1f77b4\" stroke-width=\"2\" points=\"", f);
    for (size_t i = 0; i < sr->n; i++)
        fprintf(f, "%.1f,%.1f ", px(&a, (double)sr->v[i].at / 1e9), py(&a, sr->v[i].value));
    fputs("\"/>\n", f);
    for (size_t i = 0; i < sr->n; i++)
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"#1f77b4\"><title>%.3f s: "
                   "%.4f</title></circle>\n",
                px(&a, (double)sr->v[i].at / 1e9), py(&a, sr->v[i].value),
                (double)sr->v[i].at / 1e9, sr->v[i].value);
    return close_svg(f, path, err);
}

int bbsim__svg_traffic(const bbsim *s, const char *path, bb_error *err)
{
    axes a = {0.5, (double)s->n_rounds + 0.5, 0, 1};
    for (size_t r = 0; r < s->n_rounds; r++)
        a.y1 = fmax(a.y1, (double)s->rounds[r].bytes / 1024.0);
    FILE *f = open_svg(path, err);
    if (!f)
        return err->code;
    frame(f, &a, "bytes on the wire per round (every node)", "round", "KB");
    double bw = s->n_rounds ? 0.8 * PW / (double)s->n_rounds : 0;
    for (size_t r = 0; r < s->n_rounds; r++) {
        double kb = (double)s->rounds[r].bytes / 1024.0;
        fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                   "fill=\"#2ca02c\"><title>round %zu: %.1f KB at %.3f s</title></rect>\n",
                px(&a, (double)r + 1) - bw / 2, py(&a, kb), bw, py(&a, 0) - py(&a, kb), r + 1,
                kb, (double)s->rounds[r].at / 1e9);
    }
    return close_svg(f, path, err);
}
