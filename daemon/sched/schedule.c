#include "schedule.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sched_impl.h"

/* What holding jobs hold, and what waiting jobs keep from those after them. */
typedef struct pool {
    int share[SCHED_GPUS];    /* summed thousandths held on each GPU */
    int cores;                /* cores held */
    int running;
    uint64_t kept;            /* GPUs kept for a waiting job: keeper[g] */
    int keeper[SCHED_GPUS];
    int cpu_keeper;           /* -1, or the waiting job that keeps the free cores */
} pool;

/* One decision's state beside its output. The jobs that hold devices
 * (running, or started by it) are listed in holders, and what those not
 * gone hold is kept in `live`: a queued job's turn looks at them, not at
 * the whole queue, so that a decision costs O(queue log queue) beside its
 * holders. */
typedef struct decide_ctx {
    const sched_input *in;
    sched_decision *out;
    unsigned char *gone;      /* running jobs stopping, or preempted now */
    int *work;
    int *holders, nholders;
    sched_scratch scratch;
    pool p;
    pool live;
} decide_ctx;

int sched_share_milli(double share)
{
    if (!(share > 0))
        return 0;
    return share >= 1 ? SCHED_WHOLE : (int)lround(share * SCHED_WHOLE);
}

/* How many GPUs job j needs. */
static int gpus_wanted(const sched_job *j)
{
    return j->ngpus ? j->ngpus : __builtin_popcountll(j->gpus);
}

/* The GPUs of `from` where `share` thousandths fit beside what p holds. */
static uint64_t gpus_fitting(const pool *p, uint64_t from, int share)
{
    uint64_t fit = 0;
    for (uint64_t m = from; m; m &= m - 1) /* each GPU of from, lowest first */
        if (p->share[__builtin_ctzll(m)] + share <= SCHED_WHOLE)
            fit |= m & -m;
    return fit;
}

/* Whether j's devices fit beside what `p` holds, using only GPUs of `from`. */
static int devices_fit(const sched_input *in, const pool *p, const sched_job *j, uint64_t from)
{
    uint64_t fit = gpus_fitting(p, from, j->gpu_share);
    int gpus_ok = j->ngpus ? __builtin_popcountll(fit) >= j->ngpus : (j->gpus & ~fit) == 0;
    return gpus_ok && (j->cores == 0 || p->cores + j->cores <= in->ncores);
}

static void hold(pool *p, const sched_job *j, uint64_t gpus, int sign)
{
    for (uint64_t m = gpus; m; m &= m - 1)
        p->share[__builtin_ctzll(m)] += sign * j->gpu_share;
    p->cores += sign * j->cores;
    p->running += sign;
}

static void add_blocker(sched_decision *d, int who)
{
    if (d->nblockers < SCHED_BLOCKERS)
        d->blockers[d->nblockers] = who;
    d->nblockers++;
}

/* Holder i (a running job) gone, or back (sign -1, 1), in c->live. */
static void set_gone(decide_ctx *c, int i, int is_gone)
{
    if (c->gone[i] == is_gone)
        return;
    c->gone[i] = (unsigned char)is_gone;
    hold(&c->live, &c->in->jobs[i], sched_held_gpus(c->in, c->out, i), is_gone ? -1 : 1);
}

/* Whether queued job j has been eligible long enough to rank before fair share. */
static int aged(const sched_input *in, const sched_job *j)
{
    return in->oldest_first_s > 0 && j->eligible_s >= in->oldest_first_s;
}

/* Priority, then aged (the oldest first), then resuming, then the owner's
 * use, then submission. */
static int by_turn(const void *a, const void *b, void *arg)
{
    const sched_input *in = arg;
    const sched_job *x = in->jobs + *(const int *)a;
    const sched_job *y = in->jobs + *(const int *)b;
    if (x->priority != y->priority)
        return x->priority > y->priority ? -1 : 1;
    if (aged(in, x) != aged(in, y))
        return aged(in, x) ? -1 : 1;
    if (aged(in, x) && x->eligible_s != y->eligible_s)
        return x->eligible_s > y->eligible_s ? -1 : 1;
    if (aged(in, x))
        return (x->order > y->order) - (x->order < y->order);
    if (x->resuming != y->resuming)
        return x->resuming ? -1 : 1;
    if (x->usage != y->usage)
        return x->usage < y->usage ? -1 : 1;
    return (x->order > y->order) - (x->order < y->order);
}

