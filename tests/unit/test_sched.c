/* The scheduler's decision (daemon/sched/schedule.c) as a table of cases: each
 * a queue (running and queued jobs), the machine, and what must be decided
 * for every job; then fair share, random queues against the rules'
 * invariants, and the usage's decay. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"
#include "testutil.h"

/* A case names only the inputs and expectations it sets; the rest are 0. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

enum { MAXJ = 12 };

/* A job in a case: R running, Q queued; what it holds or wants. */
#define MILLI(sh) ((int)((sh) * SCHED_WHOLE + 0.5))
/* Further fields (.time_limit, .owner...) may follow. ANY: any n GPUs of g. */
#define RUN(p, g, sh, c, t, ...)                                                         \
    {.running = 1, .priority = (p), .gpus = (g), .gpu_share = MILLI(sh), .cores = (c),     \
     .started_at = (t), __VA_ARGS__}
#define QUE(p, g, sh, c, ...)                                                            \
    {.priority = (p), .gpus = (g), .gpu_share = MILLI(sh), .cores = (c), __VA_ARGS__}
#define ANY(p, g, n, c, ...)                                                             \
    {.priority = (p), .gpus = (g), .ngpus = (n), .gpu_share = SCHED_WHOLE, .cores = (c),   \
     __VA_ARGS__}


/* What a job's decision must be: action, wait, the first blocker (-1: none)
 * and, when not 0, the GPUs it starts on. */
typedef struct expect {
    enum sched_action action;
    enum sched_wait wait;
    int blocker;
    uint64_t gpus;
} expect;
#define START_ON(g) {SCHED_START, SCHED_NOT_WAITING, -1, (g)}
#define BACKFILL_ON(g, past) {SCHED_START, SCHED_NOT_WAITING, (past), (g)}
#define START {SCHED_START, SCHED_NOT_WAITING, -1}
#define KEEP {SCHED_KEEP, SCHED_NOT_WAITING, -1}
#define WAIT(why, who) {SCHED_KEEP, (why), (who)}
#define PREEMPTED(for_job) {SCHED_PREEMPT, SCHED_NOT_WAITING, (for_job)}

typedef struct sched_case {
    const char *name;
    int ncores, preempt, one_at_a_time;
    uint64_t faulted;
    int njobs;
    sched_job jobs[MAXJ];
    expect want[MAXJ];
    /* The newer inputs, by name where a case sets them. */
    double now, min_run_s;
    int backfill, max_gpus, max_cores;
    uint64_t island; /* GPUs joined pairwise by links, as are the others among themselves */
} sched_case;

