/* The runner end to end on the synthetic set with an MLP: a Parle run with
 * 2 replica threads learns, is reproducible bit for bit for a seed, depends
 * on the seed, stops when asked, and fails cleanly on a diverging loss. */
#include <stdlib.h>
#include <string.h>

#include "runner.h"
#include "testutil.h"

typedef struct final_copy { float *params; size_t n; int evals; } final_copy;

static void on_event(void *user, const run_event *ev)
{
    if (ev->kind == RUN_EV_EVAL)
        __atomic_fetch_add(&((final_copy *)user)->evals, 1, __ATOMIC_RELAXED);
}

static void on_master(void *user, const model *master, const float *params, const float *stats,
                      int epochs_done, int last)
{
    (void)epochs_done, (void)stats;
    if (!last)
        return;
    final_copy *fc = user;
    fc->n = master->nparams;
    fc->params = malloc(fc->n * sizeof(float));
    memcpy(fc->params, params, fc->n * sizeof(float));
}

static void base_config(job_config *cfg, uint64_t seed)
{
    job_config_defaults(cfg);
    strcpy(cfg->model.arch, "mlp");
    cfg->model.dropout = 0.1f;
    strcpy(cfg->data.dataset, "synthetic");
    cfg->data.train_limit = 512;
    cfg->data.test_limit = 256;
    strcpy(cfg->algorithm.name, "parle");
    strcpy(cfg->algorithm.init, "independent");
    cfg->algorithm.replicas = 2;
    cfg->algorithm.L = 3;
    cfg->optim.lr = 0.05;
    cfg->optim.batch = 32;
    cfg->epochs = 1;
    cfg->seed = seed;
    cfg->log_every = 10;
}

static int run(const job_config *cfg, final_copy *fc, run_result *res, const volatile int *stop,
               char *err, size_t errlen)
{
    dataset tr, te;
    if (run_load_data(cfg, &tr, &te, err, errlen) != 0)
        return -1;
    int cores[2] = {0, 1};
    run_hooks hooks = {.on_event = on_event, .on_master = on_master, .user = fc, .stop = stop};
    run_devices where = {.cores = cores, .ncores = 2};
    int rc = run_job(cfg, &tr, &te, &where, &hooks, res, err, errlen);
    dataset_free(&tr);
    dataset_free(&te);
    return rc;
}

int main(void)
{
    test_init("runner");
    char err[512];
    job_config cfg;
    run_result res;
    uint64_t seed = test_seed() % 100000;

    final_copy a = {0}, b = {0}, c = {0};
    base_config(&cfg, seed);
    CHECK(run(&cfg, &a, &res, NULL, err, sizeof err) == 0, "%s", err);
    CHECK(a.evals == 1, "one evaluation per epoch, got %d", a.evals);
    CHECK(res.test_error < 0.5, "2 replicas should learn the synthetic set: error %.3f", res.test_error);
    CHECK(res.epochs_done == 1 && !res.stopped, "epochs_done %d stopped %d", res.epochs_done, res.stopped);
    CHECK(run(&cfg, &b, &res, NULL, err, sizeof err) == 0, "%s", err);
    CHECK(a.params && b.params && a.n == b.n && memcmp(a.params, b.params, a.n * sizeof(float)) == 0,
          "two runs with seed %llu differ", (unsigned long long)seed);
    base_config(&cfg, seed + 1);
    CHECK(run(&cfg, &c, &res, NULL, err, sizeof err) == 0, "%s", err);
    CHECK(c.params && memcmp(a.params, c.params, a.n * sizeof(float)) != 0,
          "seeds %llu and %llu gave the same weights", (unsigned long long)seed,
          (unsigned long long)seed + 1);

    /* Asked to stop before the first boundary: ends at once, not failed. */
    volatile int stop = 1;
    final_copy d = {0};
    base_config(&cfg, seed);
    cfg.epochs = 50;
    CHECK(run(&cfg, &d, &res, &stop, err, sizeof err) == 0, "%s", err);
    CHECK(res.stopped && d.evals == 0, "stopped %d after %d evaluations", res.stopped, d.evals);

    /* A learning rate that makes the loss blow up fails the job with a reason. */
    final_copy e = {0};
    base_config(&cfg, seed);
    cfg.optim.lr = 1e30;
    cfg.algorithm.inner_lr = 1e30;
    CHECK(run(&cfg, &e, &res, NULL, err, sizeof err) == -1, "a diverging run did not fail");
    CHECK(strstr(err, "loss is") != NULL, "unexpected failure message: %s", err);

    free(a.params);
    free(b.params);
    free(c.params);
    free(d.params);
    free(e.params);
    return test_main_end();
}