/* What a running job holds, in GPU thousandths (cores count as whole GPUs:
 * one kind or the other is held). */
static long weight(const sched_job *j)
{
    return (long)__builtin_popcountll(j->gpus) * j->gpu_share + (long)j->cores * SCHED_WHOLE;
}

/* Lowest priority first, then the least held, then the youngest run. */
static int by_victim(const void *a, const void *b, void *jobs)
{
    const sched_job *x = (const sched_job *)jobs + *(const int *)a;
    const sched_job *y = (const sched_job *)jobs + *(const int *)b;
    if (x->priority != y->priority)
        return x->priority < y->priority ? -1 : 1;
    if (weight(x) != weight(y))
        return weight(x) < weight(y) ? -1 : 1;
    return (x->started_at < y->started_at) - (x->started_at > y->started_at);
}

/* Whether running job r holds a device that j (using GPUs of `from`) could use. */
static int overlaps(const sched_job *r, uint64_t r_gpus, const sched_job *j, uint64_t from)
{
    return (r_gpus & from) || (r->cores && j->cores);
}

/* Whether running job r may be preempted now: a run that resumed a
 * preemption is exempt for its minimum run. */
static int past_min_run(const sched_input *in, const sched_job *r)
{
    return !r->was_preempted || in->now - r->started_at >= in->min_run_s;
}

/* Queued job q waits for devices (of `from`): does it fit once the stopping
 * jobs stop (then it waits for them), or once some lower-priority running
 * jobs are preempted too (marked in out, and gone)? 1 if q now waits for
 * stopping jobs, 0 if not. */
static int try_preempt(decide_ctx *c, int q, uint64_t from)
{
    const sched_input *in = c->in;
    const sched_job *j = &in->jobs[q];
    unsigned char *gone = c->gone;
    int *work = c->work;
    int fits = devices_fit(in, &c->live, j, from);
    int n = 0;
    if (!fits && in->preempt) {
        for (int h = 0; h < c->nholders; h++) {
            const int i = c->holders[h];
            const sched_job *r = &in->jobs[i];
            if (r->running && !gone[i] && r->priority < j->priority &&
                overlaps(r, r->gpus, j, from) && past_min_run(in, r))
                work[n++] = i;
        }
        qsort_r(work, (size_t)n, sizeof *work, by_victim, (void *)in->jobs);
        int taken = 0;
        while (taken < n && !fits) {
            set_gone(c, work[taken++], 1);
            fits = devices_fit(in, &c->live, j, from);
        }
        if (!fits) { /* even all of them would not do: preempt none */
            for (int k = 0; k < taken; k++)
                set_gone(c, work[k], 0);
            taken = 0;
        }
        /* The fewest: give back, latest taken first, any not needed. */
        for (int k = taken - 1; k >= 0 && fits; k--) {
            set_gone(c, work[k], 0);
            if (!devices_fit(in, &c->live, j, from))
                set_gone(c, work[k], 1);
        }
        n = taken;
    }
    if (!fits)
        return 0;
    for (int k = 0; k < n; k++)
        if (gone[work[k]]) {
            c->out[work[k]].action = SCHED_PREEMPT;
            c->out[work[k]].preempted_for = q;
        }
    c->out[q].wait = SCHED_STOPPING;
    for (int h = 0; h < c->nholders; h++) {
        const int i = c->holders[h];
        if (in->jobs[i].running && gone[i] && overlaps(&in->jobs[i], in->jobs[i].gpus, j, from))
            add_blocker(&c->out[q], i);
    }
    return 1;
}

/* When a job behind keeper k (on what k keeps) could start: once k has run
 * its limit from its own start. */
static double after_keeper(const decide_ctx *c, int k)
{
    const double limit = c->in->jobs[k].time_limit;
    return limit > 0 ? c->out[k].start_by + limit : INFINITY;
}

/* Keep q's devices from every job after it: those it names, or the N that
 * free soonest among `from`, and the free cores; say when they free. */
