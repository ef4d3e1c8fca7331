/* The runner end to end on the synthetic set with an MLP: a Parle run with
 * 2 replica threads learns, is reproducible bit for bit for a seed, depends
 * on the seed, stops when asked, and fails cleanly on a diverging loss; 3
 * replicas taking turns on 2 cores (step_schedule.h) end where the same
 * replicas pinned to one core do, also when stopped and resumed. */
#include <stdlib.h>
#include <string.h>

#include "runner.h"
#include "testjob.h"

/* Parle with 2 MLP replicas, one epoch. */
static void base_config(job_config *cfg, uint64_t seed)
{
    test_synthetic_job(cfg, "mlp", 2, 1, seed);
    cfg->model.dropout = 0.1f;
    strcpy(cfg->algorithm.init, "independent");
    cfg->log_every = 10;
}

/* 3 replicas, L 7, on 2 cores take turns (11 steps of wall time an outer
 * iteration for 10.5); on 1 core they are pinned to it and time-sliced. The
 * steps are the same, so the masters must be too; a run stopped after its
 * first epoch and resumed starts its turns mid-job. */
static void check_turns(uint64_t seed)
{
    char err[512], root[] = "/tmp/parle-turns-XXXXXX", dir[300], cmd[340];
    job_config cfg;
    run_result res;
    test_synthetic_job(&cfg, "mlp", 3, 2, seed);
    cfg.algorithm.L = 7;
    int core0[1] = {0}, cores01[2] = {0, 1};
    run_devices one = {.cores = core0, .ncores = 1}, two = {.cores = cores01, .ncores = 2};
    test_watch pinned = {0}, turns = {0}, stopped = {.stop_after_eval = 1}, resumed = {0};
    CHECK(test_run_job(&cfg, &one, NULL, &pinned, &res, err, sizeof err) == 0, "%s", err);
    CHECK(test_run_job(&cfg, &two, NULL, &turns, &res, err, sizeof err) == 0, "%s", err);
    CHECK(pinned.final && turns.final && memcmp(pinned.final, turns.final,
                                                pinned.n * sizeof(float)) == 0,
          "3 replicas taking turns on 2 cores differ from the same on 1 core");
    CHECK(mkdtemp(root) != NULL, "mkdtemp");
    snprintf(dir, sizeof dir, "%s/ckpt", root);
    CHECK(test_run_job(&cfg, &two, dir, &stopped, &res, err, sizeof err) == 0 && res.stopped,
          "stopped run: %s", err);
    CHECK(test_run_job(&cfg, &two, dir, &resumed, &res, err, sizeof err) == 0 &&
              resumed.resumes == 1, "resumed run: %s", err);
    CHECK(pinned.final && resumed.final && memcmp(pinned.final, resumed.final,
                                                  pinned.n * sizeof(float)) == 0,
          "3 replicas taking turns, stopped and resumed, differ from the same on 1 core");
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    CHECK(system(cmd) == 0, "cleanup");
    free(pinned.final);
    free(turns.final);
    free(resumed.final);
}

int main(void)
{
    test_init("runner");
    char err[512];
    job_config cfg;
    run_result res;
    uint64_t seed = test_seed() % 100000;

    test_watch a = {0}, b = {0}, c = {0};
    base_config(&cfg, seed);
    CHECK(test_run_job(&cfg, NULL, NULL, &a, &res, err, sizeof err) == 0, "%s", err);
    /* eval.every_passes' default spaces evaluations ten times their cost
     * apart (test_eval_every.c), more than this epoch of 48 steps. */
    CHECK(a.evals == 1, "one evaluation, at the epoch's end, got %d", a.evals);
    CHECK(res.test_error < 0.5, "2 replicas should learn the synthetic set: error %.3f", res.test_error);
    CHECK(res.epochs_done == 1 && !res.stopped, "epochs_done %d stopped %d", res.epochs_done, res.stopped);
    CHECK(test_run_job(&cfg, NULL, NULL, &b, &res, err, sizeof err) == 0, "%s", err);
    CHECK(a.final && b.final && a.n == b.n && memcmp(a.final, b.final, a.n * sizeof(float)) == 0,
          "two runs with seed %llu differ", (unsigned long long)seed);
    base_config(&cfg, seed + 1);
    CHECK(test_run_job(&cfg, NULL, NULL, &c, &res, err, sizeof err) == 0, "%s", err);
    CHECK(c.final && memcmp(a.final, c.final, a.n * sizeof(float)) != 0,
          "seeds %llu and %llu gave the same weights", (unsigned long long)seed,
          (unsigned long long)seed + 1);

    /* Asked to stop before the first boundary: ends at once, not failed. */
    test_watch d = {.stop = RUN_STOP};
    base_config(&cfg, seed);
    cfg.epochs = 50;
    CHECK(test_run_job(&cfg, NULL, NULL, &d, &res, err, sizeof err) == 0, "%s", err);
    CHECK(res.stopped && d.evals == 0, "stopped %d after %d evaluations", res.stopped, d.evals);

    /* A learning rate that makes the loss blow up fails the job with a reason. */
    test_watch e = {0};
    base_config(&cfg, seed);
    cfg.optim.lr = 1e30;
    cfg.algorithm.inner_lr = 1e30;
    CHECK(test_run_job(&cfg, NULL, NULL, &e, &res, err, sizeof err) == -1,
          "a diverging run did not fail");
    CHECK(strstr(err, "loss is") != NULL, "unexpected failure message: %s", err);

    free(a.final);
    free(b.final);
    free(c.final);
    free(d.final);
    free(e.final);
    check_turns(seed);
    return test_main_end();
}
