/* The scheduler on a simulated 8-GPU box: the real decision
 * (daemon/sched/schedule.h) replays a synthetic trace shaped like published
 * multi-tenant GPU cluster traces (most jobs take 1 GPU, a few take 8, run
 * times log-normal from minutes to days, several owners), against plain
 * FIFO. It reports utilisation, each owner's mean and worst wait, Jain's
 * fairness index of GPU-hours and preemptions per job (bench/README.md).
 *
 *   sched_sim [--jobs N] [--seed S] [--load RHO] [--check]
 *
 * --check exits 1 unless the new scheduler's utilisation is at least 15%
 * above FIFO's and no owner's worst wait is above FIFO's (the unit suite
 * runs a short trace so). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"

enum { GPUS = 8, OWNERS = 4, MAX_JOBS = 20000 };
enum policy { FIFO, TODAY, NEW, POLICIES };
static const char *const policy_names[] = {"FIFO", "today", "new"};

typedef struct trace_job {
    double submit, work, limit; /* seconds */
    int ngpus, owner, priority;
    uint64_t named;             /* the GPU ids a user names today */
} trace_job;

typedef struct sim_job {
    int state;                  /* 0 not yet submitted, 1 queued, 2 running, 3 done */
    double remaining, run_start, waited, queued_since;
    uint64_t gpus;
    int preemptions, resuming, was_preempted;
} sim_job;

typedef struct result {
    double utilisation, makespan_h, mean_wait_h[OWNERS], worst_wait_h[OWNERS], jain;
    double preemptions_per_job;
} result;

static uint64_t rng_state;
static double oldest_first_s = 86400;
static double uniform(void) /* splitmix64, in (0, 1) */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return ((double)((z ^ (z >> 31)) >> 11) + 0.5) / 9007199254740992.0;
}
static double normal(void)
{
    return sqrt(-2 * log(uniform())) * cos(2 * M_PI * uniform());
}

/* The trace's parameters (bench/README.md lists them). */
#define RUN_MEDIAN_S 7200.0
#define RUN_SIGMA 1.5
#define RUN_MIN_S 300.0
#define RUN_MAX_S (5 * 86400.0)
static const double owner_weight[OWNERS] = {0.4, 0.3, 0.2, 0.1};
static const int size_of[4] = {1, 2, 4, 8};
static const double size_weight[4] = {0.75, 0.10, 0.08, 0.07};

static int pick(const double *w, int n)
{
    double u = uniform(), acc = 0;
    for (int i = 0; i < n - 1; i++)
        if (u < (acc += w[i]))
            return i;
    return n - 1;
}

/* n jobs whose work, spread over the arrival window, is `load` times the
 * box's capacity in that window; arrivals uniform in it (Poisson). */
static double make_trace(trace_job *t, int n, double load)
{
    double gpu_s = 0;
    for (int i = 0; i < n; i++) {
        trace_job *j = &t[i];
        j->ngpus = size_of[pick(size_weight, 4)];
        j->owner = pick(owner_weight, OWNERS);
        j->priority = uniform() < 0.05;
        j->work = fmin(RUN_MAX_S, fmax(RUN_MIN_S, RUN_MEDIAN_S * exp(RUN_SIGMA * normal())));
        /* Users overestimate: 1 to 3 times the run, in whole quarter hours. */
        j->limit = ceil(j->work * (1 + 2 * uniform()) / 900) * 900;
        /* Today a user names GPU ids: an aligned block of the size, at random. */
        int block = (int)(uniform() * (GPUS / j->ngpus));
        j->named = ((1ull << j->ngpus) - 1) << (block * j->ngpus);
        gpu_s += j->work * j->ngpus;
    }
    const double window = gpu_s / (GPUS * load);
    for (int i = 0; i < n; i++)
        t[i].submit = uniform() * window;
    for (int i = 1; i < n; i++) /* in submission order */
        for (int k = i; k > 0 && t[k].submit < t[k - 1].submit; k--) {
            trace_job x = t[k];
            t[k] = t[k - 1];
            t[k - 1] = x;
        }
    return window;
}

static uint64_t lowest_free(uint64_t busy, int n)
{
    uint64_t set = 0;
    for (int g = 0; g < GPUS && n > 0; g++)
        if (!(busy >> g & 1))
            set |= 1ull << g, n--;
    return n ? 0 : set;
}