static const sched_case cases[] = {
    {"FIFO on one GPU: the older starts, the newer waits behind it", 4, 1, 0, 0, 2,
     {QUE(0, 1, 1, 0), QUE(0, 1, 1, 0)}, {START, WAIT(SCHED_DEVICES, 0)}},
    {"a higher priority starts first, even submitted later", 4, 1, 0, 0, 2,
     {QUE(0, 1, 1, 0), QUE(3, 1, 1, 0)}, {WAIT(SCHED_DEVICES, 1), START}},
    {"devices held by a running job of equal priority: wait, no preemption", 4, 1, 0, 0, 2,
     {RUN(0, 1, 1, 0, 5), QUE(0, 1, 1, 0)}, {KEEP, WAIT(SCHED_DEVICES, 0)}},
    {"a held job waits and keeps nothing from the next", 4, 1, 0, 0, 2,
     {{.held = 1, .gpus = 1, .gpu_share = SCHED_WHOLE}, QUE(0, 1, 1, 0)}, {WAIT(SCHED_HOLD, -1), START}},
    {"no starvation: a job wanting GPUs 0,1 keeps GPU 0 from a later one", 4, 1, 0, 0, 3,
     {RUN(0, 2, 1, 0, 1), QUE(0, 3, 1, 0), QUE(0, 1, 1, 0)},
     {KEEP, WAIT(SCHED_DEVICES, 0), WAIT(SCHED_QUEUE, 1)}},
    {"disjoint GPUs start together", 4, 1, 0, 0, 3,
     {QUE(0, 1, 1, 0), QUE(0, 2, 1, 0), QUE(0, 4, 1, 0)}, {START, START, START}},
    {"preemption: a higher priority stops the lower one on its GPU", 4, 1, 0, 0, 2,
     {RUN(0, 1, 1, 0, 5), QUE(2, 1, 1, 0)}, {PREEMPTED(1), WAIT(SCHED_STOPPING, 0)}},
    {"preemption off: it waits", 4, 0, 0, 0, 2,
     {RUN(0, 1, 1, 0, 5), QUE(2, 1, 1, 0)}, {KEEP, WAIT(SCHED_DEVICES, 0)}},
    {"the lowest priority is preempted first", 4, 1, 0, 0, 3,
     {RUN(0, 0, 0, 2, 1), RUN(-1, 0, 0, 2, 2), QUE(5, 0, 0, 2)},
     {KEEP, PREEMPTED(2), WAIT(SCHED_STOPPING, 1)}},
    {"at equal priority, the youngest run is preempted", 4, 1, 0, 0, 3,
     {RUN(0, 0, 0, 2, 1), RUN(0, 0, 0, 2, 5), QUE(5, 0, 0, 2)},
     {KEEP, PREEMPTED(2), WAIT(SCHED_STOPPING, 1)}},
    {"the fewest: one 3-core job rather than the youngest 1-core one as well", 4, 1, 0, 0, 3,
     {RUN(0, 0, 0, 1, 9), RUN(0, 0, 0, 3, 1), QUE(5, 0, 0, 3)},
     {KEEP, PREEMPTED(2), WAIT(SCHED_STOPPING, 1)}},
    {"no preemption when even all lower ones would not make room", 4, 1, 0, 0, 3,
     {RUN(9, 1, 1, 0, 1), RUN(0, 2, 1, 0, 1), QUE(5, 3, 1, 0)},
     {KEEP, KEEP, WAIT(SCHED_DEVICES, 0)}},
    {"a job that fits once a stopping job stops waits for it, preempting no more", 4, 1, 0, 0,
     3, {{.running = 1, .stopping = 1, .gpus = 1, .gpu_share = SCHED_WHOLE}, RUN(-5, 2, 1, 0, 9),
         QUE(5, 1, 1, 0)},
     {KEEP, KEEP, WAIT(SCHED_STOPPING, 0)}},
    {"two urgent jobs, one low job: the second waits behind the first", 4, 1, 0, 0, 3,
     {RUN(0, 1, 1, 0, 5), QUE(2, 1, 1, 0), QUE(2, 1, 1, 0)},
     {PREEMPTED(1), WAIT(SCHED_STOPPING, 0), WAIT(SCHED_QUEUE, 1)}},
    {"cpu shares that fit run at once", 4, 1, 0, 0, 3,
     {QUE(0, 0, 0, 2), QUE(0, 0, 0, 2), QUE(0, 0, 0, 1)},
     {START, START, WAIT(SCHED_DEVICES, 0)}},
    {"a whole-CPU job waits for a 1-core job, and keeps the CPU from later ones", 4, 1, 0, 0,
     3, {RUN(0, 0, 0, 1, 1), QUE(0, 0, 0, 4), QUE(0, 0, 0, 1)},
     {KEEP, WAIT(SCHED_DEVICES, 0), WAIT(SCHED_QUEUE, 1)}},
    {"GPU shares summing to 1 run together; more waits, a whole job too", 4, 1, 0, 0, 4,
     {QUE(0, 1, 0.5, 0), QUE(0, 1, 0.5, 0), QUE(0, 1, 0.25, 0), QUE(0, 2, 1, 0)},
     {START, START, WAIT(SCHED_DEVICES, 0), START}},
    {"thirds fit in one GPU as whole thousandths", 4, 1, 0, 0, 3,
     {QUE(0, 1, 1.0 / 3, 0), QUE(0, 1, 1.0 / 3, 0), QUE(0, 1, 1.0 / 3, 0)},
     {START, START, START}},
    {"a thousandth does not fit beside a whole GPU: compared exactly", 4, 1, 0, 0, 2,
     {RUN(0, 1, 1, 0, 1), QUE(0, 1, 0.001, 0)}, {KEEP, WAIT(SCHED_DEVICES, 0)}},
    {"0.333 three times leaves one thousandth: it fits, a second does not", 4, 1, 0, 0, 5,
     {RUN(0, 1, 0.333, 0, 1), RUN(0, 1, 0.333, 0, 1), RUN(0, 1, 0.333, 0, 1),
      QUE(0, 1, 0.001, 0), QUE(0, 1, 0.001, 0)},
     {KEEP, KEEP, KEEP, START, WAIT(SCHED_DEVICES, 0)}},
    {"a faulted GPU: its job waits and keeps nothing", 4, 1, 0, 2, 2,
     {QUE(0, 2, 1, 0), QUE(0, 1, 1, 0)}, {WAIT(SCHED_FAULTED, -1), START}},
    {"under MPI one job at a time", 4, 1, 1, 0, 2,
     {RUN(0, 1, 1, 0, 1), QUE(0, 2, 1, 0)}, {KEEP, WAIT(SCHED_ONE_AT_A_TIME, -1)}},
    {"any 2 GPUs: the lowest free ones without links", 4, 1, 0, 0, 2,
     {RUN(0, 1, 1, 0, 1), ANY(0, 0xf, 2, 0)}, {KEEP, START_ON(0x6)}},
    {"any 2 GPUs: a pair joined by NVLink before the lowest ids", 4, 1, 0, 0, 2,
     {RUN(0, 1, 1, 0, 1), ANY(0, 0xf, 2, 0)}, {KEEP, START_ON(0xc)}, .island = 0x3},
    {"any 3 of 4 with two free: it waits, and keeps the free ones", 4, 1, 0, 0, 4,
     {RUN(0, 3, 1, 0, 1), ANY(0, 0xf, 3, 0), ANY(0, 0xf, 1, 0), ANY(0, 0xf, 1, 0)},
     {KEEP, WAIT(SCHED_DEVICES, 0), WAIT(SCHED_QUEUE, 1), WAIT(SCHED_QUEUE, 1)}},
    {"backfill: a job that ends before the waiting 4-GPU job could start passes it", 4, 1, 0,
     0, 5, {RUN(0, 7, 1, 0, 0, .time_limit = 100), ANY(0, 0xf, 4, 0), ANY(0, 0xf, 1, 0, .time_limit = 50),
            ANY(0, 0xf, 1, 0, .time_limit = 200), ANY(0, 0xf, 1, 0)},
     {KEEP, WAIT(SCHED_DEVICES, 0), BACKFILL_ON(0x8, 1), WAIT(SCHED_QUEUE, 1),
      WAIT(SCHED_QUEUE, 1)}, .now = 10, .backfill = 1},
    {"backfill off: the short job waits too", 4, 1, 0, 0, 3,
     {RUN(0, 7, 1, 0, 0, .time_limit = 100), ANY(0, 0xf, 4, 0), ANY(0, 0xf, 1, 0, .time_limit = 50)},
     {KEEP, WAIT(SCHED_DEVICES, 0), WAIT(SCHED_QUEUE, 1)}, .now = 10},
    {"no backfill past a job held up by a run without a limit", 4, 1, 0, 0, 3,
     {RUN(0, 7, 1, 0, 0), ANY(0, 0xf, 4, 0), ANY(0, 0xf, 1, 0, .time_limit = 50)},
     {KEEP, WAIT(SCHED_DEVICES, 0), WAIT(SCHED_QUEUE, 1)}, .now = 10, .backfill = 1},
    {"backfill on cores: a 1-core job ending in time passes a whole-CPU job", 4, 1, 0, 0, 3,
     {RUN(0, 0, 0, 2, 0, .time_limit = 100), QUE(0, 0, 0, 4), QUE(0, 0, 0, 1, .time_limit = 90)},
     {KEEP, WAIT(SCHED_DEVICES, 0), BACKFILL_ON(0, 1)}, .now = 10, .backfill = 1},
    {"a run resumed from a preemption is not preempted within its minimum run", 4, 1, 0, 0,
     2, {RUN(0, 1, 1, 0, 5, .was_preempted = 1), QUE(2, 1, 1, 0)}, {KEEP, WAIT(SCHED_DEVICES, 0)},
     .now = 10, .min_run_s = 60},
    {"... and is past it", 4, 1, 0, 0, 2, {RUN(0, 1, 1, 0, 5, .was_preempted = 1), QUE(2, 1, 1, 0)},
     {PREEMPTED(1), WAIT(SCHED_STOPPING, 0)}, .now = 100, .min_run_s = 60},
    {"any GPU: the 1-GPU job is preempted, not the younger 4-GPU one", 4, 1, 0, 0, 3,
     {RUN(0, 0xf, 1, 0, 9), RUN(0, 0x10, 1, 0, 1), ANY(5, 0x1f, 1, 0)},
     {KEEP, PREEMPTED(2), WAIT(SCHED_STOPPING, 1)}},
    {"quota of 1 GPU: the owner's second waits, another owner's starts", 4, 1, 0, 0, 3,
     {RUN(0, 1, 1, 0, 1), QUE(0, 2, 1, 0), QUE(0, 2, 1, 0, .owner = 2)},
     {KEEP, WAIT(SCHED_QUOTA, 0), START}, .max_gpus = 1},
    {"quota of cores", 4, 1, 0, 0, 2, {RUN(0, 0, 0, 1, 1), QUE(0, 0, 0, 1)},
     {KEEP, WAIT(SCHED_QUOTA, 0)}, .max_cores = 1},
    {"a dependency not ended: it waits and keeps nothing", 4, 1, 0, 0, 2,
     {QUE(0, 1, 1, 0, .after_pending = 1), QUE(0, 1, 1, 0)}, {WAIT(SCHED_AFTER, -1), START}},
    {"a wait for host memory keeps nothing from a job that fits now", 4, 1, 0, 0, 2,
     {QUE(0, 0, 0, 4, .memory_wait = 1), QUE(0, 0, 0, 1)}, {WAIT(SCHED_MEMORY, -1), START}},
};

