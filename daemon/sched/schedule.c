#include "schedule.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Shares are fractions such as 0.25 or 1/3: summed, they may miss 1 by a
 * rounding. */
#define SHARE_SLACK 1e-9

/* What running jobs hold, and what waiting jobs keep from those after them. */
typedef struct pool {
    double share[SCHED_GPUS]; /* summed shares held on each GPU */
    int cores;                /* cores held */
    int running;
    uint64_t kept;            /* GPUs kept for a waiting job: keeper[g] */
    int keeper[SCHED_GPUS];
    int cpu_keeper;           /* -1, or the waiting job that keeps the free cores */
} pool;

static int gpu_fits(double held, double share)
{
    return held + share <= 1.0 + SHARE_SLACK;
}

/* Whether j's devices fit beside what `p` holds. */
static int devices_fit(const sched_input *in, const pool *p, const sched_job *j)
{
    for (int g = 0; g < SCHED_GPUS; g++)
        if ((j->gpus >> g & 1) && !gpu_fits(p->share[g], j->gpu_share))
            return 0;
    return j->cores == 0 || p->cores + j->cores <= in->ncores;
}

static void hold(pool *p, const sched_job *j, int sign)
{
    for (int g = 0; g < SCHED_GPUS; g++)
        if (j->gpus >> g & 1)
            p->share[g] += sign * j->gpu_share;
    p->cores += sign * j->cores;
    p->running += sign;
}

/* Whether running job r holds any device queued job j needs. */
static int overlaps(const sched_job *r, const sched_job *j)
{
    return (r->gpus & j->gpus) || (r->cores && j->cores);
}

static void add_blocker(sched_decision *d, int who)
{
    if (d->nblockers < SCHED_BLOCKERS)
        d->blockers[d->nblockers] = who;
    d->nblockers++;
}

/* Whether job i holds its devices: running, or started by this decision. */
static int holds(const sched_input *in, const sched_decision *out, int i)
{
    return in->jobs[i].running || out[i].action == SCHED_START;
}

/* The pool of the jobs that hold devices and are not `gone` (stopping or
 * preempted). */
static void pool_without(const sched_input *in, const sched_decision *out,
                         const unsigned char *gone, pool *p)
{
    memset(p->share, 0, sizeof p->share);
    p->cores = p->running = 0;
    for (int i = 0; i < in->njobs; i++)
        if (holds(in, out, i) && !gone[i])
            hold(p, &in->jobs[i], 1);
}

/* Priority, then resuming, then the owner's use, then submission. */
static int by_turn(const void *a, const void *b, void *jobs)
{
    const sched_job *x = (const sched_job *)jobs + *(const int *)a;
    const sched_job *y = (const sched_job *)jobs + *(const int *)b;
    if (x->priority != y->priority)
        return x->priority > y->priority ? -1 : 1;
    if (x->resuming != y->resuming)
        return x->resuming ? -1 : 1;
    if (x->usage != y->usage)
        return x->usage < y->usage ? -1 : 1;
    return (x->order > y->order) - (x->order < y->order);
}

/* Lowest priority first, then the youngest run. */
static int by_victim(const void *a, const void *b, void *jobs)
{
    const sched_job *x = (const sched_job *)jobs + *(const int *)a;
    const sched_job *y = (const sched_job *)jobs + *(const int *)b;
    if (x->priority != y->priority)
        return x->priority < y->priority ? -1 : 1;
    return (x->started_at < y->started_at) - (x->started_at > y->started_at);
}

/* Queued job q waits for devices: does it fit once the stopping jobs stop
 * (then it waits for them), or once some lower-priority running jobs are
 * preempted too (marked in out, their indices in gone)? 1 if q now waits
 * for stopping jobs, 0 if not. work: njobs ints. */
