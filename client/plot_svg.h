/* A small SVG line plot: three panels side by side (train loss, test error,
 * learning rate against passes over the data), one colour per job, axes
 * with ticks and a legend. No library: the SVG is written as text. */
#ifndef PARLECTL_PLOT_SVG_H
#define PARLECTL_PLOT_SVG_H

#include <stdio.h>

enum { PLOT_LOSS, PLOT_ERROR, PLOT_LR, PLOT_PANELS };

typedef struct plot_curve {
    double *x, *y;
    int n, cap;
} plot_curve;

typedef struct plot_job {
    char label[160];
    plot_curve c[PLOT_PANELS];
} plot_job;

/* Append (x, y) to a curve; non-finite points are skipped. -1 out of memory. */
int plot_curve_add(plot_curve *c, double x, double y);
void plot_job_free(plot_job *j);

/* The colour of job i ("#rrggbb"), distinct for the first 10 jobs. */
const char *plot_colour(int i);

/* Write the SVG document to f; 0, or -1 if writing failed. */
int plot_svg_write(FILE *f, const plot_job *jobs, int njobs);

#endif