static int check_case(const sched_case *c)
{
    sched_input in = {.jobs = c->jobs, .njobs = c->njobs, .ncores = c->ncores,
                      .faulted = c->faulted, .one_at_a_time = c->one_at_a_time,
                      .preempt = c->preempt, .backfill = c->backfill, .now = c->now,
                      .min_run_s = c->min_run_s, .max_gpus_per_owner = c->max_gpus,
                      .max_cores_per_owner = c->max_cores};
    for (int g = 0; g < SCHED_GPUS; g++) /* the island, and the others, joined pairwise */
        in.links[g] = c->island ? (c->island >> g & 1 ? c->island : ~c->island) : 0;
    sched_decision out[MAXJ];
    int bad = sched_decide(&in, out) != 0;
    for (int i = 0; i < c->njobs && !bad; i++) {
        const expect *w = &c->want[i];
        const sched_decision *d = &out[i];
        int who = d->action == SCHED_PREEMPT ? d->preempted_for
                  : d->nblockers ? d->blockers[0] : -1;
        if (d->action != w->action || d->wait != w->wait || who != w->blocker ||
            (w->gpus && d->gpus != w->gpus)) {
            fprintf(stderr, "  job %d: action %d wait %d blocker %d gpus %#llx; want %d %d %d "
                    "%#llx\n", i, d->action, d->wait, who, (unsigned long long)d->gpus,
                    w->action, w->wait, w->blocker, (unsigned long long)w->gpus);
            bad = 1;
        }
    }
    return bad;
}

