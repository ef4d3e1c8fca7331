/* Learning quality on real data: train a job file and require the master's
 * final test error to be at most a bound.
 *   test_learning JOB.json MAX_ERROR [--beats OTHER.json]
 *   test_learning JOB.json MAX_ERROR --reseeded FAULT MARGIN
 * With --beats, the job must also end strictly below OTHER's error. With
 * --reseeded, the job is trained again with PARLE_FAULT_REPLICA=FAULT (a
 * replica's weights made NaN, docs/architecture.md "Failure model") and
 * algorithm.on_replica_failure "reseed": re-seeded once, it must end within
 * MARGIN of the untouched run's error.
 * Exits 77 (skipped) when the job's dataset directory is absent. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "fsutil.h"
#include "runner.h"
#include "jobfile.h"

/* The job's re-seeds, from its progress events (replica 0's thread). */
static void on_event(void *user, const run_event *ev)
{
    if (ev->kind == RUN_EV_PROGRESS)
        *(long *)user = ev->reseeds;
    if (ev->kind == RUN_EV_LOG && strstr(ev->message, "re-seeded"))
        printf("  %s\n", ev->message);
    if (ev->kind == RUN_EV_EVAL)
        printf("  epoch %.6g/%d: test error %.2f%%, loss %.4f, %.0f s\n", ev->epoch, ev->epochs,
               100 * ev->test_error, ev->test_loss, ev->elapsed_s);
}

/* Returns the final test error, or -1 (error printed), or -2 (skip). With
 * fault, re-seeding and that fault; *reseeds: the job's re-seeds. */
static double train(const char *path, const char *fault, long *reseeds)
{
    char err[4096];
    size_t len;
    char *text = read_file_text(path, 1 << 20, &len, err, sizeof err);
    job_config cfg;
    int read = text != NULL;
    int parsed = read && job_config_parse(text, len, &cfg, err, sizeof err) == 0;
    free(text);
    if (fault)
        strcpy(cfg.algorithm.on_replica_failure, "reseed");
    if (!parsed) {
        printf("%s%s%s\n", read ? path : "", read ? ": " : "", err);
        return -1;
    }
    struct stat st;
    if (cfg.data.root[0] && stat(cfg.data.root, &st) != 0) {
        printf("SKIP: %s is absent (apt-get install dataset-fashion-mnist)\n", cfg.data.root);
        return -2;
    }
    dataset tr, te;
    if (data_load_job(&cfg, &tr, &te, NULL, err, sizeof err) != 0) {
        printf("%s\n", err);
        return -1;
    }
    int *cores, ncores = run_cpu_cores(&cores, err, sizeof err);
    printf("%s: %s, %d replica(s), L=%d, %d epochs, %d training images%s%s\n", path,
           cfg.algorithm.name, cfg.algorithm.replicas, cfg.algorithm.L, cfg.epochs, tr.n,
           fault ? ", re-seeding, PARLE_FAULT_REPLICA=" : "", fault ? fault : "");
    *reseeds = 0;
    run_hooks hooks = {.on_event = on_event, .user = reseeds};
    run_result res;
    if (fault)
        setenv("PARLE_FAULT_REPLICA", fault, 1);
    int rc = ncores < 1 ? -1 : run_job(&cfg, &tr, &te, &(run_devices){.cores = cores, .ncores = ncores},
                                         &hooks, &res, err, sizeof err);
    unsetenv("PARLE_FAULT_REPLICA");
    free(cores);
    dataset_free(&tr);
    dataset_free(&te);
    if (rc != 0) {
        printf("%s\n", err);
        return -1;
    }
    return res.test_error;
}

int main(int argc, char **argv)
{
    int beats = argc == 5 && strcmp(argv[3], "--beats") == 0;
    int reseeded = argc == 6 && strcmp(argv[3], "--reseeded") == 0;
    if (argc != 3 && !beats && !reseeded) {
        fprintf(stderr, "usage: test_learning JOB.json MAX_ERROR [--beats OTHER.json | "
                        "--reseeded FAULT MARGIN]\n");
        return 2;
    }
    double bound = atof(argv[2]);
    long reseeds;
    double e = train(argv[1], NULL, &reseeds);
    if (e == -2)
        return 77;
    if (e < 0)
        return 1;
    int ok = e <= bound;
    printf("%s: final test error %.2f%% (bound %.2f%%): %s\n", argv[1], 100 * e, 100 * bound,
           ok ? "ok" : "FAILED");
    if (beats) {
        double other = train(argv[4], NULL, &reseeds);
        if (other < 0)
            return 1;
        int better = e < other;
        printf("%.2f%% vs %s %.2f%%: %s\n", 100 * e, argv[4], 100 * other,
               better ? "ok" : "FAILED, does not beat it");
        ok = ok && better;
    }
    if (reseeded) {
        double margin = atof(argv[5]), r = train(argv[1], argv[4], &reseeds);
        if (r < 0)
            return 1;
        int near = reseeds == 1 && r <= e + margin;
        printf("re-seeded %ld time(s): %.2f%% against untouched %.2f%% (margin %.2f points): %s\n",
               reseeds, 100 * r, 100 * e, 100 * margin, near ? "ok" : "FAILED");
        ok = ok && near;
    }
    return ok ? 0 : 1;
}
