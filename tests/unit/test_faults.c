/* A job never outlives its own failure: one replica of three fails (or hangs)
 * at a chosen point of an outer iteration (PARLE_FAULT_REPLICA) and the whole
 * run ends within seconds, the replica and step named in the error, whatever
 * the others were doing. A cancel ends a job whose replica is stuck; a
 * thread that never starts ends the started ones; Parle at learning rates 2
 * to 10 ends, done or failed. With L 21 the replicas take turns on the 2
 * cores (step_schedule.h): a failure or hang in a turn that another replica
 * waits for ends the job the same way. Each run is bounded by RUN_LIMIT_S; meson's
 * timeout catches a true hang. The load phase holds data_load_job until its
 * stop flag is set; the park phase holds a running job until it is stopped. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "comm.h"
#include "fault.h"
#include "runner.h"
#include "testjob.h"

/* The injected out-of-memory asks for 1 PiB: under ASan and TSan that must
 * fail as malloc does, not abort the test. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }
const char *__tsan_default_options(void);
const char *__tsan_default_options(void) { return "allocator_may_return_null=1"; }

static const double RUN_LIMIT_S = 20.0;

/* 3 MLP replicas, 3 epochs; 512 training images: 16 outer iterations per
 * epoch at batch 32. */
static void base_config(job_config *cfg)
{
    test_synthetic_job(cfg, "mlp", 3, 3, test_seed() % 100000);
    cfg->data.test_limit = 128;
    cfg->log_every = 1000;
}

typedef struct outcome {
    int rc;
    run_result res;
    char err[512];
    double seconds;
} outcome;

/* One run with PARLE_FAULT_REPLICA = fault (NULL: none). */
static outcome run_with(const job_config *cfg, const char *fault, const char *ckpt_dir,
                        volatile int *stop)
{
    outcome o = {0};
    dataset tr, te;
    if (data_load_job(cfg, &tr, &te, NULL, o.err, sizeof o.err) != 0) {
        o.rc = -2;
        return o;
    }
    if (fault)
        setenv("PARLE_FAULT_REPLICA", fault, 1);
    else
        unsetenv("PARLE_FAULT_REPLICA");
    int cores[2] = {0, 1};
    run_hooks hooks = {.stop = stop, .checkpoint_dir = ckpt_dir};
    double t0 = comm_now_s();
    run_devices where = {.cores = cores, .ncores = 2};
    o.rc = run_job(cfg, &tr, &te, &where, &hooks, &o.res, o.err, sizeof o.err);
    o.seconds = comm_now_s() - t0;
    unsetenv("PARLE_FAULT_REPLICA");
    dataset_free(&tr);
    dataset_free(&te);
    return o;
}

/* L: the outer iteration's steps (0: the base config's, too few for turns). */
static void expect_failure(int L, const char *fault, const char *ckpt_dir, const char *want1,
                           const char *want2)
{
    job_config cfg;
    base_config(&cfg);
    if (L)
        cfg.algorithm.L = L;
    outcome o = run_with(&cfg, fault, ckpt_dir, NULL);
    CHECK(o.rc == -1, "%s: the run did not fail (rc %d)", fault, o.rc);
    CHECK(o.seconds < RUN_LIMIT_S, "%s: took %.1f s to fail", fault, o.seconds);
    CHECK(strstr(o.err, want1) && strstr(o.err, want2), "%s: error lacks \"%s\"/\"%s\": %s",
          fault, want1, want2, o.err);
    printf("%-22s -> failed in %.2f s: %s\n", fault, o.seconds, o.err);
}

typedef struct delayed_stop { volatile int *stop; int value; double after_s; } delayed_stop;

static void *stop_later(void *p)
{
    delayed_stop *d = p;
    usleep((useconds_t)(d->after_s * 1e6));
    __atomic_store_n(d->stop, d->value, __ATOMIC_RELAXED);
    return NULL;
}

typedef struct released { const char *file; double after_s; } released;

/* Makes the release file after a while. */
static void *release_later(void *p)
{
    released *d = p;
    usleep((useconds_t)(d->after_s * 1e6));
    FILE *f = fopen(d->file, "w");
    if (f)
        fclose(f);
    return NULL;
}