static void test_table(void)
{
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++)
        CHECK(check_case(&cases[k]) == 0, "%s", cases[k].name);
}

/* Fair share: one user's six older jobs and another's two newer, one CPU
 * free: the second user's first job starts (less recent use), their
 * second is next, and the first user's six wait behind it. */
static void test_fair_share(void)
{
    sched_job jobs[8];
    for (int i = 0; i < 8; i++)
        jobs[i] = (sched_job){.usage = i < 6 ? 3600 : 60,
                              .order = i, .cores = 2};
    sched_input in = {.jobs = jobs, .njobs = 8, .ncores = 2, .preempt = 1};
    sched_decision out[8];
    CHECK(sched_decide(&in, out) == 0, "decided");
    CHECK(out[6].action == SCHED_START, "the light user's first job starts");
    CHECK(out[7].wait == SCHED_DEVICES && out[7].blockers[0] == 6,
          "its second waits for the cores the first took, next in turn");
    for (int i = 0; i < 6; i++)
        CHECK(out[i].action == SCHED_KEEP && out[i].wait == SCHED_QUEUE &&
                  out[i].blockers[0] == 7, "job %d waits behind it", i);
    /* Equal use: submission order. */
    jobs[6].usage = jobs[7].usage = 3600;
    CHECK(sched_decide(&in, out) == 0 && out[0].action == SCHED_START, "equal use: the oldest");
    /* A job resuming a checkpoint goes first among equal priorities. */
    jobs[5].resuming = 1;
    CHECK(sched_decide(&in, out) == 0 && out[5].action == SCHED_START, "resuming first");
    jobs[3].priority = 1;
    CHECK(sched_decide(&in, out) == 0 && out[3].action == SCHED_START, "priority before all");
    /* Eligible oldest_first_s: before fair share and resuming. */
    jobs[3].priority = 0;
    jobs[6].usage = 60;
    for (int i = 0; i < 8; i++)
        jobs[i].eligible_s = i == 2 ? 100 : 10;
    in.now = 100, in.oldest_first_s = 50;
    CHECK(sched_decide(&in, out) == 0 && out[2].action == SCHED_START,
          "a heavy owner's job eligible past oldest_first_s goes first");
    /* Among aged jobs, the longest eligible first, not the first submitted:
     * job 4 resumed after a timeout has been eligible 120 s of its life. */
    jobs[4].eligible_s = 120;
    CHECK(sched_decide(&in, out) == 0 && out[4].action == SCHED_START &&
              out[2].action == SCHED_KEEP && out[2].blockers[0] == 4,
          "aged: the longest eligible first, then job 2");
    /* Job 0, the first submitted, was held: eligible 10 s only since its
     * release, it does not pass the light owner's job 6. */
    jobs[4].eligible_s = jobs[2].eligible_s = 10;
    jobs[5].resuming = 0;
    CHECK(sched_decide(&in, out) == 0 && out[6].action == SCHED_START &&
              out[0].action == SCHED_KEEP,
          "a released job's age counts from its release: fair share decides");
    jobs[5].resuming = 1;
    in.oldest_first_s = 0;
    CHECK(sched_decide(&in, out) == 0 && out[5].action == SCHED_START, "off: resuming first");
}

