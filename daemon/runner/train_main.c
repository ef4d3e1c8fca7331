/* parle-train: run one job in the foreground, without the daemon
 * (for quick experiments, tests and benchmarks). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parle_config.h"
#include "fsutil.h"
#include "runner.h"
#include "safetensors.h"
#include "jobfile.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: parle-train [--quiet] JOB.json\n"
            "       parle-train --eval WEIGHTS.safetensors JOB.json\n"
            "Trains the job in the foreground on all cores this process may use (the first\n"
            "K of them for devices \"cpu:K\"), printing progress and each epoch's test\n"
            "error of the master, and finally\n"
            "  final test error: E%%\n"
            "With --eval, trains nothing: loads the weights and BN statistics (as written by\n"
            "`parlectl export`) into the job's model and prints the test error and loss on\n"
            "the job's test set:\n"
            "  test error: E%% test loss: L\n"
            "  --quiet   only the final line\n"
            "  --help    this text\n");
}

static void on_event(void *user, const run_event *ev)
{
    int quiet = *(const int *)user;
    if (quiet)
        return;
    if (ev->kind == RUN_EV_PROGRESS)
        fprintf(stderr,
                "epoch %d/%d step %ld passes %.2f loss %.4f lr %.4g gamma %.4g rho %.4g "
                "%.0f img/s eta %.0fs\n",
                (int)ev->epoch + 1, ev->epochs, ev->step, ev->data_passes, ev->train_loss, ev->lr,
                ev->gamma, ev->rho, ev->images_per_sec, ev->eta_s);
    else if (ev->kind == RUN_EV_EVAL)
        fprintf(stderr, "epoch %.6g/%d done: test error %.2f%% test loss %.4f (%s, %.1fs, "
                "steps %.2fs, sync %.2fs, loader wait %.2fs, evaluations %.2fs)\n",
                ev->epoch, ev->epochs, 100.0 * ev->test_error, ev->test_loss, ev->message,
                ev->elapsed_s, ev->compute_s, ev->sync_s, ev->wait_s, ev->eval_s);
}

/* Test error of saved weights on the job's test set. */
static int evaluate_weights(const job_config *cfg, const dataset *train, const dataset *test,
                            const char *weights)
{
    char err[1024];
    model m;
    model_spec spec = run_model_spec(cfg, train);
    /* On the CPU, so the weights are read straight into the model's memory. */
    backend_ctx ctx;
    backend_ctx_init_cpu(&ctx, 1);
    int rc = 1;
    if (model_build(&m, &ctx, &spec, 256, 0, err, sizeof err) != 0 ||
        safetensors_read(weights, &m, m.params, m.stats, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "parle-train: %s\n", err);
    } else {
        double loss, error;
        model_evaluate(&m, &ctx, test->images, test->labels, test->n, &loss, &error);
        if (backend_failed(&ctx))
            fprintf(stderr, "parle-train: %s\n", ctx.err);
        else
            printf("test error: %.4f%% test loss: %.6f\n", 100.0 * error, loss);
        rc = backend_failed(&ctx);
    }
    model_free(&m, &ctx);
    backend_ctx_free(&ctx);
    return rc;
}

int main(int argc, char **argv)
{
    backend_openmp_defaults();
    int quiet = 0;
    const char *path = NULL, *weights = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(argv[i], "--quiet") == 0) {
            quiet = 1;
        } else if (strcmp(argv[i], "--eval") == 0 && i + 1 < argc) {
            weights = argv[++i];
        } else if (!path && argv[i][0] != '-') {
            path = argv[i];
        } else {
            fprintf(stderr, "parle-train: unexpected argument %s\n", argv[i]);
            usage(stderr);
            return 2;
        }
    }
    if (!path) {
        usage(stderr);
        return 2;
    }
    char err[4096];
    size_t len;
    char *text = read_file_text(path, 1 << 20, &len, err, sizeof err);
    job_config cfg;
    if (!text || job_config_parse(text, len, &cfg, err, sizeof err) != 0) {
        fprintf(stderr, "parle-train: %s%s%s\n", text ? path : "", text ? ": " : "", err);
        free(text);
        return 1;
    }
    free(text);
    dataset train, test;
    if (data_load_job(&cfg, &train, &test, NULL, err, sizeof err) != 0) {
        fprintf(stderr, "parle-train: %s\n", err);
        return 1;
    }
    if (weights) {
        int rc = evaluate_weights(&cfg, &train, &test, weights);
        dataset_free(&train);
        dataset_free(&test);
        return rc;
    }
    int *cores, gpus[64];
    run_devices where = {.gpus = gpus};
    where.ncores = run_cpu_cores(&cores, err, sizeof err);
    where.cores = cores;
    /* "cpu:K": the first K of them. */
    if (cfg.device_spec.cores > 0 && cfg.device_spec.cores < where.ncores)
        where.ncores = cfg.device_spec.cores;
    if (where.ncores >= 1)
        where.ngpus = run_job_gpus(&cfg, gpus, err, sizeof err);
    if (where.ncores < 1 || where.ngpus < 0) {
        fprintf(stderr, "parle-train: %s\n", err);
        return 1;
    }
    run_hooks hooks = {.on_event = on_event, .user = &quiet};
    run_result res;
    int rc = run_job(&cfg, &train, &test, &where, &hooks, &res, err, sizeof err);
    free(cores);
    dataset_free(&train);
    dataset_free(&test);
    if (rc != 0) {
        fprintf(stderr, "parle-train: %s\n", err);
        return 1;
    }
    printf("final test error: %.2f%%\n", 100.0 * res.test_error);
    return 0;
}
