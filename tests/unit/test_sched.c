/* The scheduler's decision (daemon/sched/schedule.c) as a table of cases: each
 * a queue (running and queued jobs), the machine, and what must be decided
 * for every job; then fair share, random queues against the rules'
 * invariants, and the usage's decay. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"
#include "testutil.h"

enum { MAXJ = 12 };

/* A job in a case: R running, Q queued; what it holds or wants. */
#define RUN(p, g, sh, c, t) \
    {.running = 1, .priority = (p), .gpus = (g), .gpu_share = (sh), .cores = (c), .started_at = (t)}
#define QUE(p, g, sh, c) {.priority = (p), .gpus = (g), .gpu_share = (sh), .cores = (c)}

/* What a job's decision must be: action, wait, and the first blocker (-1: none). */
typedef struct expect {
    enum sched_action action;
    enum sched_wait wait;
    int blocker;
} expect;
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
} sched_case;

static const sched_case cases[] = {
    {"FIFO on one GPU: the older starts, the newer waits behind it", 4, 1, 0, 0, 2,
     {QUE(0, 1, 1, 0), QUE(0, 1, 1, 0)}, {START, WAIT(SCHED_DEVICES, 0)}},
    {"a higher priority starts first, even submitted later", 4, 1, 0, 0, 2,
     {QUE(0, 1, 1, 0), QUE(3, 1, 1, 0)}, {WAIT(SCHED_DEVICES, 1), START}},
    {"devices held by a running job of equal priority: wait, no preemption", 4, 1, 0, 0, 2,
     {RUN(0, 1, 1, 0, 5), QUE(0, 1, 1, 0)}, {KEEP, WAIT(SCHED_DEVICES, 0)}},
    {"a held job waits and keeps nothing from the next", 4, 1, 0, 0, 2,
     {{.held = 1, .gpus = 1, .gpu_share = 1}, QUE(0, 1, 1, 0)}, {WAIT(SCHED_HOLD, -1), START}},
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
     3, {{.running = 1, .stopping = 1, .gpus = 1, .gpu_share = 1}, RUN(-5, 2, 1, 0, 9),
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
    {"thirds fit in one GPU despite rounding", 4, 1, 0, 0, 3,
     {QUE(0, 1, 1.0 / 3, 0), QUE(0, 1, 1.0 / 3, 0), QUE(0, 1, 1.0 / 3, 0)},
     {START, START, START}},
    {"a faulted GPU: its job waits and keeps nothing", 4, 1, 0, 2, 2,
     {QUE(0, 2, 1, 0), QUE(0, 1, 1, 0)}, {WAIT(SCHED_FAULTED, -1), START}},
    {"under MPI one job at a time", 4, 1, 1, 0, 2,
     {RUN(0, 1, 1, 0, 1), QUE(0, 2, 1, 0)}, {KEEP, WAIT(SCHED_ONE_AT_A_TIME, -1)}},
};

static int check_case(const sched_case *c)
{
    sched_input in = {.jobs = c->jobs, .njobs = c->njobs, .ncores = c->ncores,
                      .faulted = c->faulted, .one_at_a_time = c->one_at_a_time,
                      .preempt = c->preempt};
    sched_decision out[MAXJ];
    int bad = sched_decide(&in, out) != 0;
    for (int i = 0; i < c->njobs && !bad; i++) {
        const expect *w = &c->want[i];
        const sched_decision *d = &out[i];
        int who = d->action == SCHED_PREEMPT ? d->preempted_for
                  : d->nblockers ? d->blockers[0] : -1;
        if (d->action != w->action || d->wait != w->wait || who != w->blocker) {
            fprintf(stderr, "  job %d: action %d wait %d blocker %d; want %d %d %d\n", i,
                    d->action, d->wait, who, w->action, w->wait, w->blocker);
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
}

/* Random queues: what starts, with what keeps running, fits the machine;
 * no held or faulted job starts; every queued job that does not start says
 * why; a preempted job is running, lower in priority than the one it makes
 * room for, and that one waits for it. */
static void test_random(void)
{
    enum { N = 10, ROUNDS = 3000, NCORES = 8 };
    for (int round = 0; round < ROUNDS; round++) {
        sched_job jobs[N];
        for (int i = 0; i < N; i++) {
            const int gpu = test_uniform(0, 1) < 0.6;
            jobs[i] = (sched_job){
                .running = test_uniform(0, 1) < 0.4,
                .held = test_uniform(0, 1) < 0.1,
                .resuming = test_uniform(0, 1) < 0.2,
                .priority = (int)test_uniform(-2, 3),
                .order = i,
                .started_at = test_uniform(0, 100),
                .usage = test_uniform(0, 10),
                .gpus = gpu ? (uint64_t)test_uniform(1, 8) : 0,
                .gpu_share = test_uniform(0, 1) < 0.5 ? 1.0 : 0.25 * (int)test_uniform(1, 4),
                .cores = gpu ? 0 : (int)test_uniform(1, NCORES + 1),
            };
            if (jobs[i].running)
                jobs[i].held = 0, jobs[i].stopping = test_uniform(0, 1) < 0.15;
        }
        /* Running jobs must fit each other to begin with. */
        double share[3] = {0};
        int cores = 0, ok = 1;
        for (int i = 0; i < N; i++) {
            if (!jobs[i].running)
                continue;
            for (int g = 0; g < 3; g++)
                if (jobs[i].gpus >> g & 1)
                    ok &= (share[g] += jobs[i].gpu_share) <= 1 + 1e-9;
            ok &= (cores += jobs[i].cores) <= NCORES;
        }
        if (!ok)
            continue;
        sched_input in = {.jobs = jobs, .njobs = N, .ncores = NCORES, .preempt = 1,
                          .faulted = round % 7 == 0 ? 4 : 0};
        sched_decision out[N];
        if (sched_decide(&in, out) != 0) {
            CHECK(0, "round %d: out of memory", round);
            return;
        }
        double held[3] = {0};
        int held_cores = 0, turns = 0, queued = 0;
        for (int i = 0; i < N; i++) {
            const sched_job *j = &jobs[i];
            const sched_decision *d = &out[i];
            if (j->running || d->action == SCHED_START) {
                for (int g = 0; g < 3; g++)
                    if (j->gpus >> g & 1)
                        held[g] += j->gpu_share;
                held_cores += j->cores;
            }
            queued += !j->running;
            turns += !j->running && d->turn >= 0 && d->turn < N;
            if (d->action == SCHED_START) {
                CHECK(!j->running && !j->held && !(j->gpus & in.faulted),
                      "round %d job %d: started though running, held or faulted", round, i);
            }
            if (!j->running && d->action != SCHED_START)
                CHECK(d->wait != SCHED_NOT_WAITING, "round %d job %d: waits without a why",
                      round, i);
            if (d->action == SCHED_PREEMPT) {
                const int f = d->preempted_for;
                CHECK(j->running && !j->stopping && f >= 0 && jobs[f].priority > j->priority &&
                          out[f].wait == SCHED_STOPPING,
                      "round %d job %d: preempted wrongly (for %d)", round, i, f);
            }
        }
        for (int g = 0; g < 3; g++)
            CHECK(held[g] <= 1 + 1e-9, "round %d: GPU %d over-shared (%g)", round, g, held[g]);
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
