/* The cost of Parle's sync per outer iteration: comm_allreduce_mean of the
 * z vector on n replica threads, then vec_parle_outer, against memcpy moving
 * the same bytes on the same threads in the same run.
 *
 *   sync_cost [--sizes 132220,2748890] [--replicas 2,3,4,8] [--reps R]
 *
 * Threads are pinned as the runner pins replicas (a share of max(1, cores/n)
 * cores each, round-robin). Bytes counted per iteration:
 *   all-reduce: n vectors read, one written         (n + 1) * 4 * len
 *   outer step: each rank reads x, u, z, zbar and writes x, u   6 n * 4 * len
 *   memcpy:     (n + 1) / 2 vectors copied, the all-reduce's bytes read + written
 * The fraction is the all-reduce's (or the whole sync's) bandwidth over memcpy's. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "comm.h"

enum { MAX_LIST = 16, MAX_REPS = 1000 };
enum { OP_ALLREDUCE, OP_SYNC, OP_MEMCPY, NOPS };

/* Small enough that the outer step's momentum stays far from denormals over
 * a repetition's iterations (denormals would time the FPU, not memory). */
static const float ETA = 1e-4f, MU = 0.9f, RHO = 1.0f;

typedef struct shared {
    comm comm;
    int n;
    size_t len;
    int iters, reps;
    const int *cores;
    int ncores;
    float *copy_src, *copy_dst;
    size_t copy_len;
    double times[NOPS][MAX_REPS]; /* seconds per iteration, written by rank 0 */
} shared;

typedef struct rank_arg {
    shared *sh;
    int rank;
    int failed;
} rank_arg;

static void fill(float *v, size_t len, uint32_t rank, uint64_t base)
{
    philox_key key = philox_make_key(11, rank, 0);
    for (size_t i = 0; i < len; i++)
        v[i] = philox_uniform_at(key, base, i) - 0.5f;
}

/* The runner's pinning: a share of max(1, cores / n) cores, round-robin. */
static int pin(const shared *sh, int rank)
{
    int share = sh->ncores / sh->n > 1 ? sh->ncores / sh->n : 1;
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int i = 0; i < share; i++)
        CPU_SET(sh->cores[(rank * share + i) % sh->ncores], &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    return share;
}

static void *rank_main(void *p)
{
    rank_arg *arg = p;
    shared *sh = arg->sh;
    const int rank = arg->rank, n = sh->n;
    const size_t len = sh->len;
    backend_ctx ctx;
    backend_ctx_init_cpu(&ctx, pin(sh, rank));
    float *x = malloc(len * sizeof(float)), *u = malloc(len * sizeof(float));
    float *z = malloc(len * sizeof(float));
    int ok = x && u && z;
    /* Nobody starts unless everyone could. */
    if (comm_any(&sh->comm, rank, !ok)) {
        arg->failed = !ok;
        goto out;
    }
    fill(z, len, (uint32_t)rank, 0);
    size_t copy_lo = sh->copy_len * (size_t)rank / (size_t)n;
    size_t copy_hi = sh->copy_len * (size_t)(rank + 1) / (size_t)n;
    for (int k = 0; k < sh->reps; k++) {
        /* Fresh x and u each repetition, outside the clock. */
        fill(x, len, (uint32_t)rank, 1ull << 40);
        memcpy(u, z, len * sizeof(float));
        /* The three measurements interleaved, their order rotating. */
        for (int j = 0; j < NOPS; j++) {
            int op = (j + k) % NOPS;
            comm_barrier(&sh->comm, rank, "bench");
            double t0 = now_s();
            for (int it = 0; it < sh->iters; it++) {
                if (op == OP_MEMCPY) {
                    memcpy(sh->copy_dst + copy_lo, sh->copy_src + copy_lo,
                           (copy_hi - copy_lo) * sizeof(float));
                    comm_barrier(&sh->comm, rank, "bench");
                    continue;
                }
                const float *zbar = comm_allreduce_mean(&sh->comm, rank, &ctx, z, len);
                if (op == OP_SYNC)
                    vec_parle_outer(&ctx, len, ETA, MU, RHO, x, u, x, z, zbar);
            }
            comm_barrier(&sh->comm, rank, "bench");
            if (rank == 0)
                sh->times[op][k] = (now_s() - t0) / sh->iters;
        }
    }
out:
    free(x);
    free(u);
    free(z);
    backend_ctx_free(&ctx);
    return NULL;
}