/* The load phase: parsed, striking the K-th load whatever the rank; the
 * first load with a stop flag, held, ends once the stop is set, with
 * nothing loaded; a load with no stop flag is not held, nor the second; a
 * stop set before the load ends it at once. */
static void test_load_phase(void)
{
    fault_point fp;
    char err[256];
    CHECK(fault_parse("0:load:1", &fp, err, sizeof err) == 0 && fp.phase == FAULT_LOAD,
          "0:load:1: %s", err);
    CHECK(fault_strikes(&fp, 0, FAULT_LOAD, 1, 0) && fault_strikes(&fp, 2, FAULT_LOAD, 1, 3) &&
              !fault_strikes(&fp, 0, FAULT_LOAD, 2, 0) && !fault_strikes(&fp, 0, FAULT_STEP, 1, 1),
          "the load phase strikes the first load, on any rank, and nothing else");
    CHECK(strcmp(fault_phase_name(FAULT_LOAD), "load") == 0, "phase name");
    CHECK(fault_parse("0:load", &fp, err, sizeof err) == -1, "0:load without K was accepted");

    job_config cfg;
    base_config(&cfg);
    dataset tr, te;
    volatile int stop = 0;
    pthread_t t;
    delayed_stop ds = {&stop, RUN_STOP, 0.3};
    setenv("PARLE_FAULT_REPLICA", "0:load:1", 1);
    pthread_create(&t, NULL, stop_later, &ds);
    double t0 = comm_now_s();
    int rc = data_load_job(&cfg, &tr, &te, &stop, err, sizeof err);
    double seconds = comm_now_s() - t0;
    pthread_join(t, NULL);
    CHECK(rc == -1 && strcmp(err, DATA_STOPPED) == 0, "a held load: rc %d: %s", rc, err);
    CHECK(seconds >= 0.25 && seconds < RUN_LIMIT_S, "a held load ended after %.2f s", seconds);
    CHECK(!tr.images && !tr.labels && !te.images && !te.labels, "a stopped load kept data");
    printf("load held, cancelled -> ended in %.2f s: %s\n", seconds, err);

    rc = data_load_job(&cfg, &tr, &te, NULL, err, sizeof err);
    CHECK(rc == 0 && tr.n > 0, "a load without a stop flag was held or failed: %s", err);
    dataset_free(&tr);
    dataset_free(&te);
    stop = 0;
    rc = data_load_job(&cfg, &tr, &te, &stop, err, sizeof err);
    CHECK(rc == 0 && tr.n > 0, "the second load was held or failed: %s", err);
    dataset_free(&tr);
    dataset_free(&te);
    unsetenv("PARLE_FAULT_REPLICA");

    stop = RUN_STOP_CHECKPOINT;
    rc = data_load_job(&cfg, &tr, &te, &stop, err, sizeof err);
    CHECK(rc == -1 && strcmp(err, DATA_STOPPED) == 0 && !tr.images && !te.images,
          "a load asked to stop before it began: rc %d: %s", rc, err);
}

/* The park phase, before any other job with a stop flag runs here: the
 * first such job waits once replica 0 has reported step 8, until a
 * checkpointing stop ends it as at any boundary (stopped, not failed); the
 * second is not the one chosen and runs to its end; the third, parked,
 * goes on to its end once its release file is made. */
