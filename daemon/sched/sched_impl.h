/* Internal to the scheduler's decision (daemon/sched/): the helpers that
 * schedule.c shares with sched_time.c. */
#ifndef PARLE_SCHED_IMPL_H
#define PARLE_SCHED_IMPL_H

#include "schedule.h"

/* Scratch for the free-time sums: njobs of each. */
typedef struct sched_scratch {
    double *end;
    int *held;
    unsigned char *counted;
} sched_scratch;

/* Whether job i holds its devices: running, or started by this decision;
 * and the GPUs it holds. */
static inline int sched_holds(const sched_input *in, const sched_decision *out, int i)
{
    return in->jobs[i].running || out[i].action == SCHED_START;
}
static inline uint64_t sched_held_gpus(const sched_input *in, const sched_decision *out, int i)
{
    return in->jobs[i].running ? in->jobs[i].gpus : out[i].gpus;
}

/* sched_time.c. When job i (holding, or starting now) frees its devices: now
 * if it is stopping (gone), else by its time limit (INFINITY: none). */
double sched_end(const sched_input *in, const unsigned char *gone, int i);
/* When GPU g has `share` thousandths free, and when `cores` cores are. */
double sched_gpu_free_at(const sched_input *in, const sched_decision *out,
                         const unsigned char *gone, int g, int share, sched_scratch *s);
double sched_cores_free_at(const sched_input *in, const sched_decision *out,
                           const unsigned char *gone, int cores, sched_scratch *s);
/* n GPUs of avail, joined pairwise by links if n such are there, else the
 * lowest ids; 0 when avail has fewer than n. */
uint64_t sched_pick_gpus(uint64_t avail, int n, const uint64_t *links);
/* The n GPUs of `from` that free soonest for `share`; *at: when all have. */
uint64_t sched_soonest_gpus(const sched_input *in, const sched_decision *out,
                            const unsigned char *gone, uint64_t from, int n, int share,
                            double *at, sched_scratch *s);

#endif
