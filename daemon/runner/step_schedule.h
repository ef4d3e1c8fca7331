/* Turns on the cores for replicas that outnumber them unevenly (3 on 2).
 *
 * Each outer iteration, n replicas take S steps each on c cores. Left to the
 * kernel's time slices, the replicas rarely reach the end of an iteration
 * together, and the last one finishes alone while a core idles. Instead the
 * runner follows McNaughton's wrap-around schedule: the n x S steps, replica
 * after replica, are cut into c runs of (nearly) equal length, one per core
 * slot. A replica cut in two takes its first steps at the start of the next
 * slot and its last ones at the end of its own; the slot is at least S steps
 * long, so the two never overlap in time. Each slot runs its segments in
 * order, one replica at a time, so the iteration takes ceil(n S / c) steps
 * of wall time and a replica changes cores at most twice per iteration.
 *
 * The steps themselves are unchanged (one thread each, the same sums), so
 * results are the same bit for bit, whichever core runs them. */
#ifndef PARLE_STEP_SCHEDULE_H
#define PARLE_STEP_SCHEDULE_H

#include <pthread.h>

/* One replica's steps first..last (from 1) of every outer iteration, run in
 * turn `seg` of core slot `slot`. */
typedef struct step_segment {
    int slot, seg, first, last;
} step_segment;

typedef struct step_schedule {
    int n, cores, steps;
    step_segment (*parts)[2]; /* replica r's: parts[r][0], and [1] if cut (else zeroes) */
    int *nsegs;               /* per slot: its turns per iteration */
    long *done;               /* per slot: turns finished since first_k */
    long first_k;
    int aborted;
    pthread_mutex_t lock;
    pthread_cond_t turned;
} step_schedule;

/* Is the schedule worth it: n replicas floating over c < n cores, S steps
 * per iteration, with the rounding to whole steps costing at most 5%? */
int step_schedule_wanted(int n, int cores, int steps);

/* The schedule for n > cores replicas; the first outer iteration run is
 * first_k. Returns 0, or -1 when out of memory. */
int step_schedule_init(step_schedule *s, int n, int cores, int steps, long first_k);
void step_schedule_free(step_schedule *s); /* after init returned 0 (it cleans up its own failure) */

/* Before replica r's step l of outer iteration k: waits for its turn when
 * l starts one of its segments. Returns the slot that runs step l (the
 * runner keeps slot j on the job's core j), or -1 once the schedule was
 * aborted. */
int step_schedule_wait(step_schedule *s, int r, long k, int l);

/* Wakes every waiter for good: a replica that failed never ends its turn. */
void step_schedule_abort(step_schedule *s);

/* After replica r's step l: ends its turn when l ends a segment. */
void step_schedule_done(step_schedule *s, int r, int l);

#endif