/* Strict FIFO: the oldest queued job starts on the lowest free GPUs once
 * enough are free; nothing passes it. */
static int fifo_pass(const trace_job *t, sim_job *s, int n, double now, uint64_t *busy)
{
    int started = 0;
    for (int i = 0; i < n; i++) {
        if (s[i].state != 1)
            continue;
        uint64_t set = lowest_free(*busy, t[i].ngpus);
        if (!set)
            break;
        s[i].state = 2, s[i].gpus = set, s[i].run_start = now;
        s[i].waited += now - s[i].queued_since;
        *busy |= set;
        started++;
    }
    return started;
}

/* One pass of the real decision; 1 if it started or preempted a job. */
static int decide_pass(enum policy p, const trace_job *t, sim_job *s, int n, double now,
                       const double *usage, uint64_t *busy, sched_job *view,
                       sched_decision *out, int *idx)
{
    int m = 0;
    for (int i = 0; i < n; i++) {
        if (s[i].state != 1 && s[i].state != 2)
            continue;
        const int running = s[i].state == 2, any = p == NEW && !running;
        idx[m] = i;
        view[m++] = (sched_job){
            .running = running, .resuming = s[i].resuming, .priority = t[i].priority,
            .order = i, .owner = (unsigned)t[i].owner, .usage = usage[t[i].owner],
            .eligible_s = running ? 0 : now - t[i].submit, /* never held */
            .started_at = s[i].run_start, .was_preempted = s[i].was_preempted,
            .time_limit = p == NEW ? t[i].limit : 0,
            .gpus = running ? s[i].gpus : any ? (1ull << GPUS) - 1 : t[i].named,
            .ngpus = any ? t[i].ngpus : 0, .gpu_share = SCHED_WHOLE};
    }
    sched_input in = {.jobs = view, .njobs = m, .ncores = 0, .preempt = 1,
                      .backfill = p == NEW, .now = now, .min_run_s = p == NEW ? 3600 : 0,
                      .oldest_first_s = p == NEW ? oldest_first_s : 0};
    for (int g = 0; g < GPUS; g++) /* two NVLink islands of four */
        in.links[g] = 0xfull << (g & 4);
    if (sched_decide(&in, out) != 0) {
        fprintf(stderr, "sched_sim: out of memory\n");
        exit(2);
    }
    int acted = 0;
    for (int k = 0; k < m; k++) {
        sim_job *j = &s[idx[k]];
        if (out[k].action == SCHED_PREEMPT) {
            j->remaining -= now - j->run_start;
            j->state = 1, j->resuming = 1, j->preemptions++, j->queued_since = now;
            *busy &= ~j->gpus;
            acted = 1;
        }
    }
    for (int k = 0; k < m; k++) {
        sim_job *j = &s[idx[k]];
        if (out[k].action != SCHED_START)
            continue;
        if (out[k].gpus & *busy) {
            fprintf(stderr, "sched_sim: GPUs %#llx given twice\n",
                    (unsigned long long)(out[k].gpus & *busy));
            exit(2);
        }
        j->was_preempted = j->resuming;
        j->state = 2, j->gpus = out[k].gpus, j->run_start = now, j->resuming = 0;
        j->waited += now - j->queued_since;
        *busy |= j->gpus;
        acted = 1;
    }
    return acted;
}

