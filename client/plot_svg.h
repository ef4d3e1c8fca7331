/* A small SVG line plot: three panels side by side (loss, test error,
 * learning rate against passes over the data), one colour per job, the
 * replicas' training loss solid and the master's evaluations dashed with a
 * dot each, axes on the data's range with round ticks, and a legend. No
 * library: the SVG is written as text. */
#ifndef PARLECTL_PLOT_SVG_H
#define PARLECTL_PLOT_SVG_H

#include <stdio.h>

/* The panels' curves, then the master's test loss, drawn in the loss panel. */
enum { PLOT_LOSS, PLOT_ERROR, PLOT_LR, PLOT_PANELS, PLOT_TEST_LOSS = PLOT_PANELS, PLOT_CURVES };

typedef struct plot_curve {
    double *x, *y;
    int n, cap;
} plot_curve;

/* A job's curves, or a sweep point's: the mean of its seeds' curves, with
 * their least and greatest values as a band (lo, hi; empty for a job). */
typedef struct plot_job {
    char label[160];
    plot_curve c[PLOT_CURVES];
    plot_curve lo[PLOT_PANELS], hi[PLOT_PANELS];
} plot_job;

/* Append (x, y) to a curve; non-finite points are skipped. -1 out of memory. */
int plot_curve_add(plot_curve *c, double x, double y);
void plot_job_free(plot_job *j);
/* The mean of n runs' curves (the master's test loss included) into out
 * (which gets no label), point by point in their order (seeds of one job
 * file log at the same steps), as far as the shortest; with n > 1 the
 * panels' curves' range as out's band. -1 out of memory. */
int plot_band(plot_job *out, const plot_job *runs, int n);

/* The colour of job i ("#rrggbb"), distinct for the first 10 jobs. */
const char *plot_colour(int i);

/* Write the SVG document to f; 0, or -1 if writing failed. */
int plot_svg_write(FILE *f, const plot_job *jobs, int njobs);

#endif
