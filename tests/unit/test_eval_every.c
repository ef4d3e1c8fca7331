/* eval.every_passes: the master is evaluated where the steps cross each
 * multiple of the cadence (at the first outer-iteration boundary from it) and
 * at every epoch end, reported as the epochs done; evaluations between epoch
 * ends leave the training as it was, bit for bit, whatever eval.bn says, and
 * a run stopped at one and resumed evaluates where an uninterrupted one does. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner.h"
#include "testjob.h"

/* 2 MLP replicas with BN and dropout on 512 images in batches of 32: a pass
 * is 16 steps; Parle's epoch is L passes (one with L = 0). */
static void job(job_config *cfg, int L, double every_passes, uint64_t seed)
{
    test_synthetic_job(cfg, "mlp", 2, 2, seed);
    cfg->model.dropout = 0.1f;
    strcpy(cfg->algorithm.init, "independent");
    cfg->algorithm.L = L;
    cfg->eval.every_passes = every_passes;
}

static void run(const job_config *cfg, const char *ckpt, test_watch *w, const char *what)
{
    char err[512];
    run_result res;
    CHECK(test_run_job(cfg, NULL, ckpt, w, &res, err, sizeof err) == 0, "%s: %s", what, err);
    CHECK(w->evals <= TEST_MAX_EVALS, "%s: %d evaluations", what, w->evals);
}

/* The evaluations w saw are at `steps` (n of them), each reported at
 * step / epoch_steps epochs done. */
static void expect_steps(const test_watch *w, const long *steps, int n, long epoch_steps,
                         const char *what)
{
    CHECK(w->evals == n, "%s: %d evaluations, want %d", what, w->evals, n);
    for (int i = 0; i < n && i < w->evals; i++)
        CHECK(w->eval_step[i] == steps[i] &&
                  fabs(w->eval_epoch[i] - (double)steps[i] / (double)epoch_steps) < 1e-12,
              "%s: evaluation %d at step %ld (epoch %g), want step %ld", what, i, w->eval_step[i],
              w->eval_epoch[i], steps[i]);
}

/* The same training: the same final master, and the same test error where
 * both evaluated (each of a's steps that b has). */
static void expect_same(const test_watch *a, const test_watch *b, const char *what)
{
    CHECK(a->final && b->final && a->n == b->n &&
              memcmp(a->final, b->final, a->n * sizeof(float)) == 0,
          "%s: the final masters differ", what);
    int shared = 0;
    for (int i = 0; i < a->evals && i < TEST_MAX_EVALS; i++)
        for (int j = 0; j < b->evals && j < TEST_MAX_EVALS; j++)
            if (a->eval_step[i] == b->eval_step[j]) {
                shared++;
                CHECK(a->eval_error[i] == b->eval_error[j], "%s: step %ld: test error %g and %g",
                      what, a->eval_step[i], a->eval_error[i], b->eval_error[j]);
            }
    CHECK(shared >= 2, "%s: only %d evaluations at the same steps", what, shared);
}