/* A random job for the random queues: on 4 GPUs (named, or any N of them,
 * shares in thousandths) or CPU cores; some with time limits. */
static sched_job random_job(int i, int ncores)
{
    const int gpu = test_uniform(0, 1) < 0.6;
    const int any = gpu && test_uniform(0, 1) < 0.5;
    sched_job j = {
        .running = test_uniform(0, 1) < 0.4,
        .held = test_uniform(0, 1) < 0.1,
        .resuming = test_uniform(0, 1) < 0.2,
        .after_pending = test_uniform(0, 1) < 0.1,
        .memory_wait = test_uniform(0, 1) < 0.05,
        .priority = (int)test_uniform(-2, 3),
        .order = i,
        .owner = (unsigned)test_uniform(0, 3),
        .started_at = test_uniform(0, 100),
        .was_preempted = test_uniform(0, 1) < 0.3,
        .time_limit = test_uniform(0, 1) < 0.7 ? test_uniform(1, 200) : 0,
        .usage = test_uniform(0, 10),
        .gpus = gpu ? (any ? 0xf : (uint64_t)test_uniform(1, 16)) : 0,
        .ngpus = any ? (int)test_uniform(1, 5) : 0,
        .gpu_share = test_uniform(0, 1) < 0.5 ? SCHED_WHOLE : (int)test_uniform(1, 1001),
        .cores = gpu ? 0 : (int)test_uniform(1, ncores + 1),
    };
    if (j.running) {
        j.held = j.after_pending = j.memory_wait = j.ngpus = 0;
        j.stopping = test_uniform(0, 1) < 0.15;
        if (any) /* a running job holds the GPUs it was given */
            j.gpus = (uint64_t)test_uniform(1, 16);
    }
    return j;
}