static void test_park_phase(void)
{
    job_config cfg;
    base_config(&cfg);
    cfg.log_every = 4;
    volatile int stop = 0;
    pthread_t t;
    delayed_stop ds = {&stop, RUN_STOP_CHECKPOINT, 0.5};
    pthread_create(&t, NULL, stop_later, &ds);
    outcome o = run_with(&cfg, "0:park:1:8", NULL, &stop);
    pthread_join(t, NULL);
    CHECK(o.rc == 0 && o.res.stopped && o.res.epochs_done == 0,
          "a parked job, stopped: rc %d, stopped %d, epochs %d: %s", o.rc, o.res.stopped,
          o.res.epochs_done, o.err);
    /* Stopped, epoch 0: it waited parked for the stop (a parked job never
     * ends on its own); how long the run's clock saw of the 0.5 s depends
     * on how slowly the run starts (ThreadSanitizer: 0.39 s). */
    CHECK(o.seconds < RUN_LIMIT_S, "parked for %.2f s", o.seconds);
    printf("parked after step 8, stopped after 0.5 s -> ended in %.2f s\n", o.seconds);
    stop = 0;
    o = run_with(&cfg, "0:park:1:8", NULL, &stop);
    CHECK(o.rc == 0 && !o.res.stopped && o.res.epochs_done == 3,
          "the second job: rc %d, stopped %d, epochs %d: %s", o.rc, o.res.stopped,
          o.res.epochs_done, o.err);

    char dir[] = "/tmp/parle-test-park-XXXXXX", file[64];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp failed");
    snprintf(file, sizeof file, "%s/release", dir);
    setenv("PARLE_FAULT_RELEASE", file, 1);
    released r = {file, 0.5};
    pthread_create(&t, NULL, release_later, &r);
    o = run_with(&cfg, "0:park:3:8", NULL, &stop);
    pthread_join(t, NULL);
    unsetenv("PARLE_FAULT_RELEASE");
    CHECK(o.rc == 0 && !o.res.stopped && o.res.epochs_done == 3,
          "a released job: rc %d, stopped %d, epochs %d: %s", o.rc, o.res.stopped,
          o.res.epochs_done, o.err);
    CHECK(o.seconds >= 0.45 && o.seconds < RUN_LIMIT_S, "parked until released for %.2f s",
          o.seconds);
    printf("parked after step 8, released after 0.5 s -> done in %.2f s\n", o.seconds);
    CHECK(unlink(file) == 0 && rmdir(dir) == 0, "cleanup");
}