static int try_preempt(const sched_input *in, int q, unsigned char *gone, int *work,
                       sched_decision *out)
{
    const sched_job *j = &in->jobs[q];
    pool p;
    pool_without(in, out, gone, &p);
    int fits = devices_fit(in, &p, j);
    int n = 0;
    if (!fits && in->preempt) {
        for (int i = 0; i < in->njobs; i++) {
            const sched_job *r = &in->jobs[i];
            if (r->running && !gone[i] && r->priority < j->priority && overlaps(r, j))
                work[n++] = i;
        }
        qsort_r(work, (size_t)n, sizeof *work, by_victim, (void *)in->jobs);
        int taken = 0;
        while (taken < n && !fits) {
            gone[work[taken++]] = 1;
            pool_without(in, out, gone, &p);
            fits = devices_fit(in, &p, j);
        }
        if (!fits) { /* even all of them would not do: preempt none */
            for (int k = 0; k < taken; k++)
                gone[work[k]] = 0;
            taken = 0;
        }
        /* The fewest: give back, latest taken first, any not needed. */
        for (int k = taken - 1; k >= 0 && fits; k--) {
            gone[work[k]] = 0;
            pool_without(in, out, gone, &p);
            if (!devices_fit(in, &p, j))
                gone[work[k]] = 1;
        }
        n = taken;
    }
    if (!fits)
        return 0;
    for (int k = 0; k < n; k++)
        if (gone[work[k]]) {
            out[work[k]].action = SCHED_PREEMPT;
            out[work[k]].preempted_for = q;
        }
    out[q].wait = SCHED_STOPPING;
    for (int i = 0; i < in->njobs; i++)
        if (in->jobs[i].running && gone[i] && overlaps(&in->jobs[i], j))
            add_blocker(&out[q], i);
    return 1;
}

/* Keep q's devices from every job after it. */
static void keep(pool *p, const sched_job *j, int q)
{
    for (int g = 0; g < SCHED_GPUS; g++)
        if ((j->gpus >> g & 1) && !(p->kept >> g & 1)) {
            p->kept |= 1ull << g;
            p->keeper[g] = q;
        }
    if (j->cores && p->cpu_keeper < 0)
        p->cpu_keeper = q;
}

/* The waiting job before q that keeps a device q wants, or -1. */
static int keeper_of(const pool *p, const sched_job *j)
{
    for (int g = 0; g < SCHED_GPUS; g++)
        if ((j->gpus & p->kept) >> g & 1)
            return p->keeper[g];
    return j->cores ? p->cpu_keeper : -1;
}

/* Queued job q's turn: start it, or say why it waits. */
static void decide_queued(const sched_input *in, pool *p, int q, unsigned char *gone, int *work,
                          sched_decision *out)
{
    const sched_job *j = &in->jobs[q];
    sched_decision *d = &out[q];
    if (j->held) {
        d->wait = SCHED_HOLD;
        return;
    }
    if (j->gpus & in->faulted) {
        d->wait = SCHED_FAULTED;
        return;
    }
    int keeper = keeper_of(p, j);
    if (keeper >= 0) {
        d->wait = SCHED_QUEUE;
        add_blocker(d, keeper);
    } else if (!devices_fit(in, p, j)) {
        if (!try_preempt(in, q, gone, work, out)) {
            d->wait = SCHED_DEVICES;
            for (int i = 0; i < in->njobs; i++)
                if (holds(in, out, i) && overlaps(&in->jobs[i], j))
                    add_blocker(d, i);
        }
    } else if (in->one_at_a_time && p->running > 0) {
        d->wait = SCHED_ONE_AT_A_TIME;
    } else {
        d->action = SCHED_START;
        hold(p, j, 1);
        return;
    }
    keep(p, j, q);
}

int sched_decide(const sched_input *in, sched_decision *out)
{
    const int n = in->njobs;
    int *turn = malloc((size_t)(n ? n : 1) * 2 * sizeof *turn);
    unsigned char *gone = calloc((size_t)(n ? n : 1), 1);
    if (!turn || !gone) {
        free(turn);
        free(gone);
        return -1;
    }
    int *work = turn + n;
    pool p;
    memset(&p, 0, sizeof p);
    p.cpu_keeper = -1;
    int queued = 0;
    for (int i = 0; i < n; i++) {
        out[i] = (sched_decision){.action = SCHED_KEEP, .preempted_for = -1, .turn = -1};
        if (in->jobs[i].running) {
            hold(&p, &in->jobs[i], 1);
            gone[i] = (unsigned char)(in->jobs[i].stopping != 0);
        } else {
            turn[queued++] = i;
        }
    }
    qsort_r(turn, (size_t)queued, sizeof *turn, by_turn, (void *)in->jobs);
    for (int k = 0; k < queued; k++) {
        out[turn[k]].turn = k;
        decide_queued(in, &p, turn[k], gone, work, out);
    }
    free(turn);
    free(gone);
    return 0;
}

double sched_usage_decay(double usage, double dt, double half_life, double device_seconds)
{
    if (half_life <= 0)
        return device_seconds;
    if (dt < 0)
        dt = 0;
    return usage * exp2(-dt / half_life) + device_seconds * exp2(-dt / (2 * half_life));
}
