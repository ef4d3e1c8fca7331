#include "plot_svg.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Tableau's ten: distinct in print and for most colour-blind readers. */
static const char *const palette[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                      "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
#define NPALETTE (int)(sizeof palette / sizeof palette[0])

const char *plot_colour(int i) { return palette[i % NPALETTE]; }

int plot_curve_add(plot_curve *c, double x, double y)
{
    if (!isfinite(x) || !isfinite(y))
        return 0;
    if (c->n == c->cap) {
        int cap = c->cap ? 2 * c->cap : 64;
        double *nx = realloc(c->x, (size_t)cap * sizeof *nx);
        if (!nx)
            return -1;
        c->x = nx;
        double *ny = realloc(c->y, (size_t)cap * sizeof *ny);
        if (!ny)
            return -1;
        c->y = ny;
        c->cap = cap;
    }
    c->x[c->n] = x;
    c->y[c->n++] = y;
    return 0;
}

static void curve_free(plot_curve *c)
{
    free(c->x);
    free(c->y);
    memset(c, 0, sizeof *c);
}

void plot_job_free(plot_job *j)
{
    for (int p = 0; p < PLOT_PANELS; p++) {
        curve_free(&j->c[p]);
        curve_free(&j->lo[p]);
        curve_free(&j->hi[p]);
    }
    curve_free(&j->c[PLOT_TEST_LOSS]);
}

int plot_band(plot_job *out, const plot_job *runs, int n)
{
    /* Every curve, the master's test loss too; a band for the panels' own. */
    for (int p = 0; p < PLOT_CURVES; p++) {
        int band = n > 1 && p < PLOT_PANELS;
        int len = runs[0].c[p].n;
        for (int r = 1; r < n; r++)
            len = runs[r].c[p].n < len ? runs[r].c[p].n : len;
        for (int i = 0; i < len; i++) {
            double sum = 0, lo = INFINITY, hi = -INFINITY, x = runs[0].c[p].x[i];
            for (int r = 0; r < n; r++) {
                double y = runs[r].c[p].y[i];
                sum += y, lo = fmin(lo, y), hi = fmax(hi, y);
            }
            if (plot_curve_add(&out->c[p], x, sum / n) != 0 ||
                (band && (plot_curve_add(&out->lo[p], x, lo) != 0 ||
                          plot_curve_add(&out->hi[p], x, hi) != 0)))
                return -1;
        }
    }
    return 0;
}

/* Panel geometry, in SVG user units. */
enum { PANEL_W = 360, PANEL_H = 260, MARGIN_L = 64, MARGIN_T = 40, GAP = 48, LEGEND_H = 24 };
/* The master's curves (test loss and error): dashed, a dot at each evaluation. */
#define MASTER_DASH "7 4"

/* A "nice" tick step (1, 2 or 5 times a power of ten) for about 5 ticks. */
static double tick_step(double span)
{
    double raw = span / 5, p = pow(10, floor(log10(raw))), m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
}

/* Escape text for XML: job names are the user's. */
static void put_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '<')
            fputs("&lt;", f);
        else if (*s == '>')
            fputs("&gt;", f);
        else if (*s == '&')
            fputs("&amp;", f);
        else if (*s == '"')
            fputs("&quot;", f);
        else if ((unsigned char)*s >= 0x20)
            fputc(*s, f);
    }
}

/* A curve: the replicas' solid, the master's dashed with a dot a point. */
static void curve(FILE *f, const plot_curve *c, const char *colour, int master, double ox,
                  double x0, double x1, double y0, double y1)
{
    double oy = MARGIN_T;
#define SX(v) (ox + ((v) - x0) / (x1 - x0) * PANEL_W)
#define SY(v) (oy + PANEL_H - ((v) - y0) / (y1 - y0) * PANEL_H)
    if (c->n == 0)
        return;
    fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" %s points=\"", colour,
            master ? "stroke-width=\"2.2\" stroke-dasharray=\"" MASTER_DASH "\""
                   : "stroke-width=\"1.2\" stroke-opacity=\"0.6\"");
    for (int i = 0; i < c->n; i++)
        fprintf(f, "%s%.2f,%.2f", i ? " " : "", SX(c->x[i]), SY(c->y[i]));
    /* A lone point still shows: a zero-length segment draws nothing. */
    if (c->n == 1)
        fprintf(f, " %.2f,%.2f", SX(c->x[0]) + 2, SY(c->y[0]));
    fputs("\"/>\n", f);
    for (int i = 0; master && i < c->n; i++)
        fprintf(f, "<circle cx=\"%.2f\" cy=\"%.2f\" r=\"3.5\" fill=\"%s\" stroke=\"#ffffff\"/>\n",
                SX(c->x[i]), SY(c->y[i]), colour);
#undef SX
#undef SY
}

