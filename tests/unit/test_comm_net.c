/* comm across processes, without MPI: two comms in this process stand for
 * two processes of one job (replicas 0..1 in the first, 2 in the second),
 * joined by a comm_net whose collectives meet in shared memory. It checks
 * what the MPI tests can only see through a trained master: the all-reduce
 * mean over every replica against float64, the agreements, the exchange's
 * view of every replica's vector by its number in the job (a peer read of
 * the other process included), and comm_shared_rows' entries arriving with
 * the exchange. Then the asynchronous rules' peer operations across the two
 * (comm_peer_net.c), each against float64, and pair averages racing local
 * steps and each other, whose sum over replicas must hold. Runs under
 * ThreadSanitizer too. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "comm_peer.h"
#include "testutil.h"

enum { PROCS = 2, TOTAL = 3, LEN = 1001, ROUNDS = 20, MAXBYTES = TOTAL * LEN * 8 };
static const int first_of[PROCS + 1] = {0, 2, 3}; /* process p: replicas [p], [p + 1]) */

/* The fake network: a generation-counted meeting of the processes' leaders,
 * each leaving its bytes in its slot; every collective reads them all. */
typedef struct net_hub {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    int arrived;
    unsigned long generation;
    unsigned char slot[PROCS][MAXBYTES];
    size_t size[PROCS];
} net_hub;

