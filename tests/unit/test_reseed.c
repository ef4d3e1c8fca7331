/* algorithm.on_replica_failure "reseed" (docs/architecture.md "Failure
 * model"): a replica that fails is restored from its rule's consensus and
 * the job goes on. For every rule, one replica of four fails in each phase
 * of a step (a NaN loss, an injected failure, an out-of-memory) and in the
 * sync (PARLE_FAULT_REPLICA): the job ends done, the re-seed logged with the
 * replica, the step and the cause, counted once in the progress events.
 * Past max_reseeds it fails as before; the count survives a checkpoint and a
 * resume. A genuine divergence (a learning rate of 6.75, replicas started
 * apart) fails the job without re-seeding and finishes with it. Runs under
 * ThreadSanitizer too (the 'threads' suite): the failure agreement adds no
 * race and no hang; the jobs are as small as reach every meeting point (54
 * jobs, about 1 s of CPU in release). The error a re-seeded job reaches on real data
 * is the learning test lenet-parle-reseed-fmnist's (tests/learning/). */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "testjob.h"

/* The injected out-of-memory asks for 1 PiB: under ASan and TSan that must
 * fail as malloc does, not abort the test. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }
const char *__tsan_default_options(void);
const char *__tsan_default_options(void) { return "allocator_may_return_null=1"; }

/* What a run's hooks saw (the replica threads write, under the lock). */
typedef struct seen {
    pthread_mutex_t lock;
    long reseeds, resumed_reseeds;
    int resumes, stop_after_epoch;
    volatile int stop;
    double last_error;
    char log[4096];
} seen;

static void on_event(void *user, const run_event *ev)
{
    seen *s = user;
    pthread_mutex_lock(&s->lock);
    if (ev->kind == RUN_EV_PROGRESS)
        s->reseeds = ev->reseeds;
    if (ev->kind == RUN_EV_RESUME)
        s->resumed_reseeds = ev->reseeds, s->resumes++;
    if (ev->kind == RUN_EV_EVAL) {
        s->last_error = ev->test_error;
        if (s->stop_after_epoch > 0 && (int)ev->epoch == s->stop_after_epoch)
            __atomic_store_n(&s->stop, RUN_STOP_CHECKPOINT, __ATOMIC_RELAXED);
    }
    if (ev->kind == RUN_EV_LOG && strstr(ev->message, "re-seeded")) {
        size_t at = strlen(s->log);
        snprintf(s->log + at, sizeof s->log - at, "%s\n", ev->message);
    }
    pthread_mutex_unlock(&s->lock);
}

typedef struct outcome {
    int rc;
    char err[512];
    seen s;
} outcome;

static void run(const job_config *cfg, const char *fault, const char *ckpt, int stop_after,
                outcome *o)
{
    memset(o, 0, sizeof *o);
    pthread_mutex_init(&o->s.lock, NULL);
    o->s.stop_after_epoch = stop_after;
    o->s.last_error = NAN;
    dataset tr, te;
    if (data_load_job(cfg, &tr, &te, NULL, o->err, sizeof o->err) != 0) {
        o->rc = -2;
        return;
    }
    if (fault)
        setenv("PARLE_FAULT_REPLICA", fault, 1);
    int cores[2] = {0, 1};
    run_devices where = {.cores = cores, .ncores = 2};
    run_hooks hooks = {.on_event = on_event, .user = &o->s, .stop = &o->s.stop,
                       .checkpoint_dir = ckpt};
    run_result res;
    o->rc = run_job(cfg, &tr, &te, &where, &hooks, &res, o->err, sizeof o->err);
    unsetenv("PARLE_FAULT_REPLICA");
    dataset_free(&tr);
    dataset_free(&te);
    pthread_mutex_destroy(&o->s.lock);
}

/* 4 MLP replicas of `rule` on 64 synthetic images, batch 32 (2 batches a
 * pass), 2 epochs of 2 outer iterations of 2 steps (of a pass for the
 * asynchronous rules), evaluated at the epochs' ends on 64 test images,
 * re-seeding: the least that reaches outer iteration 2 and the meeting
 * points after it, for every rule. */
static void rule_config(job_config *cfg, const char *rule)
{
    test_synthetic_job(cfg, "mlp", 4, 2, 7);
    snprintf(cfg->algorithm.name, sizeof cfg->algorithm.name, "%s", rule);
    cfg->data.train_limit = 64;
    cfg->data.test_limit = 64;
    cfg->eval.every_passes = 1000;
    cfg->log_every = 1000;
    cfg->algorithm.group_size = 4;
    cfg->algorithm.tau = 2;
    cfg->algorithm.L = coupling_find(rule)->inner_steps ? 2 : 0;
    strcpy(cfg->algorithm.on_replica_failure, "reseed");
}

/* Outer iteration 2, its first step (every rule has one), or its sync. */
static const struct { const char *fault, *cause; } faults[] = {
    {"1:nan:2:1", "replica 1: loss is NaN at step"},
    {"2:step:2:1", "replica 2: injected failure at step"},
    {"3:oom:2:1", "replica 3: step"},
    {"0:sync:2", "replica 0: injected failure in the sync of outer iteration 2"},
};