static int measure(shared *sh, char *err, size_t errlen)
{
    /* Half of the all-reduce's n + 1 vectors, so read + write match its bytes. */
    sh->copy_len = (size_t)(sh->n + 1) * sh->len / 2;
    sh->copy_src = malloc(sh->copy_len * sizeof(float));
    sh->copy_dst = malloc(sh->copy_len * sizeof(float));
    pthread_t tids[MAX_LIST * 8];
    rank_arg args[MAX_LIST * 8];
    int started = 0, rc = -1;
    if (!sh->copy_src || !sh->copy_dst) {
        snprintf(err, errlen, "out of memory for %zu floats", sh->copy_len);
        goto out;
    }
    fill(sh->copy_src, sh->copy_len, 99, 0);
    memset(sh->copy_dst, 0, sh->copy_len * sizeof(float));
    if (comm_init(&sh->comm, sh->n, sh->len, err, errlen) != 0)
        goto out;
    for (; started < sh->n; started++) {
        args[started] = (rank_arg){.sh = sh, .rank = started};
        if (pthread_create(&tids[started], NULL, rank_main, &args[started]) != 0)
            break;
    }
    if (started < sh->n) {
        /* The started ranks would wait at a barrier for ever. */
        fprintf(stderr, "sync_cost: could not start thread %d of %d\n", started, sh->n);
        exit(1);
    }
    rc = 0;
    for (int i = 0; i < started; i++) {
        pthread_join(tids[i], NULL);
        if (args[i].failed) {
            snprintf(err, errlen, "rank %d: out of memory for %zu floats", i, sh->len);
            rc = -1;
        }
    }
    comm_free(&sh->comm);
out:
    free(sh->copy_src);
    free(sh->copy_dst);
    return rc;
}

static int parse_list(const char *s, long lo, long hi, long *out, int *count)
{
    *count = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < lo || v > hi || *count == MAX_LIST || (*end && *end != ','))
            return -1;
        out[(*count)++] = v;
        s = *end ? end + 1 : end;
    }
    return *count ? 0 : -1;
}

int main(int argc, char **argv)
{
    long sizes[MAX_LIST] = {132220, 2748890}, replicas[MAX_LIST] = {2, 3, 4, 8};
    int nsizes = 2, nreplicas = 4, reps = 7;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (v && !strcmp(a, "--sizes") && parse_list(v, 1, 1L << 30, sizes, &nsizes) == 0)
            i++;
        else if (v && !strcmp(a, "--replicas") &&
                 parse_list(v, 2, MAX_LIST * 8, replicas, &nreplicas) == 0)
            i++;
        else if (v && !strcmp(a, "--reps") && (reps = atoi(v)) >= 1 && reps <= MAX_REPS)
            i++;
        else {
            fprintf(stderr, "usage: sync_cost [--sizes 132220,2748890] [--replicas 2,3,4,8] "
                            "[--reps R]\n");
            return 2;
        }
    }
    cpu_set_t set;
    static int cores[CPU_SETSIZE];
    int ncores = 0;
    sched_getaffinity(0, sizeof set, &set);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set))
            cores[ncores++] = c;
    printf("Parle sync per outer iteration on %d cores, median of %d reps\n", ncores, reps);
    printf("%9s %3s %6s | %10s %7s | %10s %7s | %10s %7s | %6s %6s\n", "floats", "n", "iters",
           "allreduce", "GB/s", "+outer", "GB/s", "memcpy", "GB/s", "ar/mc", "sync/mc");
    static char summary[MAX_LIST * MAX_LIST][192];
    int nsummary = 0;
    for (int s = 0; s < nsizes; s++)
        for (int r = 0; r < nreplicas; r++) {
            static shared sh;
            memset(&sh, 0, sizeof sh);
            sh.n = (int)replicas[r];
            sh.len = (size_t)sizes[s];
            sh.reps = reps;
            sh.cores = cores;
            sh.ncores = ncores;
            /* About 1 GB of all-reduce traffic per timed block: a tenth of a
             * second or more, many scheduler slices. */
            double bytes_ar = (double)(sh.n + 1) * 4.0 * (double)sh.len;
            double it = 1e9 / bytes_ar;
            sh.iters = it < 5 ? 5 : it > 2000 ? 2000 : (int)it;
            char err[256];
            if (measure(&sh, err, sizeof err) != 0) {
                fprintf(stderr, "sync_cost: %s\n", err);
                return 1;
            }
            double t_ar = median(sh.times[OP_ALLREDUCE], reps);
            double t_sync = median(sh.times[OP_SYNC], reps);
            double t_mc = median(sh.times[OP_MEMCPY], reps);
            double bytes_sync = bytes_ar + 6.0 * sh.n * 4.0 * (double)sh.len;
            double bw_ar = bytes_ar / t_ar / 1e9, bw_sync = bytes_sync / t_sync / 1e9;
            double bw_mc = bytes_ar / t_mc / 1e9;
            printf("%9zu %3d %6d | %7.3f ms %7.2f | %7.3f ms %7.2f | %7.3f ms %7.2f | %5.0f%% "
                   "%5.0f%%\n",
                   sh.len, sh.n, sh.iters, 1e3 * t_ar, bw_ar, 1e3 * t_sync, bw_sync, 1e3 * t_mc,
                   bw_mc, 100 * bw_ar / bw_mc, 100 * bw_sync / bw_mc);
            snprintf(summary[nsummary++], sizeof summary[0],
                     "SUMMARY\tParle sync, %zu floats, n=%d\tall-reduce %.3f ms, %.1f GB/s"
                     "\t+outer %.3f ms\tmemcpy %.1f GB/s\tall-reduce/memcpy %.0f%%",
                     sh.len, sh.n, 1e3 * t_ar, bw_ar, 1e3 * t_sync, bw_mc, 100 * bw_ar / bw_mc);
            fflush(stdout);
        }
    for (int i = 0; i < nsummary; i++)
        puts(summary[i]);
    return 0;
}
