/* The cost of Parle's sync on GPUs: comm_allreduce_mean of a replica-sized
 * vector on n replica threads on one GPU (and across all GPUs when there
 * are several), against a device-to-device copy moving the same bytes on
 * the same GPU in the same run; then a Parle WRN-16-4 job (synthetic CIFAR-
 * shaped data) with n = 3 replicas on one GPU against n = 1, in images/s.
 *
 *   gpu_sync [--sizes 2748890,36479194] [--replicas 2,3,4] [--reps R] [--no-job]
 *
 * (the default sizes: WRN-16-4's and WRN-28-10's parameter counts).
 *
 * Bytes counted per all-reduce: n vectors read, one written, (n + 1) * 4 *
 * len; the copy moves (n + 1) / 2 vectors, so its bytes read + written are
 * the same. "fraction" is the copy's time over the all-reduce's: the share
 * of the device's own copy bandwidth the all-reduce reaches (goal >= 0.5).
 * Across GPUs the bytes also cross NVLink or PCIe, and the fraction says
 * what that costs next to one GPU's memory. Exits 77 without a GPU. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "comm.h"
#include "runner.h"
#include "topology.h"

enum { MAX_LIST = 16, MAX_REPS = 200, MAX_RANKS = 16, ITERS = 20 };

typedef struct shared {
    comm comm;
    int n, ngpus, reps;
    const int *gpus;
    size_t len;
    double allreduce[MAX_REPS], copy[MAX_REPS]; /* seconds per call, by rank 0 */
    pthread_mutex_t lock;                        /* guards failed, err */
    int failed;
    char err[512];
} shared;

typedef struct rank_arg { shared *sh; int rank; } rank_arg;

/* The first failure is kept; the comm's abort sends every rank home. */
static void failed(shared *sh, const char *what, const char *why)
{
    pthread_mutex_lock(&sh->lock);
    if (!sh->failed)
        snprintf(sh->err, sizeof sh->err, "%s%s", what, why);
    sh->failed = 1;
    pthread_mutex_unlock(&sh->lock);
    comm_abort(&sh->comm, "%s%s", what, why);
}

static void *rank_main(void *p)
{
    rank_arg *arg = p;
    shared *sh = arg->sh;
    const int rank = arg->rank;
    const size_t bytes = sh->len * sizeof(float);
    const size_t copy_bytes = (size_t)(sh->n + 1) * bytes / 2;
    backend_ctx ctx;
    char err[512];
    if (backend_ctx_init_cuda(&ctx, topology_device(rank, sh->gpus, sh->ngpus), PRECISION_FP32,
                              0, err, sizeof err) != 0) {
        failed(sh, "", err);
        comm_attach(&sh->comm, rank, &ctx, sh->len, err, sizeof err);
        comm_detach(&sh->comm, rank);
        return NULL;
    }
    float *vec = backend_alloc(&ctx, bytes);
    float *src = rank == 0 ? backend_alloc(&ctx, copy_bytes) : NULL;
    float *dst = rank == 0 ? backend_alloc(&ctx, copy_bytes) : NULL;
    if (!vec || (rank == 0 && (!src || !dst)))
        failed(sh, "", ctx.err);
    backend_zero(&ctx, vec, bytes);
    if (rank == 0) {
        backend_zero(&ctx, src, copy_bytes);
        backend_zero(&ctx, dst, copy_bytes);
    }
    int ok = comm_attach(&sh->comm, rank, &ctx, sh->len, err, sizeof err) == 0;
    if (!ok)
        failed(sh, "", err);
    /* Warm up: the first NCCL collective sets up its connections. */
    for (int i = 0; i < 3 && ok; i++)
        ok = comm_allreduce_mean(&sh->comm, rank, &ctx, vec, sh->len) != NULL;
    for (int k = 0; k < sh->reps && ok; k++) {
        /* The copy and the all-reduce interleaved, rep by rep. */
        if (rank == 0) {
            backend_sync(&ctx);
            double t0 = now_s();
            for (int i = 0; i < ITERS; i++)
                backend_copy(&ctx, dst, src, copy_bytes);
            backend_sync(&ctx);
            sh->copy[k] = (now_s() - t0) / ITERS;
        }
        ok = comm_barrier(&sh->comm, rank, "bench") == 0;
        double t0 = now_s();
        for (int i = 0; i < ITERS && ok; i++)
            ok = comm_allreduce_mean(&sh->comm, rank, &ctx, vec, sh->len) != NULL;
        /* Done means done on the GPU, on every replica. */
        backend_sync(&ctx);
        ok = ok && comm_barrier(&sh->comm, rank, "bench") == 0;
        if (ok && rank == 0)
            sh->allreduce[k] = (now_s() - t0) / ITERS;
    }
    if (backend_failed(&ctx))
        failed(sh, "", ctx.err);
    else if (!ok)
        failed(sh, "all-reduce: ", comm_abort_reason(&sh->comm));
    comm_detach(&sh->comm, rank);
    backend_free(&ctx, vec);
    backend_free(&ctx, src);
    backend_free(&ctx, dst);
    backend_ctx_free(&ctx);
    return NULL;
}

