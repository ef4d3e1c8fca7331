/* comm on GPUs (docs/gpu.md, "Many GPUs"), on real replica threads:
 *  - 2 and 3 replicas on one GPU: the all-reduce (events, one vec_mean on
 *    the leader's stream, no NCCL) equals the CPU comm's on the same inputs,
 *    over rounds of different lengths in which every rank overwrites its
 *    vector as soon as the all-reduce returns;
 *  - comm_read_peer on one GPU hands out the peer's own vector;
 *  - a replica that never reaches the all-reduce: the watchdog's check
 *    names it and the abort sends the others home;
 *  - with two GPUs or more: 2, 3 (uneven groups) and 4 replicas on 2 GPUs
 *    (NCCL, one rank per GPU) against the CPU comm, and peer reads between
 *    GPUs (copies, P2P or staged), exact.
 * Exits 77 without a device; the 2-GPU part skips with its own line. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm.h"
#include "testutil.h"
#include "topology.h"

enum { ROUNDS = 8, MAXN = 4, MAXLEN = 300007 };
static const size_t lens[] = {1, 7, 4099, MAXLEN};

typedef struct job {
    comm c;
    int n, ngpus;
    const int *gpus;
    const float *inputs;  /* [ROUNDS][n][MAXLEN] */
    float *got;           /* [ROUNDS][n][MAXLEN]: each rank's result */
    float *peer;          /* [n][MAXLEN]: rank r's read of rank (r + 1) % n, round 0's vector */
    int direct[MAXN];     /* rank r was handed the peer's own pointer */
    int failed[MAXN];
    char err[MAXN][512];
} job;

typedef struct worker_arg { job *j; int rank; } worker_arg;

static const float *input(const job *j, int round, int rank)
{
    return j->inputs + ((size_t)round * (size_t)j->n + (size_t)rank) * MAXLEN;
}

static void fail(job *j, int rank, const char *what)
{
    if (!j->failed[rank])
        snprintf(j->err[rank], sizeof j->err[rank], "%s", what);
    j->failed[rank] = 1;
}

static void *worker(void *p)
{
    worker_arg *a = p;
    job *j = a->j;
    int rank = a->rank, dev = topology_device(rank, j->gpus, j->ngpus), ok = 1;
    backend_ctx ctx;
    char err[512];
    float *vec = NULL, *scratch = NULL;
    if (dev < 0) {
        backend_ctx_init_cpu(&ctx, 1);
    } else if (backend_ctx_init_cuda(&ctx, dev, PRECISION_FP32, 1, err, sizeof err) != 0) {
        fail(j, rank, err);
        comm_abort(&j->c, "replica %d: %s", rank, err);
        ok = 0;
    }
    if (ok) {
        vec = backend_alloc(&ctx, MAXLEN * sizeof(float));
        scratch = backend_alloc(&ctx, MAXLEN * sizeof(float));
        if (!vec || !scratch) {
            fail(j, rank, ctx.err);
            comm_abort(&j->c, "replica %d: %s", rank, ctx.err);
        }
    }
    /* As the runner does: attach even after a failure, to meet the others. */
    if (comm_attach(&j->c, rank, &ctx, MAXLEN, err, sizeof err) != 0)
        fail(j, rank, err);
    for (int round = 0; round < ROUNDS && !j->failed[rank]; round++) {
        size_t len = lens[round % 4];
        /* Queued right behind the last all-reduce: the stream order must
         * keep this write after the leader's read of the old vector. */
        backend_upload(&ctx, vec, input(j, round, rank), len * sizeof(float));
        const float *mean = comm_allreduce_mean(&j->c, rank, &ctx, vec, len);
        if (!mean) {
            fail(j, rank, comm_abort_reason(&j->c));
            break;
        }
        backend_download(&ctx, j->got + ((size_t)round * (size_t)j->n + (size_t)rank) * MAXLEN,
                         mean, len * sizeof(float));
    }
    if (!j->failed[rank]) {
        backend_upload(&ctx, vec, input(j, 0, rank), MAXLEN * sizeof(float));
        const float *const *all = comm_exchange(&j->c, rank, &ctx, vec, MAXLEN);
        int peer = (rank + 1) % j->n;
        const float *got = all ? comm_read_peer(&j->c, rank, &ctx, peer, scratch, MAXLEN) : NULL;
        if (got) {
            j->direct[rank] = got == all[peer];
            backend_download(&ctx, j->peer + (size_t)rank * MAXLEN, got, MAXLEN * sizeof(float));
        }
        if (!got || comm_exchange_end(&j->c, rank, &ctx) != 0)
            fail(j, rank, "the peer exchange was aborted");
    }
    if (ok && backend_failed(&ctx))
        fail(j, rank, ctx.err);
    comm_detach(&j->c, rank);
    if (ok) {
        backend_free(&ctx, vec);
        backend_free(&ctx, scratch);
        backend_ctx_free(&ctx);
    }
    return NULL;
}

