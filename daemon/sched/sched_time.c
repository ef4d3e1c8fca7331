/* When devices free, by the time limits of the jobs holding them, and which
 * N GPUs a job asking for any N gets (sched_impl.h). */
#include <math.h>

#include "sched_impl.h"

double sched_end(const sched_input *in, const unsigned char *gone, int i)
{
    const sched_job *j = &in->jobs[i];
    if (gone[i])
        return in->now; /* stopping: its devices are free at its next step boundary */
    if (j->time_limit <= 0)
        return INFINITY;
    return (j->running ? j->started_at : in->now) + j->time_limit;
}

/* The earliest of the ends of jobs [0, n) not yet counted, or -1. */
static int next_end(const double *end, const unsigned char *counted, int n)
{
    int best = -1;
    for (int i = 0; i < n; i++)
        if (!counted[i] && (best < 0 || end[i] < end[best]))
            best = i;
    return best;
}

/* When `need` fits beside what the holders hold (held[k] of `total` each,
 * ending at end[k]), freed earliest first. counted: scratch of n. */
static double fits_at(const double *end, const int *held, unsigned char *counted, int n,
                      int total, int need, int capacity, double now)
{
    for (int k = 0; k < n; k++)
        counted[k] = 0;
    double at = now;
    while (total + need > capacity) {
        int k = next_end(end, counted, n);
        if (k < 0)
            return INFINITY;
        counted[k] = 1;
        total -= held[k];
        if (end[k] > at)
            at = end[k];
    }
    return at;
}

double sched_gpu_free_at(const sched_input *in, const sched_decision *out,
                         const unsigned char *gone, int g, int share, sched_scratch *s)
{
    int n = 0, total = 0;
    for (int i = 0; i < in->njobs; i++)
        if (sched_holds(in, out, i) && (sched_held_gpus(in, out, i) >> g & 1)) {
            s->end[n] = sched_end(in, gone, i);
            s->held[n] = in->jobs[i].gpu_share;
            total += s->held[n++];
        }
    return fits_at(s->end, s->held, s->counted, n, total, share, SCHED_WHOLE, in->now);
}

double sched_cores_free_at(const sched_input *in, const sched_decision *out,
                           const unsigned char *gone, int cores, sched_scratch *s)
{
    int n = 0, total = 0;
    for (int i = 0; i < in->njobs; i++)
        if (sched_holds(in, out, i) && in->jobs[i].cores) {
            s->end[n] = sched_end(in, gone, i);
            s->held[n] = in->jobs[i].cores;
            total += s->held[n++];
        }
    return fits_at(s->end, s->held, s->counted, n, total, cores, in->ncores, in->now);
}

uint64_t sched_pick_gpus(uint64_t avail, int n, const uint64_t *links)
{
    if (n <= 0 || __builtin_popcountll(avail) < n)
        return 0;
    /* N joined pairwise, grown from each GPU in turn, lowest ids first. */
    for (int g = 0; g < SCHED_GPUS; g++) {
        if (!(avail >> g & 1))
            continue;
        uint64_t set = 1ull << g;
        int count = 1;
        for (int h = 0; h < SCHED_GPUS && count < n; h++)
            if ((avail >> h & 1) && h != g && !(set & ~links[h])) {
                set |= 1ull << h;
                count++;
            }
        if (count == n)
            return set;
    }
    /* None joined: the lowest ids. */
    uint64_t set = 0;
    for (int g = 0; g < SCHED_GPUS && n > 0; g++)
        if (avail >> g & 1) {
            set |= 1ull << g;
            n--;
        }
    return set;
}

/* The n GPUs of `from` that free soonest for `share` (ties: lowest ids), and
 * when the last of them does. */
uint64_t sched_soonest_gpus(const sched_input *in, const sched_decision *out,
                            const unsigned char *gone, uint64_t from, int n, int share,
                            double *at, sched_scratch *s)
{
    double free_at[SCHED_GPUS];
    for (int g = 0; g < SCHED_GPUS; g++)
        free_at[g] = from >> g & 1 ? sched_gpu_free_at(in, out, gone, g, share, s) : INFINITY;
    uint64_t set = 0;
    *at = in->now;
    for (int k = 0; k < n; k++) {
        int best = -1;
        for (int g = 0; g < SCHED_GPUS; g++)
            if ((from >> g & 1) && !(set >> g & 1) && (best < 0 || free_at[g] < free_at[best]))
                best = g;
        if (best < 0)
            return set;
        set |= 1ull << best;
        if (free_at[best] > *at)
            *at = free_at[best];
    }
    return set;
}