static result simulate(enum policy p, const trace_job *t, int n, double window)
{
    sim_job *s = calloc((size_t)n, sizeof *s);
    sched_job *view = malloc((size_t)n * sizeof *view);
    sched_decision *out = malloc((size_t)n * sizeof *out);
    int *idx = malloc((size_t)n * sizeof *idx);
    if (!s || !view || !out || !idx) {
        fprintf(stderr, "sched_sim: out of memory\n");
        exit(2);
    }
    double usage[OWNERS] = {0}, gpu_h[OWNERS] = {0}, busy_s = 0, now = 0;
    uint64_t busy = 0;
    int next = 0, done = 0;
    for (int i = 0; i < n; i++)
        s[i].remaining = t[i].work;
    while (done < n) {
        double at = next < n ? t[next].submit : INFINITY;
        for (int i = 0; i < n; i++)
            if (s[i].state == 2)
                at = fmin(at, s[i].run_start + s[i].remaining);
        /* Fair share's use and the box's, up to the event. */
        const double in_window = now < window ? fmin(at, window) - now : 0;
        double used[OWNERS] = {0};
        for (int i = 0; i < n; i++)
            if (s[i].state == 2) {
                used[t[i].owner] += (at - now) * t[i].ngpus;
                gpu_h[t[i].owner] += in_window * t[i].ngpus / 3600;
            }
        for (int o = 0; o < OWNERS; o++)
            usage[o] = sched_usage_decay(usage[o], at - now, 86400, used[o]);
        busy_s += in_window * __builtin_popcountll(busy);
        now = at;
        for (int i = 0; i < n; i++)
            if (s[i].state == 2 && s[i].run_start + s[i].remaining <= now + 1e-6) {
                s[i].state = 3, busy &= ~s[i].gpus, done++;
            }
        for (; next < n && t[next].submit <= now; next++)
            s[next].state = 1, s[next].queued_since = now;
        if (p == FIFO)
            fifo_pass(t, s, n, now, &busy);
        else
            for (int pass = 0; pass < 8 && decide_pass(p, t, s, n, now, usage, &busy, view,
                                                        out, idx); pass++)
                ;
    }
    result r = {.utilisation = busy_s / (GPUS * window), .makespan_h = now / 3600};
    int count[OWNERS] = {0}, preemptions = 0;
    for (int i = 0; i < n; i++) {
        const int o = t[i].owner;
        r.mean_wait_h[o] += s[i].waited / 3600;
        r.worst_wait_h[o] = fmax(r.worst_wait_h[o], s[i].waited / 3600);
        count[o]++;
        preemptions += s[i].preemptions;
    }
    double sum = 0, sq = 0;
    for (int o = 0; o < OWNERS; o++) {
        r.mean_wait_h[o] /= count[o] ? count[o] : 1;
        sum += gpu_h[o], sq += gpu_h[o] * gpu_h[o];
    }
    r.jain = sq > 0 ? sum * sum / (OWNERS * sq) : 1;
    r.preemptions_per_job = (double)preemptions / n;
    free(s), free(view), free(out), free(idx);
    return r;
}

int main(int argc, char **argv)
{
    int n = 2000, check = 0;
    double load = 1.0;
    rng_state = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--jobs") && i + 1 < argc)
            n = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            rng_state = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--load") && i + 1 < argc)
            load = atof(argv[++i]);
        else if (!strcmp(argv[i], "--oldest-first") && i + 1 < argc)
            oldest_first_s = atof(argv[++i]);
        else if (!strcmp(argv[i], "--check"))
            check = 1;
        else {
            fprintf(stderr, "usage: sched_sim [--jobs N] [--seed S] [--load RHO] [--check]\n");
            return 2;
        }
    }
    if (n < 1 || n > MAX_JOBS || !(load > 0)) {
        fprintf(stderr, "sched_sim: --jobs in 1..%d, --load > 0\n", MAX_JOBS);
        return 2;
    }
    trace_job *t = malloc((size_t)n * sizeof *t);
    if (!t)
        return 2;
    const double window = make_trace(t, n, load);
    printf("%d jobs over %.1f days, offered load %.2f of %d GPUs\n", n, window / 86400, load,
           GPUS);
    printf("%-6s %6s %9s %6s %8s  mean / worst wait per owner (h)\n", "policy", "util",
           "makespan", "Jain", "preempt");
    result r[POLICIES];
    for (int p = 0; p < POLICIES; p++) {
        r[p] = simulate((enum policy)p, t, n, window);
        printf("%-6s %5.1f%% %8.1fd %6.3f %8.3f ", policy_names[p], 100 * r[p].utilisation,
               r[p].makespan_h / 24, r[p].jain, r[p].preemptions_per_job);
        for (int o = 0; o < OWNERS; o++)
            printf(" %6.1f/%-6.1f", r[p].mean_wait_h[o], r[p].worst_wait_h[o]);
        printf("\n");
    }
    const int util_ok = r[NEW].utilisation >= 1.15 * r[FIFO].utilisation;
    int waits_ok = 1;
    for (int o = 0; o < OWNERS; o++)
        waits_ok &= r[NEW].worst_wait_h[o] <= r[FIFO].worst_wait_h[o];
    printf("new vs FIFO: utilisation %+.1f%% (target +15%%), every owner's worst wait %s "
           "FIFO's\n", 100 * (r[NEW].utilisation / r[FIFO].utilisation - 1),
           waits_ok ? "within" : "NOT within");
    free(t);
    return check && !(util_ok && waits_ok);
}