static int measure(shared *sh)
{
    char err[256];
    if (comm_init(&sh->comm, sh->n, 0, err, sizeof err) != 0) {
        snprintf(sh->err, sizeof sh->err, "%s", err);
        return -1;
    }
    pthread_mutex_init(&sh->lock, NULL);
    pthread_t tids[MAX_RANKS];
    rank_arg args[MAX_RANKS];
    int started = 0;
    for (; started < sh->n; started++) {
        args[started] = (rank_arg){sh, started};
        if (pthread_create(&tids[started], NULL, rank_main, &args[started]) != 0)
            break;
    }
    if (started < sh->n)
        failed(sh, "could not start the replica threads", "");
    for (int i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    comm_free(&sh->comm);
    pthread_mutex_destroy(&sh->lock);
    return sh->failed ? -1 : 0;
}

static int parse_list(const char *s, long *out)
{
    int n = 0;
    for (char *end; *s && n < MAX_LIST; s = *end ? end + 1 : end)
        out[n++] = strtol(s, &end, 10);
    return n;
}

/* images/s of a Parle WRN-16-4 job with n replicas on GPU 0: the median over
 * its progress reports after the first (cuDNN picks its algorithms then). */
typedef struct rates { double v[512]; int n; } rates;

static void on_event(void *user, const run_event *ev)
{
    rates *r = user;
    if (ev->kind == RUN_EV_PROGRESS && r->n < 512)
        r->v[r->n++] = ev->images_per_sec;
}

static double job_images_per_s(int n, char *err, size_t errlen)
{
    job_config cfg;
    job_config_defaults(&cfg);
    strcpy(cfg.model.arch, "wrn");
    cfg.model.depth = 16;
    cfg.model.width = 4;
    strcpy(cfg.data.dataset, "synthetic");
    cfg.data.train_limit = 128 * 8;
    cfg.data.test_limit = 256;
    strcpy(cfg.algorithm.name, "parle");
    cfg.algorithm.replicas = n;
    cfg.algorithm.L = 5;
    cfg.optim.batch = 128;
    cfg.epochs = 4;
    cfg.log_every = 1;
    dataset tr, te;
    if (data_load_job(&cfg, &tr, &te, NULL, err, errlen) != 0)
        return -1;
    int *cores = NULL, ncores = run_cpu_cores(&cores, err, errlen), gpu = 0;
    rates r = {.n = 0};
    run_hooks hooks = {.on_event = on_event, .user = &r};
    run_devices where = {.cores = cores, .ncores = ncores, .gpus = &gpu, .ngpus = 1};
    run_result res;
    int rc = ncores > 0 ? run_job(&cfg, &tr, &te, &where, &hooks, &res, err, errlen) : -1;
    free(cores);
    dataset_free(&tr);
    dataset_free(&te);
    return rc == 0 && r.n > 1 ? median(r.v + 1, r.n - 1) : -1;
}

int main(int argc, char **argv)
{
    long sizes[MAX_LIST] = {2748890, 36479194}, replicas[MAX_LIST] = {2, 3, 4};
    int nsizes = 2, nreplicas = 3, reps = 15, job = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--sizes") == 0 && i + 1 < argc)
            nsizes = parse_list(argv[++i], sizes);
        else if (strcmp(argv[i], "--replicas") == 0 && i + 1 < argc)
            nreplicas = parse_list(argv[++i], replicas);
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--no-job") == 0)
            job = 0;
        else {
            fprintf(stderr, "usage: gpu_sync [--sizes 2748890,36479194] [--replicas 2,3,4] "
                    "[--reps R] [--no-job]\n");
            return 2;
        }
    }
    reps = reps < 1 ? 1 : reps > MAX_REPS ? MAX_REPS : reps;
    int ngpus = backend_cuda_devices();
    if (ngpus == 0) {
        printf("gpu_sync: no CUDA device: nothing to measure\n");
        return 77;
    }
    int gpus[64];
    for (int g = 0; g < ngpus && g < 64; g++)
        gpus[g] = g;
    char name[256] = "?";
    size_t mem;
    backend_cuda_device_info(0, name, sizeof name, &mem);
    printf("gpu_sync: %d GPU(s), GPU 0 %s; %d reps of %d calls, medians\n", ngpus, name, reps,
           ITERS);
    printf("%10s %3s %4s %14s %10s %12s %10s %9s\n", "floats", "n", "GPUs", "all-reduce ms",
           "copy ms", "all-red GB/s", "copy GB/s", "fraction");
    int status = 0;
    for (int s = 0; s < nsizes; s++)
        for (int k = 0; k < nreplicas; k++)
            for (int across = 0; across <= (ngpus > 1); across++) {
                static shared sh;
                memset(&sh, 0, sizeof sh);
                sh.n = (int)replicas[k];
                sh.len = (size_t)sizes[s];
                sh.reps = reps;
                sh.gpus = gpus;
                sh.ngpus = across ? (ngpus < sh.n ? ngpus : sh.n) : 1;
                if (sh.n < 1 || sh.n > MAX_RANKS || (across && sh.n < 2))
                    continue;
                if (measure(&sh) != 0) {
                    printf("%10zu %3d %4d failed: %s\n", sh.len, sh.n, sh.ngpus, sh.err);
                    status = 1;
                    continue;
                }
                double ar = median(sh.allreduce, reps), cp = median(sh.copy, reps);
                double moved = (double)(sh.n + 1) * (double)sh.len * sizeof(float);
                printf("%10zu %3d %4d %14.3f %10.3f %12.1f %10.1f %9.2f\n", sh.len, sh.n,
                       sh.ngpus, 1e3 * ar, 1e3 * cp, moved / ar * 1e-9, moved / cp * 1e-9,
                       cp / ar);
            }
    if (job) {
        char err[512];
        double one = job_images_per_s(1, err, sizeof err);
        double three = one > 0 ? job_images_per_s(3, err, sizeof err) : -1;
        if (one > 0 && three > 0)
            printf("Parle WRN-16-4 on GPU 0, batch 128: n = 1 %.0f images/s, n = 3 %.0f images/s "
                   "(x%.2f; 3.00 would be three replicas each as fast as one alone)\n", one,
                   three, three / one);
        else {
            printf("Parle WRN-16-4 job failed: %s\n", err);
            status = 1;
        }
    }
    return status;
}