int main(void)
{
    test_init("faults");
    test_park_phase();
    test_load_phase();
    char dir[] = "/tmp/parle-test-faults-XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp failed");

    /* Every phase of an outer iteration, on a replica other than 0 and on 0. */
    expect_failure(0, "1:step:2:2", NULL, "replica 1", "step 5");
    expect_failure(0, "0:step:1:1", NULL, "replica 0", "step 1");
    expect_failure(0, "2:sync:3", NULL, "replica 2", "sync of outer iteration 3");
    expect_failure(0, "0:eval:16", NULL, "replica 0", "evaluation after outer iteration 16");
    expect_failure(0, "2:eval:16", NULL, "replica 2", "(step 48)");
    expect_failure(0, "1:checkpoint:16", dir, "replica 1", "checkpoint after outer iteration 16");
    expect_failure(0, "2:start:1", NULL, "replica thread 2 of 3", "could not start");

    /* A stuck replica: the others wait for it at the sync until the deadline. */
    job_config cfg;
    base_config(&cfg);
    cfg.comm.timeout_s = 0.5;
    outcome o = run_with(&cfg, "1:hang:2:1", NULL, NULL);
    CHECK(o.rc == -1 && strstr(o.err, "replica 1 did not reach the all-reduce") &&
              strstr(o.err, "step 4"),
          "a stuck replica: rc %d, %s", o.rc, o.err);
    CHECK(o.seconds < RUN_LIMIT_S, "the watchdog took %.1f s", o.seconds);
    printf("stuck replica, 0.5 s deadline -> failed in %.2f s: %s\n", o.seconds, o.err);

    /* Turns: replica 1 fails or hangs in its first turn (steps 1-11 of 21,
     * on the second core), which replica 2 waits for. */
    expect_failure(21, "1:step:2:2", NULL, "replica 1", "step 23");
    base_config(&cfg);
    cfg.algorithm.L = 21;
    cfg.comm.timeout_s = 0.5;
    o = run_with(&cfg, "1:hang:2:1", NULL, NULL);
    CHECK(o.rc == -1 && strstr(o.err, "did not reach the all-reduce"),
          "a stuck replica taking turns: rc %d, %s", o.rc, o.err);
    CHECK(o.seconds < RUN_LIMIT_S, "the watchdog took %.1f s with turns", o.seconds);
    printf("stuck replica taking turns -> failed in %.2f s: %s\n", o.seconds, o.err);

    /* The same stuck replica, the default deadline, and a cancel. */
    base_config(&cfg);
    volatile int stop = 0;
    pthread_t t;
    delayed_stop ds = {&stop, RUN_STOP, 0.5};
    pthread_create(&t, NULL, stop_later, &ds);
    o = run_with(&cfg, "1:hang:2:1", NULL, &stop);
    pthread_join(t, NULL);
    CHECK(o.rc == 0 && o.res.stopped && o.res.cancelled, "cancel with a stuck replica: rc %d "
          "stopped %d cancelled %d: %s", o.rc, o.res.stopped, o.res.cancelled, o.err);
    CHECK(o.seconds < RUN_LIMIT_S, "the cancel took %.1f s", o.seconds);
    printf("stuck replica, cancelled -> ended in %.2f s\n", o.seconds);

    /* A shutdown's checkpoint request cannot complete with a stuck replica;
     * its grace running out (RUN_STOP_NOW) still ends the job, not cancelled. */
    stop = 0;
    ds = (delayed_stop){&stop, RUN_STOP_CHECKPOINT | RUN_STOP_NOW, 0.5};
    pthread_create(&t, NULL, stop_later, &ds);
    o = run_with(&cfg, "1:hang:2:1", dir, &stop);
    pthread_join(t, NULL);
    CHECK(o.rc == 0 && o.res.stopped && !o.res.cancelled, "stop now: rc %d stopped %d "
          "cancelled %d: %s", o.rc, o.res.stopped, o.res.cancelled, o.err);

    /* Diverging Parle: every learning rate ends, one way or the other. */
    for (int lr = 2; lr <= 10; lr += 2) {
        base_config(&cfg);
        cfg.algorithm.L = 5;
        cfg.optim.lr = lr;
        cfg.epochs = 2;
        o = run_with(&cfg, NULL, NULL, NULL);
        CHECK(o.rc == 0 || (o.rc == -1 && strstr(o.err, "replica")), "lr %d: rc %d: %s", lr,
              o.rc, o.err);
        CHECK(o.seconds < RUN_LIMIT_S, "lr %d took %.1f s", lr, o.seconds);
        printf("lr %2d -> %s in %.2f s %s\n", lr, o.rc == 0 ? "done" : "failed", o.seconds,
               o.rc == 0 ? "" : o.err);
    }

    /* A device fault (backend_fail_device, injected on the CPU): the job fails
     * with the context's error and the result names the device, for the
     * daemon to mark faulted. Without one, the result names none. */
    base_config(&cfg);
    o = run_with(&cfg, "2:device:5:1", NULL, NULL);
    CHECK(o.rc == -1 && strstr(o.err, "replica 2: step ") &&
          strstr(o.err, "injected device fault"), "device fault: rc %d %s", o.rc, o.err);
    CHECK(strncmp(o.res.device_fault, "cpu: ", 5) == 0 &&
          strstr(o.res.device_fault, "injected device fault"), "device fault: result \"%s\"",
          o.res.device_fault);
    o = run_with(&cfg, "2:step:5:1", NULL, NULL);
    CHECK(o.rc == -1 && !o.res.device_fault[0], "a plain failure named a device fault: \"%s\"",
          o.res.device_fault);

    /* Out of device memory mid-job (a real allocation of 1 PiB): the job
     * fails naming the device and the bytes; no device fault. */
    o = run_with(&cfg, "1:oom:3:2", NULL, NULL);
    CHECK(o.rc == -1 && strstr(o.err, "replica 1: step ") &&
          strstr(o.err, "cpu: out of memory allocating 1125899906842624 bytes") &&
          !o.res.device_fault[0], "oom: rc %d %s (device fault \"%s\")", o.rc, o.err,
          o.res.device_fault);

    /* A fault spec the runner cannot read is an error, not ignored. */
    base_config(&cfg);
    o = run_with(&cfg, "1:explode:2", NULL, NULL);
    CHECK(o.rc == -1 && strstr(o.err, "PARLE_FAULT_REPLICA"), "bad spec: rc %d %s", o.rc, o.err);

    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "cleanup of %s", dir);
    return test_main_end();
}