static void keep(decide_ctx *c, const sched_job *j, int q, uint64_t from)
{
    pool *p = &c->p;
    sched_decision *d = &c->out[q];
    double at = c->in->now;
    uint64_t mine = 0;
    if (j->ngpus) {
        uint64_t open = from & ~p->kept;
        if (__builtin_popcountll(open) >= j->ngpus)
            mine = sched_soonest_gpus(c->in, c->out, c->gone, open, j->ngpus, j->gpu_share,
                                      &at, &c->scratch);
        else
            at = INFINITY;
    } else {
        for (uint64_t m = j->gpus; m; m &= m - 1) {
            const int g = __builtin_ctzll(m);
            double free_at = p->kept >> g & 1
                                 ? after_keeper(c, p->keeper[g])
                                 : sched_gpu_free_at(c->in, c->out, c->gone, g, j->gpu_share,
                                                     &c->scratch);
            at = fmax(at, free_at);
            mine |= (j->gpus & ~p->kept) & (1ull << g);
        }
    }
    for (uint64_t m = mine; m; m &= m - 1)
        p->keeper[__builtin_ctzll(m)] = q;
    p->kept |= mine;
    d->gpus = mine;
    if (j->cores) {
        at = fmax(at, p->cpu_keeper < 0
                          ? sched_cores_free_at(c->in, c->out, c->gone, j->cores, &c->scratch)
                          : after_keeper(c, p->cpu_keeper));
        if (p->cpu_keeper < 0)
            p->cpu_keeper = q;
    }
    d->start_by = at;
}

/* Whether q may use a device kept for keeper k: backfill, when k's start
 * is known (every job it waits for has a limit) and q, with a limit, ends
 * by then. */
static int may_pass(const decide_ctx *c, const sched_job *j, int k)
{
    return c->in->backfill && j->time_limit > 0 && isfinite(c->out[k].start_by) &&
           c->in->now + j->time_limit <= c->out[k].start_by;
}

/* The owner's running (and starting) jobs hold their quota with j's
 * devices added: 1, blockers set. */
static int over_quota(const decide_ctx *c, int q)
{
    const sched_input *in = c->in;
    const sched_job *j = &in->jobs[q];
    if (in->max_gpus_per_owner <= 0 && in->max_cores_per_owner <= 0)
        return 0;
    long gpus = (long)gpus_wanted(j) * j->gpu_share, cores = j->cores;
    for (int h = 0; h < c->nholders; h++) {
        const int i = c->holders[h];
        if (in->jobs[i].owner == j->owner) {
            gpus += (long)__builtin_popcountll(sched_held_gpus(in, c->out, i)) *
                    in->jobs[i].gpu_share;
            cores += in->jobs[i].cores;
        }
    }
    const int over = (in->max_gpus_per_owner > 0 && gpus > (long)in->max_gpus_per_owner * SCHED_WHOLE) ||
                     (in->max_cores_per_owner > 0 && cores > in->max_cores_per_owner);
    for (int h = 0; h < c->nholders && over; h++)
        if (in->jobs[c->holders[h]].owner == j->owner)
            add_blocker(&c->out[q], c->holders[h]);
    return over;
}

/* Why q waits before devices are looked at, or SCHED_NOT_WAITING. */
static enum sched_wait not_eligible(decide_ctx *c, int q)
{
    const sched_input *in = c->in;
    const sched_job *j = &in->jobs[q];
    if (j->held)
        return SCHED_HOLD;
    if (j->after_pending)
        return SCHED_AFTER;
    if (j->ngpus ? __builtin_popcountll(j->gpus & ~in->faulted) < j->ngpus
                 : (j->gpus & in->faulted) != 0)
        return SCHED_FAULTED;
    if (over_quota(c, q))
        return SCHED_QUOTA;
    if (j->memory_wait)
        return SCHED_MEMORY;
    return SCHED_NOT_WAITING;
}