/* Whether the running jobs fit each other (a queue the store can be in). */
static int running_fit(const sched_job *jobs, int n, int ncores)
{
    int share[4] = {0}, cores = 0;
    for (int i = 0; i < n; i++) {
        if (!jobs[i].running)
            continue;
        for (int g = 0; g < 4; g++)
            if (jobs[i].gpus >> g & 1)
                share[g] += jobs[i].gpu_share;
        cores += jobs[i].cores;
    }
    for (int g = 0; g < 4; g++)
        if (share[g] > SCHED_WHOLE)
            return 0;
    return cores <= ncores;
}

/* Random queues against the rules' invariants: what starts, with what keeps
 * running, fits the machine exactly (thousandths) and each owner's quota;
 * no held, faulted, dependent or memory-waiting job starts; a job for any
 * N GPUs gets N of those it may take; every queued job that does not start
 * says why; a preempted job is running, past its minimum run, lower in
 * priority than the one it makes room for, and that one waits for it; a job
 * that starts on GPUs kept for a job before it ends, by its limit, before
 * that job could start. */
static void test_random(void)
{
    enum { N = 10, ROUNDS = 3000, NCORES = 8, MAX_GPUS = 3 };
    for (int round = 0; round < ROUNDS; round++) {
        sched_job jobs[N];
        for (int i = 0; i < N; i++)
            jobs[i] = random_job(i, NCORES);
        if (!running_fit(jobs, N, NCORES))
            continue;
        const int quota = round % 3 == 0;
        sched_input in = {.jobs = jobs, .njobs = N, .ncores = NCORES, .preempt = 1,
                          .backfill = round % 4 != 0, .now = 100, .min_run_s = 30,
                          .faulted = round % 7 == 0 ? 4 : 0,
                          .max_gpus_per_owner = quota ? MAX_GPUS : 0};
        for (int g = 0; g < 4; g++)
            in.links[g] = round % 2 ? 0x3u << (g & 2) : 0;
        sched_decision out[N];
        if (sched_decide(&in, out) != 0) {
            CHECK(0, "round %d: out of memory", round);
            return;
        }
        int held[4] = {0}, held_cores = 0, turns = 0, queued = 0;
        for (int i = 0; i < N; i++) {
            const sched_job *j = &jobs[i];
            const sched_decision *d = &out[i];
            const uint64_t gpus = j->running ? j->gpus : d->gpus;
            if (j->running || d->action == SCHED_START) {
                for (int g = 0; g < 4; g++)
                    if (gpus >> g & 1)
                        held[g] += j->gpu_share;
                held_cores += j->cores;
            }
            queued += !j->running;
            turns += !j->running && d->turn >= 0 && d->turn < N;
            if (d->action == SCHED_START) {
                CHECK(!j->running && !j->held && !j->after_pending && !j->memory_wait &&
                          !(gpus & in.faulted),
                      "round %d job %d: started though running, held, dependent, waiting "
                      "for memory or faulted", round, i);
                CHECK(j->ngpus ? __builtin_popcountll(gpus) == j->ngpus && !(gpus & ~j->gpus)
                               : gpus == j->gpus,
                      "round %d job %d: started on %#llx of %#llx (any %d)", round, i,
                      (unsigned long long)gpus, (unsigned long long)j->gpus, j->ngpus);
                /* Backfill: no start on GPUs kept for an earlier waiting job
                 * unless it ends by that job's start. */
                for (int k = 0; k < N; k++)
                    if (!jobs[k].running && out[k].action != SCHED_START &&
                        out[k].turn < d->turn && (out[k].gpus & gpus))
                        CHECK(j->time_limit > 0 && in.now + j->time_limit <= out[k].start_by,
                              "round %d job %d: on GPUs kept for %d, ends %g after its start "
                              "%g", round, i, k, in.now + j->time_limit, out[k].start_by);
            }
            if (!j->running && d->action != SCHED_START)
                CHECK(d->wait != SCHED_NOT_WAITING, "round %d job %d: waits without a why",
                      round, i);
            if (d->action == SCHED_PREEMPT) {
                const int f = d->preempted_for;
                CHECK(j->running && !j->stopping && f >= 0 && jobs[f].priority > j->priority &&
                          out[f].wait == SCHED_STOPPING &&
                          (!j->was_preempted || in.now - j->started_at >= in.min_run_s),
                      "round %d job %d: preempted wrongly (for %d)", round, i, f);
            }
        }
        if (quota)
            for (int i = 0; i < N; i++)
                if (out[i].action == SCHED_START) {
                    long sum = 0;
                    for (int k = 0; k < N; k++)
                        if (jobs[k].owner == jobs[i].owner &&
                            (jobs[k].running || out[k].action == SCHED_START))
                            sum += (long)__builtin_popcountll(jobs[k].running ? jobs[k].gpus
                                                                             : out[k].gpus) *
                                   jobs[k].gpu_share;
                    CHECK(sum <= MAX_GPUS * SCHED_WHOLE, "round %d job %d: owner %u holds %ld "
                          "thousandths, over the quota", round, i, jobs[i].owner, sum);
                }
        for (int g = 0; g < 4; g++)
            CHECK(held[g] <= SCHED_WHOLE, "round %d: GPU %d over-shared (%d)", round, g,
                  held[g]);
        CHECK(held_cores <= NCORES, "round %d: %d cores of %d", round, held_cores, NCORES);
        CHECK(turns == queued, "round %d: %d of %d queued jobs have a turn", round, turns, queued);
    }
}

static void test_usage_decay(void)
{
    CHECK_CLOSE(sched_usage_decay(100, 3600, 3600, 0), 50, 1e-9, 0, "halved in a half-life");
    CHECK_CLOSE(sched_usage_decay(100, 7200, 3600, 0), 25, 1e-9, 0, "quartered in two");
    CHECK_CLOSE(sched_usage_decay(0, 3600, 3600, 10), 10 * 0.7071067811865476, 1e-9, 0,
                "used over the interval counts from its midpoint");
    CHECK_CLOSE(sched_usage_decay(100, 0, 3600, 5), 105, 1e-9, 0, "no time: added");
    CHECK_CLOSE(sched_usage_decay(100, 50, 0, 5), 5, 1e-9, 0, "no half-life: the last only");
}

int main(void)
{
    test_init("sched");
    test_table();
    test_fair_share();
    test_random();
    test_usage_decay();
    return test_main_end();
}
