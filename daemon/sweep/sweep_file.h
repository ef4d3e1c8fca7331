/* A sweep (docs/sweeps.md): a base job, a grid over its dotted keys, seeds
 * per point and an optional random subset of the grid, as parlectl sends it
 * (the base job file already read into an object on the client's side).
 * Read, validated and expanded here as a pure function of that JSON: no
 * I/O, no daemon state, so the daemon, a restart and the unit test expand
 * a sweep alike. */
#ifndef PARLE_SWEEP_FILE_H
#define PARLE_SWEEP_FILE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cjson/cJSON.h>
#include "sweep_keys.h"

#define SWEEP_MAX_KEYS 16          /* dotted keys in the grid */
#define SWEEP_MAX_VALUES 1000      /* values of one key */
#define SWEEP_MAX_GRID 1000000L    /* points of the whole grid (before samples) */
#define SWEEP_MAX_JOBS 1000        /* jobs queued: chosen points x seeds */
#define SWEEP_MAX_SEEDS 100
#define SWEEP_NAME_MAX 96          /* bytes; a job is named "<name> p<P> s<K>" */
#define SWEEP_KEY_MAX 127          /* bytes of one dotted key */

typedef struct sweep_spec {
    char name[SWEEP_NAME_MAX + 1];  /* the sweep's "name", else the base job's, else "sweep" */
    const cJSON *base;              /* borrowed from the root read */
    int nkeys;
    const char *keys[SWEEP_MAX_KEYS];   /* grid order; borrowed */
    const cJSON *values[SWEEP_MAX_KEYS];/* each key's array; borrowed */
    int nvalues[SWEEP_MAX_KEYS];
    long grid;                      /* points of the whole grid: the product of nvalues */
    int seeds;                      /* jobs per point, seeds base + 0..seeds-1 */
    long samples;                   /* 0: every point; else this many, drawn by sample_seed */
    uint64_t sample_seed;
    int early_after;                /* early stop after this many epochs; 0: none */
    double early_margin;
    int npoints;
    long *points;                   /* the chosen points' grid indices, ascending (malloc'd) */
} sweep_spec;

/* Read a sweep object without expanding it: its fields, the bounds above
 * (the grid's points and jobs from its lists' lengths first, before any
 * value is looked at), every grid key (a dotted path of the job; an unknown
 * one is named), every value list, and the points chosen. Its jobs are not
 * built: a caller checks cheap bounds of its own (parled's per-user job
 * bound) on s->npoints * s->seeds first, then the jobs (sweep_spec_check,
 * or sweep_job one at a time). 0, or -1 with every problem as "field: why"
 * joined by "; " in err. On success *s borrows from root (keep root alive)
 * and owns `points`. */
int sweep_spec_read(const cJSON *root, sweep_spec *s, char *err, size_t errlen);
/* Every job of a read sweep built and validated (sweep_job): 0, or -1 with
 * the errors of the first few bad points, each prefixed with its point, and
 * how many more fail. */
int sweep_spec_check(const sweep_spec *s, char *err, size_t errlen);
void sweep_spec_free(sweep_spec *s);

/* The value of grid key `key` at grid point `point` (row-major: the last key
 * varies fastest). */
const cJSON *sweep_value(const sweep_spec *s, long point, int key);

/* Job `k` (0..seeds-1) of grid point `point`: the base with the point's
 * values at their dotted keys, named "<name> p<point> s<k>", its seed the
 * point's own (the base's or the grid's, else the validator's default)
 * plus k, validated (job_config_from_json, and the early stop before its
 * last epoch). A new object (NULL when out of memory, or with err set when
 * the job is invalid: "point P (key=value, ...): path: why"). */
cJSON *sweep_job(const sweep_spec *s, long point, int k, char *err, size_t errlen);

/* "key=value, ..." of a point, for messages and tables; returns out. */
const char *sweep_point_label(const sweep_spec *s, long point, char *out, size_t outlen);

#endif