/* Queued job q's turn: start it, or say why it waits. */
static void decide_queued(decide_ctx *c, int q)
{
    const sched_input *in = c->in;
    const sched_job *j = &in->jobs[q];
    sched_decision *d = &c->out[q];
    pool *p = &c->p;
    d->wait = not_eligible(c, q);
    if (d->wait != SCHED_NOT_WAITING)
        return;
    const uint64_t from = j->gpus & ~in->faulted;
    /* The kept GPUs q may not pass (backfill), and the first who keeps one. */
    uint64_t barred = 0;
    int keeper = -1;
    for (uint64_t m = p->kept & from; m; m &= m - 1) {
        const int g = __builtin_ctzll(m);
        if (!may_pass(c, j, p->keeper[g])) {
            barred |= 1ull << g;
            keeper = keeper < 0 ? p->keeper[g] : keeper;
        }
    }
    const int cores_barred = j->cores && p->cpu_keeper >= 0 && !may_pass(c, j, p->cpu_keeper);
    if (cores_barred && keeper < 0)
        keeper = p->cpu_keeper;
    const uint64_t open = from & ~barred;
    /* Kept devices bar q when it would start but for them (for any N GPUs:
     * N fit now, but not N that are not kept) or it names one. */
    const int fit_open = __builtin_popcountll(gpus_fitting(p, open, j->gpu_share));
    const int fit_all = __builtin_popcountll(gpus_fitting(p, from, j->gpu_share));
    const int keep_bars = cores_barred ||
                          (j->ngpus ? __builtin_popcountll(open) < j->ngpus ||
                                          (fit_all >= j->ngpus && fit_open < j->ngpus)
                                    : barred != 0);
    if (keep_bars) {
        d->wait = SCHED_QUEUE;
        add_blocker(d, keeper);
    } else if (!devices_fit(in, p, j, open)) {
        if (!try_preempt(c, q, open)) {
            d->wait = SCHED_DEVICES;
            for (int h = 0; h < c->nholders; h++) {
                const int i = c->holders[h];
                if (overlaps(&in->jobs[i], sched_held_gpus(in, c->out, i), j, open))
                    add_blocker(d, i);
            }
        }
    } else if (in->one_at_a_time && p->running > 0) {
        d->wait = SCHED_ONE_AT_A_TIME;
    } else {
        uint64_t fit = gpus_fitting(p, open, j->gpu_share);
        uint64_t gpus = j->gpus;
        if (j->ngpus) { /* GPUs nobody keeps first, then those it may pass */
            gpus = sched_pick_gpus(fit & ~p->kept, j->ngpus, in->links);
            if (!gpus)
                gpus = sched_pick_gpus(fit, j->ngpus, in->links);
        }
        d->action = SCHED_START;
        d->gpus = gpus;
        int by = -1;
        for (int g = 0; g < SCHED_GPUS && by < 0; g++)
            if ((gpus & p->kept) >> g & 1)
                by = p->keeper[g];
        if (by < 0 && j->cores && p->cpu_keeper >= 0)
            by = p->cpu_keeper;
        if (by >= 0) {
            d->backfilled = 1;
            add_blocker(d, by);
        }
        hold(p, j, gpus, 1);
        hold(&c->live, j, gpus, 1);
        c->holders[c->nholders++] = q;
        return;
    }
    keep(c, j, q, open);
}

int sched_decide(const sched_input *in, sched_decision *out)
{
    const int n = in->njobs;
    const size_t m = (size_t)(n ? n : 1);
    int *turn = malloc(m * 4 * sizeof *turn);
    unsigned char *gone = calloc(m * 2, 1);
    double *end = malloc(m * sizeof *end);
    if (!turn || !gone || !end) {
        free(turn);
        free(gone);
        free(end);
        return -1;
    }
    decide_ctx c = {.in = in, .out = out, .gone = gone, .work = turn + n,
                    .holders = turn + 3 * n,
                    .scratch = {.end = end, .held = turn + 2 * n, .counted = gone + n}};
    c.p.cpu_keeper = -1;
    int queued = 0;
    for (int i = 0; i < n; i++) {
        out[i] = (sched_decision){.action = SCHED_KEEP, .preempted_for = -1, .turn = -1,
                                  .start_by = INFINITY};
        if (in->jobs[i].running) {
            hold(&c.p, &in->jobs[i], in->jobs[i].gpus, 1);
            c.holders[c.nholders++] = i;
            if (in->jobs[i].stopping)
                gone[i] = 1;
            else
                hold(&c.live, &in->jobs[i], in->jobs[i].gpus, 1);
        } else {
            turn[queued++] = i;
        }
    }
    qsort_r(turn, (size_t)queued, sizeof *turn, by_turn, (void *)in);
    for (int k = 0; k < queued; k++) {
        out[turn[k]].turn = k;
        decide_queued(&c, turn[k]);
    }
    free(turn);
    free(gone);
    free(end);
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