static void panel(FILE *f, const plot_job *jobs, int njobs, int p, double ox)
{
    static const char *const titles[] = {"train loss, test loss", "test error of the master",
                                         "learning rate"};
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    for (int j = 0; j < njobs; j++)
        for (int k = 0; k < 4; k++) { /* the curve, its band's edges, the master's test loss */
            const plot_curve *c = k == 0 ? &jobs[j].c[p] : k == 1 ? &jobs[j].lo[p]
                                  : k == 2 ? &jobs[j].hi[p]
                                  : &jobs[j].c[p == PLOT_LOSS ? PLOT_TEST_LOSS : p];
            for (int i = 0; i < c->n; i++) {
                x0 = fmin(x0, c->x[i]), x1 = fmax(x1, c->x[i]);
                y0 = fmin(y0, c->y[i]), y1 = fmax(y1, c->y[i]);
            }
        }
    if (!isfinite(x0)) /* no points: an empty frame with the title */
        x0 = 0, x1 = 1, y0 = 0, y1 = 1;
    x0 = fmin(x0, 0); /* passes start at 0 */
    if (x1 - x0 < 1e-12)
        x1 = x0 + 1;
    /* y: the data's range, 5% more each side (never below 0: losses, errors
     * and rates are not negative), widened to whole ticks. */
    double pad = y1 - y0 > 1e-12 ? 0.05 * (y1 - y0) : 0.05 * fabs(y1) + 1e-9;
    y0 = fmax(y0 - pad, fmin(y0, 0)), y1 += pad;
    double sy = tick_step(y1 - y0);
    y0 = floor(y0 / sy) * sy, y1 = ceil(y1 / sy) * sy;
    double oy = MARGIN_T;
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%d\" height=\"%d\" fill=\"none\" "
            "stroke=\"#000000\"/>\n", ox, oy, PANEL_W, PANEL_H);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"14\">%s</text>\n",
            ox + PANEL_W / 2.0, oy - 10, titles[p]);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"12\">passes over "
            "the data</text>\n", ox + PANEL_W / 2.0, oy + PANEL_H + 36);
#define SX(v) (ox + ((v) - x0) / (x1 - x0) * PANEL_W)
#define SY(v) (oy + PANEL_H - ((v) - y0) / (y1 - y0) * PANEL_H)
    double sx = tick_step(x1 - x0);
    for (double t = ceil(x0 / sx) * sx; t <= x1 + 1e-9 * sx; t += sx)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000000\"/>"
                "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"10\">%g</text>\n",
                SX(t), oy + PANEL_H, SX(t), oy + PANEL_H + 5, SX(t), oy + PANEL_H + 17,
                fabs(t) < 1e-12 * sx ? 0 : t);
    /* A light grid line at each y tick; the error in percent. */
    for (double t = y0; t <= y1 + 1e-9 * sy; t += sy) {
        double v = fabs(t) < 1e-9 * sy ? 0 : t;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#dddddd\"/>"
                "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000000\"/>"
                "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" font-size=\"10\">",
                ox, SY(t), ox + PANEL_W, SY(t), ox - 5, SY(t), ox, SY(t), ox - 7, SY(t) + 3);
        if (p == PLOT_ERROR)
            fprintf(f, "%.*f%%</text>\n", 100 * sy < 1 ? 1 : 0, 100 * v);
        else
            fprintf(f, "%g</text>\n", v);
    }
    /* Bands first, under every curve: the lower edge forward, the upper back. */
    for (int j = 0; j < njobs; j++) {
        const plot_curve *lo = &jobs[j].lo[p], *hi = &jobs[j].hi[p];
        if (lo->n == 0)
            continue;
        fprintf(f, "<polygon fill=\"%s\" fill-opacity=\"0.2\" stroke=\"none\" points=\"",
                plot_colour(j));
        for (int i = 0; i < lo->n; i++)
            fprintf(f, "%.2f,%.2f ", SX(lo->x[i]), SY(lo->y[i]));
        for (int i = hi->n - 1; i >= 0; i--)
            fprintf(f, "%.2f,%.2f%s", SX(hi->x[i]), SY(hi->y[i]), i ? " " : "");
        fputs("\"/>\n", f);
    }
    for (int j = 0; j < njobs; j++) {
        curve(f, &jobs[j].c[p], plot_colour(j), p == PLOT_ERROR, ox, x0, x1, y0, y1);
        if (p == PLOT_LOSS)
            curve(f, &jobs[j].c[PLOT_TEST_LOSS], plot_colour(j), 1, ox, x0, x1, y0, y1);
    }
#undef SX
#undef SY
}

int plot_svg_write(FILE *f, const plot_job *jobs, int njobs)
{
    int width = MARGIN_L + PLOT_PANELS * PANEL_W + (PLOT_PANELS - 1) * GAP + 24;
    int height = MARGIN_T + PANEL_H + 52 + LEGEND_H * (njobs + 1) + 8;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"#ffffff\"/>\n",
            width, height, width, height);
    for (int p = 0; p < PLOT_PANELS; p++)
        panel(f, jobs, njobs, p, MARGIN_L + p * (PANEL_W + GAP));
    double ly = MARGIN_T + PANEL_H + 60;
    for (int j = 0; j < njobs; j++, ly += LEGEND_H) {
        fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"%s\" "
                "stroke-width=\"3\"/><text x=\"%d\" y=\"%.1f\" font-size=\"12\">",
                MARGIN_L, ly, MARGIN_L + 28, ly, plot_colour(j), MARGIN_L + 36, ly + 4);
        put_text(f, jobs[j].label);
        fputs("</text>\n", f);
    }
    /* What the line styles mean. */
    fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#444444\" "
            "stroke-width=\"1.2\" stroke-opacity=\"0.6\"/><text x=\"%d\" y=\"%.1f\" font-size=\"12\">replica 0's "
            "training loss (mini-batches, as it trains)</text>\n",
            MARGIN_L, ly, MARGIN_L + 28, ly, MARGIN_L + 36, ly + 4);
    fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#444444\" "
            "stroke-width=\"2.2\" stroke-dasharray=\"" MASTER_DASH "\"/><circle cx=\"%d\" "
            "cy=\"%.1f\" r=\"3.5\" fill=\"#444444\" stroke=\"#ffffff\"/><text x=\"%d\" y=\"%.1f\" "
            "font-size=\"12\">the master (the replicas' mean, or the rule's own) on the "
            "test set, at each evaluation</text>\n",
            MARGIN_L + 400, ly, MARGIN_L + 428, ly, MARGIN_L + 414, ly, MARGIN_L + 436, ly + 4);
    fputs("</svg>\n", f);
    return ferror(f) ? -1 : 0;
}
