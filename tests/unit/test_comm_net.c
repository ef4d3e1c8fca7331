/* comm across processes, without MPI: two comms in this process stand for
 * two processes of one job (replicas 0..1 in the first, 2 in the second),
 * joined by a comm_net whose collectives meet in shared memory. It checks
 * what the MPI tests can only see through a trained master: the all-reduce
 * mean over every replica against float64, the agreements, the exchange's
 * view of every replica's vector by its number in the job (a peer read of
 * the other process included), and comm_shared_rows' entries arriving with
 * the exchange. Runs under ThreadSanitizer too. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
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

int main(void)
{
    test_init("comm_net");
    test_fill_uniform(&inputs[0][0][0], (size_t)ROUNDS * TOTAL * LEN, -10, 10);
    char err[256] = "";
    for (int p = 0; p < PROCS; p++) {
        int n = first_of[p + 1] - first_of[p];
        CHECK(comm_init(&procs[p].c, n, 0, err, sizeof err) == 0, "comm_init: %s", err);
        procs[p].net = (comm_net){.total = TOTAL, .procs = PROCS, .proc = p, .timeout_s = 30,
                                  .sum_floats = sum_floats, .sum_doubles = sum_doubles,
                                  .gather_int = gather_int, .bcast_bytes = bcast_bytes,
                                  .gather_floats = gather_floats,
                                  .gather_doubles = gather_doubles, .fail = fail};
        procs[p].c.net = &procs[p].net;
        procs[p].c.first = first_of[p];
    }
    pthread_t tids[TOTAL];
    replica_arg args[TOTAL];
    for (int id = 0; id < TOTAL; id++) {
        int p = id < first_of[1] ? 0 : 1;
        args[id] = (replica_arg){.proc = p, .rank = id - first_of[p], .id = id};
        pthread_create(&tids[id], NULL, replica_thread, &args[id]);
    }
    for (int id = 0; id < TOTAL; id++) {
        pthread_join(tids[id], NULL);
        CHECK(args[id].wrong == 0, "replica %d: %d checks failed", id, args[id].wrong);
        CHECK(args[id].worst <= 1e-5, "replica %d: the mean over both processes off by %.3g",
              id, args[id].worst);
    }
    for (int p = 0; p < PROCS; p++) {
        CHECK(!comm_aborted(&procs[p].c), "process %d's comm aborted: %s", p,
              comm_abort_reason(&procs[p].c));
        comm_free(&procs[p].c);
    }
    return test_main_end();
}