static net_hub hub = {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

/* Leave `bytes` of `mine` (NULL: nothing) in this process's slot and wait
 * for the other. */
static void meet(int proc, const void *mine, size_t bytes)
{
    pthread_mutex_lock(&hub.lock);
    if (mine) {
        memcpy(hub.slot[proc], mine, bytes);
        hub.size[proc] = bytes;
    }
    unsigned long gen = hub.generation;
    if (++hub.arrived == PROCS) {
        hub.arrived = 0;
        hub.generation++;
        pthread_cond_broadcast(&hub.wake);
    }
    while (gen == hub.generation)
        pthread_cond_wait(&hub.wake, &hub.lock);
    pthread_mutex_unlock(&hub.lock);
}

/* Both read the slots between two meetings: this second one keeps a fast
 * process from overwriting a slot the other still reads. */
static void done_reading(int proc) { meet(proc, NULL, 0); }

static int sum_floats(const comm_net *net, comm *c, float *buf, size_t len)
{
    (void)c;
    meet(net->proc, buf, len * sizeof(float));
    for (size_t i = 0; i < len; i++) {
        float s = 0.0f;
        for (int p = 0; p < PROCS; p++)
            s += ((const float *)hub.slot[p])[i];
        buf[i] = s;
    }
    done_reading(net->proc);
    return 0;
}

static int sum_doubles(const comm_net *net, comm *c, double *buf, int len)
{
    (void)c;
    meet(net->proc, buf, (size_t)len * sizeof(double));
    for (int i = 0; i < len; i++) {
        double s = 0.0;
        for (int p = 0; p < PROCS; p++)
            s += ((const double *)hub.slot[p])[i];
        buf[i] = s;
    }
    done_reading(net->proc);
    return 0;
}

/* Every process's replicas' `each` bytes, by replica number, into all. */
static void gather(int proc, void *all, size_t each)
{
    unsigned char *a = all;
    meet(proc, a + (size_t)first_of[proc] * each,
         (size_t)(first_of[proc + 1] - first_of[proc]) * each);
    for (int p = 0; p < PROCS; p++)
        if (p != proc)
            memcpy(a + (size_t)first_of[p] * each, hub.slot[p], hub.size[p]);
    done_reading(proc);
}

static int gather_floats(const comm_net *net, comm *c, float *all, size_t len)
{
    (void)c;
    gather(net->proc, all, len * sizeof(float));
    return 0;
}

static int gather_doubles(const comm_net *net, comm *c, double *all)
{
    (void)c;
    gather(net->proc, all, sizeof(double));
    return 0;
}

static int gather_int(const comm_net *net, comm *c, int mine, int *all)
{
    (void)c;
    meet(net->proc, &mine, sizeof mine);
    for (int p = 0; p < PROCS; p++)
        all[p] = *(const int *)hub.slot[p];
    done_reading(net->proc);
    return 0;
}

static int bcast_bytes(const comm_net *net, comm *c, void *buf, int len)
{
    (void)c;
    meet(net->proc, buf, (size_t)len);
    memcpy(buf, hub.slot[0], (size_t)len);
    done_reading(net->proc);
    return 0;
}

static void fail(const comm_net *net, const char *reason) { (void)net, (void)reason; }

/* Peer requests: a process answers one at a time, as the net's one thread
 * would, from the moment it serves until it stops; a request to a process
 * not serving yet waits, as it would in MPI's queue. */
typedef struct fake_server {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    comm_peer_handler fn;
    void *arg;
    size_t max;
    int serving;
    _Alignas(16) unsigned char answer[MAXBYTES]; /* as malloc aligns the net's buffers */
} fake_server;

static fake_server servers[PROCS] = {
    {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER},
    {.lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER}};

static int serve(const comm_net *net, comm *c, comm_peer_handler fn, void *arg, size_t max,
                 char *err, size_t errlen)
{
    (void)c, (void)err, (void)errlen;
    fake_server *sv = &servers[net->proc];
    pthread_mutex_lock(&sv->lock);
    sv->fn = fn, sv->arg = arg, sv->max = max, sv->serving = 1;
    pthread_cond_broadcast(&sv->wake);
    pthread_mutex_unlock(&sv->lock);
    return max <= MAXBYTES ? 0 : -1;
}

static void unserve(const comm_net *net)
{
    fake_server *sv = &servers[net->proc];
    pthread_mutex_lock(&sv->lock);
    sv->serving = 0;
    pthread_mutex_unlock(&sv->lock);
}

static long call(const comm_net *net, comm *c, int rank, int peer, const void *req, size_t len,
                 void *reply, size_t cap)
{
    (void)net, (void)rank;
    fake_server *sv = &servers[peer < first_of[1] ? 0 : 1];
    pthread_mutex_lock(&sv->lock);
    while (!sv->serving)
        pthread_cond_wait(&sv->wake, &sv->lock);
    size_t n = sv->fn(sv->arg, req, len, sv->answer, sv->max);
    if (n <= cap)
        memcpy(reply, sv->answer, n);
    pthread_mutex_unlock(&sv->lock);
    if (n > cap) {
        comm_abort(c, "an answer of %zu bytes for %zu", n, cap);
        return -1;
    }
    return (long)n;
}

/* Replica id's vector of round k: fresh random values. */
static float inputs[ROUNDS][TOTAL][LEN];

typedef struct proc_state {
    comm c;
    comm_net net;
} proc_state;

static proc_state procs[PROCS];

typedef struct replica_arg {
    int proc, rank, id;
    int wrong;          /* checks failed, counted by the thread */
    double worst;       /* the all-reduce's largest relative error */
} replica_arg;

static void *replica_thread(void *p)
{
    replica_arg *a = p;
    comm *c = &procs[a->proc].c;
    backend_ctx ctx;
    backend_ctx_init_cpu(&ctx, 1);
    float mine[LEN];
    char err[256];
    if (comm_attach(c, a->rank, &ctx, LEN, err, sizeof err) != 0) {
        a->wrong++;
        goto out;
    }
    double *rows = comm_shared_rows(c, a->rank, 2);
    if (!rows) {
        a->wrong++;
        goto out;
    }
    for (int k = 0; k < ROUNDS; k++) {
        memcpy(mine, inputs[k][a->id], sizeof mine);
        const float *mean = comm_allreduce_mean(c, a->rank, &ctx, mine, LEN);
        for (int i = 0; mean && i < LEN; i++) {
            double want = 0.0, scale = 0.0;
            for (int id = 0; id < TOTAL; id++)
                want += inputs[k][id][i] / (double)TOTAL, scale += fabs(inputs[k][id][i]);
            double e = fabs(mean[i] - want) / (1e-6 + scale / TOTAL);
            a->worst = e > a->worst ? e : a->worst;
        }
        a->wrong += !mean;
        /* Agreements: the OR of flags only replica 2 raises, the mean of ids. */
        int any = comm_any(c, a->rank, a->id == 2 && k % 2);
        a->wrong += any != (k % 2);
        double m = -1.0;
        a->wrong += comm_mean_double(c, a->rank, a->id, &m) != 0 || m != 1.0;
        /* Each replica writes its own entries, then every one is seen. */
        rows[a->id] = 10.0 * k + a->id;
        rows[TOTAL + a->id] = -a->id;
        const float *const *all = comm_exchange(c, a->rank, &ctx, mine, LEN);
        for (int id = 0; all && id < TOTAL; id++) {
            a->wrong += memcmp(all[id], inputs[k][id], sizeof mine) != 0;
            a->wrong += rows[id] != 10.0 * k + id || rows[TOTAL + id] != -id;
        }
        /* A peer read of the next replica: across the processes for 1 and 2. */
        float scratch[LEN];
        int peer = (a->id + 1) % TOTAL;
        const float *got = all ? comm_read_peer(c, a->rank, &ctx, peer, scratch, LEN) : NULL;
        a->wrong += !got || memcmp(got, inputs[k][peer], sizeof mine) != 0;
        a->wrong += !all || comm_exchange_end(c, a->rank, &ctx) != 0;
    }
out:
    comm_detach(c, a->rank);
    backend_ctx_free(&ctx);
    return NULL;
}

/* ---- peer operations across the two processes ---- */

enum { STEPS = 300 };
static float x0[TOTAL][LEN], published[TOTAL][LEN], pushed[TOTAL][LEN], own[TOTAL][LEN];
static float centre_in[LEN];

/* Every replica of the job past this point (an agreement over the net). */
static int all_here(replica_arg *a, comm *c) { return comm_any(c, a->rank, 0) == 0; }

static void check_close(replica_arg *a, const float *got, const double *want, double tol)
{
    for (int i = 0; i < LEN; i++)
        if (fabs(got[i] - want[i]) > tol * (1.0 + fabs(want[i]))) {
            a->wrong++;
            return;
        }
}

static void *peer_thread(void *arg)
{
    replica_arg *a = arg;
    comm *c = &procs[a->proc].c;
    backend_ctx ctx;
    backend_ctx_init_cpu(&ctx, 1);
    char err[256];
    comm_peer *p = NULL;
    double want[LEN];
    unsigned parts = PEER_SNAPSHOT | PEER_PAIR | PEER_MAILBOX | PEER_CENTRE | PEER_CENTRE_ASYNC;
    if (comm_attach(c, a->rank, &ctx, LEN, err, sizeof err) != 0 ||
        comm_peer_attach(c, a->rank, &ctx, LEN, parts, x0[a->id], &p, err, sizeof err) != 0 ||
        !all_here(a, c)) {
        a->wrong++;
        goto out;
    }
    /* A snapshot of the next replica: across the processes for 1 and 2. */
    comm_peer_publish(p, a->rank, &ctx, published[a->id], a->id, 10.0 + a->id);
    int next = (a->id + 1) % TOTAL;
    float got[LEN];
    peer_meta meta;
    a->wrong += !all_here(a, c);
    a->wrong += comm_peer_fetch(p, a->rank, next, &ctx, 5.0, got, &meta) != 0 ||
                memcmp(got, published[next], sizeof got) != 0 || meta.clock != next ||
                meta.loss != 10.0 + next || meta.version != 1;
    /* Replica 2 averages with replica 0, in the other process. */
    a->wrong += !all_here(a, c);
    if (a->id == 2)
        comm_peer_pair_average(p, a->rank, 0, &ctx, NULL);
    a->wrong += !all_here(a, c);
    for (int i = 0; i < LEN; i++)
        want[i] = a->id == 1 ? x0[1][i] : 0.5 * x0[0][i] + 0.5 * x0[2][i];
    check_close(a, comm_peer_x(p, a->rank), want, 1e-6);
    /* Pushes: 2 -> 0 (across), 1 -> 0 (within), 1 -> 2 (across). */
    comm_peer_set_weight(p, a->rank, 0.25);
    a->wrong += !all_here(a, c);
    if (a->id == 2)
        comm_peer_push(p, a->rank, 0, &ctx, pushed[2], 0.125);
    if (a->id == 1) {
        comm_peer_push(p, a->rank, 0, &ctx, pushed[1], 0.5);
        comm_peer_push(p, a->rank, 2, &ctx, pushed[1], 0.5);
    }
    a->wrong += !all_here(a, c);
    const double in0 = 0.125 + 0.5, in2 = 0.5;
    for (int i = 0; i < LEN; i++)
        want[i] = a->id == 0 ? (0.25 * own[0][i] + 0.125 * pushed[2][i] + 0.5 * pushed[1][i]) /
                                   (0.25 + in0)
                  : a->id == 2 ? (0.25 * own[2][i] + 0.5 * pushed[1][i]) / (0.25 + in2)
                               : own[1][i];
    a->wrong += comm_peer_absorb(p, a->rank, &ctx, own[a->id], 1) != (a->id != 1);
    check_close(a, own[a->id], want, 1e-5);
    double weight = a->id == 0 ? 0.25 + in0 : a->id == 2 ? 0.25 + in2 : 0.25;
    a->wrong += fabs(comm_peer_weight(p, a->rank) - weight) > 1e-12;
    /* The EASGD centre is process 0's (replica 0's x0): replica 2 averages. */
    for (int i = 0; i < LEN; i++)
        want[i] = 0.5 * x0[0][i] + 0.5 * centre_in[i];
    if (a->id == 2) {
        float x[LEN];
        memcpy(x, centre_in, sizeof x);
        comm_peer_centre_average(p, a->rank, &ctx, x);
        check_close(a, x, want, 1e-6);
    }
    a->wrong += !all_here(a, c);
    if (a->id == 0)
        check_close(a, comm_peer_centre(p), want, 1e-6);
    /* Pair averages (sum-preserving) race every replica's own steps, which
     * add a known delta under its lock: the sum over replicas must hold. */
    for (int k = 0; k < STEPS; k++) {
        float *x = comm_peer_x(p, a->rank);
        comm_peer_lock(p, a->rank);
        for (int i = 0; i < LEN; i++)
            x[i] += 0.01f * (float)(a->id + 1);
        comm_peer_unlock(p, a->rank, &ctx);
        comm_peer_pair_average(p, a->rank, (a->id + 1 + k % 2) % TOTAL, &ctx, NULL);
    }
    a->wrong += !all_here(a, c);
    const float *mean = comm_allreduce_mean(c, a->rank, &ctx, comm_peer_x(p, a->rank), LEN);
    for (int i = 0; mean && i < LEN; i++) {
        double sum = 0.0;
        for (int id = 0; id < TOTAL; id++)
            sum += (id == 1 ? x0[1][i] : 0.5 * x0[0][i] + 0.5 * x0[2][i]) + 0.01 * (id + 1) * STEPS;
        want[i] = sum / TOTAL;
    }
    if (mean)
        check_close(a, mean, want, 1e-4);
    a->wrong += !mean || !all_here(a, c);
    peer_counts counts;
    comm_peer_counts(p, a->rank, &counts);
    a->wrong += counts.exchanges != STEPS + (a->id == 2) || counts.fetches != 1 ||
                counts.pushes != (a->id == 1 ? 2 : a->id == 2);
out:
    comm_peer_detach(p, a->rank, &ctx);
    comm_detach(c, a->rank);
    backend_ctx_free(&ctx);
    return NULL;
}

/* Both processes' comms, joined by the fake net. */
static void procs_init(void)
{
    char err[256] = "";
    for (int p = 0; p < PROCS; p++) {
        int n = first_of[p + 1] - first_of[p];
        CHECK(comm_init(&procs[p].c, n, 0, err, sizeof err) == 0, "comm_init: %s", err);
        procs[p].net = (comm_net){.total = TOTAL, .procs = PROCS, .proc = p, .timeout_s = 30,
                                  .sum_floats = sum_floats, .sum_doubles = sum_doubles,
                                  .gather_int = gather_int, .bcast_bytes = bcast_bytes,
                                  .gather_floats = gather_floats,
                                  .gather_doubles = gather_doubles, .call = call,
                                  .serve = serve, .unserve = unserve, .fail = fail};
        procs[p].c.net = &procs[p].net;
        procs[p].c.first = first_of[p];
    }
}

/* One thread per replica of the job, each of its process's comm; then the
 * checks of each and the comms freed. */
static void run_replicas(void *(*body)(void *), const char *what)
{
    pthread_t tids[TOTAL];
    replica_arg args[TOTAL];
    for (int id = 0; id < TOTAL; id++) {
        int p = id < first_of[1] ? 0 : 1;
        args[id] = (replica_arg){.proc = p, .rank = id - first_of[p], .id = id};
        pthread_create(&tids[id], NULL, body, &args[id]);
    }
    for (int id = 0; id < TOTAL; id++) {
        pthread_join(tids[id], NULL);
        CHECK(args[id].wrong == 0, "%s: replica %d: %d checks failed", what, id, args[id].wrong);
        CHECK(args[id].worst <= 1e-5, "%s: replica %d: the mean over both processes off by "
              "%.3g", what, id, args[id].worst);
    }
    for (int p = 0; p < PROCS; p++) {
        CHECK(!comm_aborted(&procs[p].c), "%s: process %d's comm aborted: %s", what, p,
              comm_abort_reason(&procs[p].c));
        comm_free(&procs[p].c);
    }
}

int main(void)
{
    test_init("comm_net");
    test_fill_uniform(&inputs[0][0][0], (size_t)ROUNDS * TOTAL * LEN, -10, 10);
    procs_init();
    run_replicas(replica_thread, "collectives");
    test_fill_uniform(&x0[0][0], (size_t)TOTAL * LEN, -5, 5);
    test_fill_uniform(&published[0][0], (size_t)TOTAL * LEN, -5, 5);
    test_fill_uniform(&pushed[0][0], (size_t)TOTAL * LEN, -5, 5);
    test_fill_uniform(&own[0][0], (size_t)TOTAL * LEN, -5, 5);
    test_fill_uniform(centre_in, LEN, -5, 5);
    procs_init();
    run_replicas(peer_thread, "peers");
    return test_main_end();
}