static void test_every_rule_every_phase(void)
{
    for (size_t i = 0; coupling_rule_at(i); i++) {
        const coupling_rule *rule = coupling_rule_at(i);
        if (rule->fixed[0].path && strcmp(rule->fixed[0].path, "algorithm.replicas") == 0)
            continue; /* sgd, entropy-sgd: one replica, refused by the validator */
        for (int variant = 0; variant < (strcmp(rule->name, "easgd") == 0 ? 2 : 1); variant++) {
            for (size_t f = 0; f < sizeof faults / sizeof faults[0]; f++) {
                job_config cfg;
                rule_config(&cfg, rule->name);
                strcpy(cfg.algorithm.variant, variant ? "async" : "sync");
                outcome o;
                run(&cfg, faults[f].fault, NULL, 0, &o);
                int want = faults[f].fault[0] - '0';
                char who[32];
                snprintf(who, sizeof who, "replica %d re-seeded", want);
                CHECK(o.rc == 0, "%s%s %s: rc %d: %s", rule->name, variant ? " async" : "",
                      faults[f].fault, o.rc, o.err);
                CHECK(o.s.reseeds == 1 && strstr(o.s.log, who) &&
                          strstr(o.s.log, faults[f].cause) && strstr(o.s.log, "at step "),
                      "%s%s %s: %ld re-seeds, log: %s", rule->name, variant ? " async" : "",
                      faults[f].fault, o.s.reseeds, o.s.log);
                CHECK(isfinite(o.s.last_error), "%s %s: the master's error is %g", rule->name,
                      faults[f].fault, o.s.last_error);
            }
            printf("%-12s%s: re-seeded after a NaN, a failed step, an OOM and a failed sync\n",
                   rule->name, variant ? " async" : "");
        }
    }
}

/* max_reseeds 0: the first failure fails the job, with its cause. */
static void test_past_the_limit(void)
{
    job_config cfg;
    rule_config(&cfg, "parle");
    cfg.algorithm.max_reseeds = 0;
    outcome o;
    run(&cfg, "1:nan:2:1", NULL, 0, &o);
    CHECK(o.rc == -1 && strstr(o.err, "replica 1: loss is NaN") &&
              strstr(o.err, "past algorithm.max_reseeds = 0"),
          "past the limit: rc %d: %s", o.rc, o.err);
    printf("max_reseeds 0 -> failed: %s\n", o.err);
    strcpy(cfg.algorithm.on_replica_failure, "fail");
    run(&cfg, "1:nan:2:1", NULL, 0, &o);
    CHECK(o.rc == -1 && strstr(o.err, "replica 1: loss is NaN") && !strstr(o.err, "re-seed"),
          "fail: rc %d: %s", o.rc, o.err);
}

/* Stopped with a checkpoint after epoch 1 (one re-seed in it), resumed,
 * another failure in epoch 2: the count goes on from the checkpoint's. */
static void test_resume_keeps_count(const char *dir)
{
    job_config cfg;
    rule_config(&cfg, "parle");
    outcome o;
    run(&cfg, "1:nan:2:1", dir, 1, &o);
    CHECK(o.rc == 0 && o.s.reseeds == 1, "first run: rc %d, %ld re-seeds: %s", o.rc,
          o.s.reseeds, o.err);
    run(&cfg, "2:nan:4:1", dir, 0, &o); /* epoch 2 */
    CHECK(o.rc == 0 && o.s.resumes == 1 && o.s.resumed_reseeds == 1 && o.s.reseeds == 2,
          "resumed: rc %d, %d resumes from %ld re-seeds, now %ld: %s", o.rc, o.s.resumes,
          o.s.resumed_reseeds, o.s.reseeds, o.err);
    printf("resumed from a checkpoint with 1 re-seed, one more: %ld\n", o.s.reseeds);
}

/* A genuine divergence: Parle, replicas started apart, lr 6.75 (inner and
 * outer), one epoch on 512 images (16 outer iterations of 2 steps). Without re-seeding a replica's loss goes
 * non-finite and the job fails; with it, replicas that diverge (at
 * different steps) are re-seeded and the job ends. */
static void test_real_divergence(void)
{
    job_config cfg;
    rule_config(&cfg, "parle");
    cfg.data.train_limit = 512;
    strcpy(cfg.algorithm.init, "independent");
    cfg.epochs = 1;
    cfg.optim.lr = 6.75;
    cfg.algorithm.max_reseeds = 100;
    strcpy(cfg.algorithm.on_replica_failure, "fail");
    outcome o;
    run(&cfg, NULL, NULL, 0, &o);
    CHECK(o.rc == -1 && strstr(o.err, "loss is"), "lr 6.75 without re-seeding: rc %d: %s",
          o.rc, o.err);
    printf("lr 6.75, no re-seeding -> failed: %s\n", o.err);
    strcpy(cfg.algorithm.on_replica_failure, "reseed");
    run(&cfg, NULL, NULL, 0, &o);
    CHECK(o.rc == 0 && o.s.reseeds > 0, "lr 6.75 re-seeding: rc %d, %ld re-seeds: %s", o.rc,
          o.s.reseeds, o.err);
    printf("lr 6.75, re-seeding -> done, %ld re-seeds:\n%s", o.s.reseeds, o.s.log);
}

int main(void)
{
    test_init("reseed");
    test_every_rule_every_phase();
    test_past_the_limit();
    char dir[] = "/tmp/parle-test-reseed-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp failed");
    test_resume_keeps_count(dir);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "cleanup of %s", dir);
    test_real_divergence();
    return test_main_end();
}