/* n replicas on gpus[ngpus] (none: the CPU comm); 0 if every rank finished. */
static int run_job(job *j, int n, const int *gpus, int ngpus, const float *inputs)
{
    memset(j, 0, sizeof *j);
    j->n = n, j->gpus = gpus, j->ngpus = ngpus, j->inputs = inputs;
    j->got = calloc((size_t)ROUNDS * (size_t)n * MAXLEN, sizeof(float));
    j->peer = calloc((size_t)n * MAXLEN, sizeof(float));
    char err[256];
    CHECK(j->got && j->peer && comm_init(&j->c, n, 0, err, sizeof err) == 0, "setup");
    pthread_t t[MAXN];
    worker_arg a[MAXN];
    for (int r = 0; r < n; r++) {
        a[r] = (worker_arg){j, r};
        pthread_create(&t[r], NULL, worker, &a[r]);
    }
    for (int r = 0; r < n; r++)
        pthread_join(t[r], NULL);
    int bad = 0;
    for (int r = 0; r < n; r++) {
        CHECK(!j->failed[r], "n=%d on %d GPU(s), rank %d: %s", n, ngpus, r, j->err[r]);
        bad |= j->failed[r];
    }
    comm_free(&j->c);
    return bad ? -1 : 0;
}

static void job_free(job *j)
{
    free(j->got);
    free(j->peer);
}

/* n replicas on gpus against the CPU comm on the same inputs. */
static void against_cpu(int n, const int *gpus, int ngpus)
{
    float *inputs = malloc(sizeof(float) * ROUNDS * (size_t)n * MAXLEN);
    test_fill_uniform(inputs, (size_t)ROUNDS * (size_t)n * MAXLEN, -10, 10);
    job cpu, gpu;
    int ok = run_job(&cpu, n, NULL, 0, inputs) == 0;
    ok &= run_job(&gpu, n, gpus, ngpus, inputs) == 0;
    double worst = 0;
    size_t differ = 0, total = 0;
    for (int round = 0; ok && round < ROUNDS; round++) {
        size_t len = lens[round % 4];
        for (size_t i = 0; i < len; i++) {
            double scale = 0;
            for (int r = 0; r < n; r++)
                scale += fabs(input(&cpu, round, r)[i]);
            size_t at = (size_t)round * (size_t)n * MAXLEN + i;
            float want = cpu.got[at];
            for (int r = 0; r < n; r++) {
                float got = gpu.got[at + (size_t)r * MAXLEN];
                /* Relative to the mean magnitude: the mean may cancel to ~0. */
                double e = fabs((double)got - want) / (1e-6 + scale / n);
                worst = e > worst ? e : worst;
                differ += memcmp(&got, &want, sizeof got) != 0;
                total++;
            }
        }
    }
    CHECK(ok && worst <= 1e-5, "%d replicas on %d GPU(s): the mean is off the CPU comm's by %.3g",
          n, ngpus, worst);
    /* Peer reads: the peer's own vector on one memory, an exact copy across. */
    for (int r = 0; ok && r < n; r++) {
        int peer = (r + 1) % n;
        int same = topology_device(r, gpus, ngpus) == topology_device(peer, gpus, ngpus);
        CHECK(gpu.direct[r] == same, "rank %d reading rank %d: direct %d, same GPU %d", r, peer,
              gpu.direct[r], same);
        CHECK(memcmp(gpu.peer + (size_t)r * MAXLEN, input(&gpu, 0, peer),
                     MAXLEN * sizeof(float)) == 0,
              "rank %d's read of rank %d differs from rank %d's vector", r, peer, peer);
    }
    printf("%d replicas on %d GPU(s): max error %.3g of the mean's scale; %zu of %zu values not "
           "bit-identical to the CPU comm's\n", n, ngpus, worst, differ, total);
    job_free(&cpu);
    job_free(&gpu);
    free(inputs);
}