int main(void)
{
    test_init("eval_every");
    uint64_t seed = test_seed() % 100000;
    job_config cfg;

    /* One pass an epoch (L = 0), every half pass: two evaluations an epoch. */
    test_watch half = {0};
    job(&cfg, 0, 0.5, seed);
    run(&cfg, NULL, &half, "L 0, every 0.5 passes");
    expect_steps(&half, (const long[]){8, 16, 24, 32}, 4, 16, "L 0, every 0.5 passes");

    /* L = 3: an epoch is 48 steps, an outer iteration 3; every 8 steps falls
     * on the boundary at or after each multiple. */
    test_watch off = {0};
    job(&cfg, 3, 0.5, seed);
    run(&cfg, NULL, &off, "L 3, every 0.5 passes");
    expect_steps(&off, (const long[]){9, 18, 24, 33, 42, 48, 57, 66, 72, 81, 90, 96}, 12, 48,
                 "L 3, every 0.5 passes");

    /* The default: four an epoch, but at least ten times an evaluation's
     * cost apart. With eval.bn "recompute" that cost is the forward passes
     * over the 512 training and 256 test images, 768 / (2 x 32) = 12 steps:
     * 120 steps apart. An epoch of 48 steps (L = 3) evaluates at its end
     * only; one of 160 (L = 10) every 120 steps; one of 640 (L = 40) every
     * quarter, 160 steps. */
    test_watch quarter = {0};
    job(&cfg, 3, 0, seed);
    run(&cfg, NULL, &quarter, "L 3, default");
    expect_steps(&quarter, (const long[]){48, 96}, 2, 48, "L 3, default");
    expect_same(&off, &quarter, "every 0.5 passes against the default");
    test_watch spaced = {0}, parle = {0};
    job(&cfg, 10, 0, seed);
    run(&cfg, NULL, &spaced, "L 10, default");
    expect_steps(&spaced, (const long[]){120, 160, 240, 320}, 4, 160, "L 10, default");
    job(&cfg, 40, 0, seed);
    cfg.epochs = 1;
    run(&cfg, NULL, &parle, "L 40, default");
    expect_steps(&parle, (const long[]){160, 320, 480, 640}, 4, 640, "L 40, default");
    /* With eval.bn "average" only the test set's pass: 256 / 64 = 4 steps,
     * so 40 steps apart (the first outer-iteration boundary from each). */
    test_watch average = {0};
    job(&cfg, 3, 0, seed);
    strcpy(cfg.eval.bn, "average");
    run(&cfg, NULL, &average, "L 3, default, eval.bn average");
    expect_steps(&average, (const long[]){42, 48, 81, 96}, 4, 48,
                 "L 3, default, eval.bn average");

    /* images_per_sec is the training rate: evaluated after every step, on a
     * test set 8 times an epoch's images, the job spends most of its time in
     * evaluations, which the rates leave out (and eval_s counts). Counting
     * them, the seconds the rates account for would be replica 0's time in
     * steps, syncs and loader waits plus eval_s; leaving them out, less than
     * half of eval_s more (a margin for what lies between, which a slow
     * build such as ThreadSanitizer's stretches: 0.59 s against 0.24 s of
     * training there). */
    test_watch busy = {0};
    job(&cfg, 0, 1.0 / 16, seed);
    cfg.data.test_limit = 4096;
    run(&cfg, NULL, &busy, "evaluated every step");
    double rated_s = busy.steps_over_rate * cfg.optim.batch * cfg.algorithm.replicas;
    CHECK(rated_s < busy.busy_s + 0.5 * busy.eval_s,
          "images_per_sec accounts for %.3f s, replica 0 trained for %.3f s and evaluated for "
          "%.3f s", rated_s, busy.busy_s, busy.eval_s);
    CHECK(busy.eval_s > busy.busy_s && busy.eval_s < busy.eval_elapsed_s,
          "eval_s %.3f s: want more than the training's %.3f s, less than the elapsed %.3f s",
          busy.eval_s, busy.busy_s, busy.eval_elapsed_s);

    /* Only at epoch ends against every half pass, for each eval.bn: the
     * evaluations touch no replica's state. */
    const char *bn[] = {"recompute", "average", "replica0"};
    for (int i = 0; i < 3; i++) {
        test_watch ends = {0}, often = {0};
        char what[64];
        snprintf(what, sizeof what, "eval.bn %s", bn[i]);
        job(&cfg, 3, 1e6, seed);
        strcpy(cfg.eval.bn, bn[i]);
        run(&cfg, NULL, &ends, what);
        expect_steps(&ends, (const long[]){48, 96}, 2, 48, what);
        job(&cfg, 3, 0.5, seed);
        strcpy(cfg.eval.bn, bn[i]);
        run(&cfg, NULL, &often, what);
        expect_same(&ends, &often, what);
        free(ends.final);
        free(often.final);
    }

    /* Stopped (with a checkpoint) right after the evaluation half-way through
     * the first epoch, then resumed: the evaluations before and after are
     * the uninterrupted run's. */
    char root[] = "/tmp/parle-eval-every-XXXXXX", dir[300], cmd[340];
    CHECK(mkdtemp(root) != NULL, "mkdtemp");
    snprintf(dir, sizeof dir, "%s/ckpt", root);
    test_watch stopped = {.stop_after_eval = 0.5}, resumed = {0};
    job(&cfg, 3, 0.5, seed);
    run(&cfg, dir, &stopped, "stopped");
    expect_steps(&stopped, (const long[]){9, 18, 24}, 3, 48, "stopped at 0.5 epochs");
    run(&cfg, dir, &resumed, "resumed");
    CHECK(resumed.resumes == 1, "the second run did not resume");
    expect_steps(&resumed, (const long[]){33, 42, 48, 57, 66, 72, 81, 90, 96}, 9, 48, "resumed");
    expect_same(&off, &resumed, "resumed against uninterrupted");
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    CHECK(system(cmd) == 0, "cleanup");

    free(half.final);
    free(off.final);
    free(quarter.final);
    free(spaced.final);
    free(parle.final);
    free(average.final);
    free(busy.final);
    free(stopped.final);
    free(resumed.final);
    return test_main_end();
}
