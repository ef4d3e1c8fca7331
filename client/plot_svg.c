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

void plot_job_free(plot_job *j)
{
    for (int p = 0; p < PLOT_PANELS; p++) {
        free(j->c[p].x);
        free(j->c[p].y);
        memset(&j->c[p], 0, sizeof j->c[p]);
    }
}

/* Panel geometry, in SVG user units. */
enum { PANEL_W = 360, PANEL_H = 260, MARGIN_L = 64, MARGIN_T = 40, GAP = 48, LEGEND_H = 24 };

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

static void panel(FILE *f, const plot_job *jobs, int njobs, int p, double ox)
{
    static const char *const titles[] = {"train loss", "test error", "learning rate"};
    double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
    for (int j = 0; j < njobs; j++)
        for (int i = 0; i < jobs[j].c[p].n; i++) {
            x0 = fmin(x0, jobs[j].c[p].x[i]), x1 = fmax(x1, jobs[j].c[p].x[i]);
            y0 = fmin(y0, jobs[j].c[p].y[i]), y1 = fmax(y1, jobs[j].c[p].y[i]);
        }
    if (!isfinite(x0)) /* no points: an empty frame with the title */
        x0 = 0, x1 = 1, y0 = 0, y1 = 1;
    x0 = fmin(x0, 0); /* passes start at 0 */
    y0 = fmin(y0, 0);
    if (x1 - x0 < 1e-12)
        x1 = x0 + 1;
    if (y1 - y0 < 1e-12)
        y1 = y0 + 1;
    double oy = MARGIN_T;
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%d\" height=\"%d\" fill=\"none\" "
            "stroke=\"#000000\"/>\n", ox, oy, PANEL_W, PANEL_H);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"14\">%s</text>\n",
            ox + PANEL_W / 2.0, oy - 10, titles[p]);
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"12\">passes over "
            "the data</text>\n", ox + PANEL_W / 2.0, oy + PANEL_H + 36);
#define SX(v) (ox + ((v) - x0) / (x1 - x0) * PANEL_W)
#define SY(v) (oy + PANEL_H - ((v) - y0) / (y1 - y0) * PANEL_H)
    double sx = tick_step(x1 - x0), sy = tick_step(y1 - y0);
    for (double t = ceil(x0 / sx) * sx; t <= x1 + 1e-9 * sx; t += sx)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000000\"/>"
                "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"10\">%g</text>\n",
                SX(t), oy + PANEL_H, SX(t), oy + PANEL_H + 5, SX(t), oy + PANEL_H + 17,
                fabs(t) < 1e-12 * sx ? 0 : t);
    for (double t = ceil(y0 / sy) * sy; t <= y1 + 1e-9 * sy; t += sy)
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#000000\"/>"
                "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\" font-size=\"10\">%g</text>\n",
                ox - 5, SY(t), ox, SY(t), ox - 7, SY(t) + 3, fabs(t) < 1e-12 * sy ? 0 : t);
    for (int j = 0; j < njobs; j++) {
        const plot_curve *c = &jobs[j].c[p];
        if (c->n == 0)
            continue;
        fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"",
                plot_colour(j));
        for (int i = 0; i < c->n; i++)
            fprintf(f, "%s%.2f,%.2f", i ? " " : "", SX(c->x[i]), SY(c->y[i]));
        /* A lone point still shows: a zero-length segment draws nothing. */
        if (c->n == 1)
            fprintf(f, " %.2f,%.2f", SX(c->x[0]) + 2, SY(c->y[0]));
        fputs("\"/>\n", f);
    }
#undef SX
#undef SY
}

int plot_svg_write(FILE *f, const plot_job *jobs, int njobs)
{
    int width = MARGIN_L + PLOT_PANELS * PANEL_W + (PLOT_PANELS - 1) * GAP + 24;
    int height = MARGIN_T + PANEL_H + 52 + LEGEND_H * njobs + 8;
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
    fputs("</svg>\n", f);
    return ferror(f) ? -1 : 0;
}