/* Ranks 0 and 1 enter an all-reduce on the GPU that rank 2 never reaches. */
typedef struct stuck { comm *c; int rank, attached; const float *got; } stuck;

static void *stuck_worker(void *p)
{
    stuck *s = p;
    backend_ctx ctx;
    char err[512];
    if (backend_ctx_init_cuda(&ctx, 0, PRECISION_FP32, 1, err, sizeof err) != 0) {
        comm_abort(s->c, "%s", err);
        return NULL;
    }
    float *v = backend_alloc(&ctx, 64 * sizeof(float));
    backend_zero(&ctx, v, 64 * sizeof(float));
    if (comm_attach(s->c, s->rank, &ctx, 64, err, sizeof err) == 0) {
        __atomic_store_n(&s->attached, 1, __ATOMIC_RELEASE);
        if (s->rank == 2)
            while (!comm_aborted(s->c))
                usleep(1000);
        s->got = comm_allreduce_mean(s->c, s->rank, &ctx, v, 64);
    }
    comm_detach(s->c, s->rank);
    backend_free(&ctx, v);
    backend_ctx_free(&ctx);
    return NULL;
}

static void missing_rank(void)
{
    comm c;
    char err[128];
    CHECK(comm_init(&c, 3, 0, err, sizeof err) == 0, "%s", err);
    stuck s[3];
    pthread_t t[3];
    for (int r = 0; r < 3; r++) {
        s[r] = (stuck){&c, r, 0, (const float *)&s};
        pthread_create(&t[r], NULL, stuck_worker, &s[r]);
    }
    /* Creating the contexts may take longer than the deadline: watch only
     * once everyone is past the start line. */
    double t0 = comm_now_s();
    int all = 0;
    while (!all && !comm_aborted(&c) && comm_now_s() - t0 < 60) {
        usleep(10000);
        all = 1;
        for (int r = 0; r < 3; r++)
            all &= __atomic_load_n(&s[r].attached, __ATOMIC_ACQUIRE);
    }
    CHECK(all, "the three replicas did not attach: %s", comm_abort_reason(&c));
    int missing = -1, overdue = 0;
    const char *what = NULL;
    t0 = comm_now_s();
    while (all && !overdue && comm_now_s() - t0 < 30) {
        usleep(10000);
        overdue = comm_overdue(&c, comm_now_s(), 0.2, &missing, &what);
    }
    CHECK(!all || (overdue == 1 && missing == 2 && what && strcmp(what, "all-reduce") == 0),
          "overdue %d missing %d what %s", overdue, missing, what ? what : "(null)");
    comm_abort(&c, "replica %d is late", missing);
    for (int r = 0; r < 3; r++) {
        pthread_join(t[r], NULL);
        CHECK(s[r].got == NULL, "rank %d got a result from an aborted all-reduce", r);
    }
    printf("a missing replica on the GPU: named after %.2f s, the others sent home\n",
           comm_now_s() - t0);
    comm_free(&c);
}

int main(void)
{
    test_init("gpu_comm");
    int ndev = backend_cuda_devices();
    if (ndev == 0) {
        printf("SKIP: no CUDA device\n");
        return 77;
    }
    const int one[] = {0}, two[] = {0, 1};
    against_cpu(2, one, 1);
    against_cpu(3, one, 1);
    missing_rank();
    if (ndev < 2) {
        printf("SKIP: NCCL across GPUs and peer copies between GPUs need 2 CUDA devices "
               "(this machine has 1)\n");
    } else {
        printf("GPU 0 %s GPU 1's memory directly\n",
               topology_peer_access(0, 1) ? "reads" : "cannot read (copies are staged)");
        against_cpu(2, two, 2);
        against_cpu(3, two, 2);
        against_cpu(4, two, 2);
    }
    return test_main_end();
}
