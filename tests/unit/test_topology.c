/* Topology (daemon/comm/topology.h): the runner's rank -> GPU map, the groups of
 * ranks sharing a GPU and their leaders, the weights that make uneven groups
 * average right, CPU lists and the cores nearest a PCI device (a fake sysfs
 * tree); and, on real threads, one rank's failure ending the others at
 * whatever collective each is in. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "comm.h"
#include "testutil.h"
#include "topology.h"

/* n replicas on the runner's placement over gpus[ngpus]; checks the groups
 * against want[g] (ranks in order, -1 ended) and returns the topology. */
static topology placed(int n, const int *gpus, int ngpus, int ngroups, const int want[][8])
{
    int device[TOPO_MAX_RANKS];
    char err[256] = "";
    topology t;
    for (int r = 0; r < n; r++)
        device[r] = topology_device(r, gpus, ngpus);
    CHECK(topology_build(&t, n, device, err, sizeof err) == 0, "n=%d: %s", n, err);
    CHECK(t.ngroups == ngroups, "n=%d on %d GPUs: %d groups, want %d", n, ngpus, t.ngroups,
          ngroups);
    float total = 0;
    for (int g = 0; g < t.ngroups && g < ngroups; g++) {
        int ranks[TOPO_MAX_RANKS], k = topology_members(&t, g, ranks), want_k = 0;
        while (want_k < 8 && want[g][want_k] >= 0)
            want_k++;
        CHECK(k == want_k && t.size[g] == k, "n=%d group %d: %d members, want %d", n, g, k,
              want_k);
        for (int i = 0; i < k && i < want_k; i++)
            CHECK(ranks[i] == want[g][i], "n=%d group %d member %d: rank %d, want %d", n, g, i,
                  ranks[i], want[g][i]);
        CHECK(t.leader[g] == want[g][0], "n=%d group %d: leader %d, want %d", n, g, t.leader[g],
              want[g][0]);
        CHECK(t.group_device[g] == (ngpus ? gpus[want[g][0] % ngpus] : -1),
              "n=%d group %d on device %d", n, g, t.group_device[g]);
        CHECK_CLOSE(topology_weight(&t, g), (double)k / n, 0, 1e-7, "group weight");
        total += topology_weight(&t, g);
        for (int i = 0; i < k; i++)
            CHECK(t.group[ranks[i]] == g && t.device[ranks[i]] == t.group_device[g],
                  "n=%d rank %d: group %d device %d", n, ranks[i], t.group[ranks[i]],
                  t.device[ranks[i]]);
    }
    CHECK_CLOSE(total, 1.0, 0, 1e-6, "the weights sum to 1");
    return t;
}

/* The two-level mean as the GPUs compute it (each group's mean in rank
 * order, then the sum of weight x group mean) against the mean of all. */
static void two_level_mean(const topology *t, size_t len)
{
    float *x = malloc(sizeof(float) * len * (size_t)t->n);
    test_fill_uniform(x, len * (size_t)t->n, -10, 10);
    double worst = 0;
    for (size_t i = 0; i < len; i++) {
        double want = 0, scale = 0;
        for (int r = 0; r < t->n; r++) {
            want += x[(size_t)r * len + i];
            scale += fabs(x[(size_t)r * len + i]);
        }
        want /= t->n;
        float got = 0;
        for (int g = 0; g < t->ngroups; g++) {
            int ranks[TOPO_MAX_RANKS], k = topology_members(t, g, ranks);
            float sum = 0;
            for (int j = 0; j < k; j++)
                sum += x[(size_t)ranks[j] * len + i];
            got += topology_weight(t, g) * (sum * (1.0f / (float)k));
        }
        double e = fabs(got - want) / (1e-6 + scale / t->n);
        worst = e > worst ? e : worst;
    }
    CHECK(worst <= 1e-5, "n=%d on %d groups: two-level mean off by %.3g", t->n, t->ngroups, worst);
    free(x);
}

static void groups(void)
{
    const int g01[] = {0, 1}, g012[] = {0, 1, 2}, g0[] = {0}, g25[] = {2, 5};
    /* 3 on 2 GPUs: uneven groups of 2 and 1, weighed 2/3 and 1/3. */
    topology t = placed(3, g01, 2, 2, (const int[][8]){{0, 2, -1}, {1, -1}});
    two_level_mean(&t, 1000);
    t = placed(8, g012, 3, 3, (const int[][8]){{0, 3, 6, -1}, {1, 4, 7, -1}, {2, 5, -1}});
    two_level_mean(&t, 1000);
    t = placed(1, g0, 1, 1, (const int[][8]){{0, -1}});
    /* n on one GPU: one group, so no NCCL at all (comm.c needs two groups). */
    t = placed(5, g0, 1, 1, (const int[][8]){{0, 1, 2, 3, 4, -1}});
    two_level_mean(&t, 1000);
    /* GPU ids as `devices` names them, not 0..G-1. */
    t = placed(3, g25, 2, 2, (const int[][8]){{0, 2, -1}, {1, -1}});
    CHECK(t.group_device[0] == 2 && t.group_device[1] == 5, "devices %d %d", t.group_device[0],
          t.group_device[1]);
    /* More GPUs than replicas: only the replicas' GPUs form groups. */
    t = placed(2, g012, 3, 2, (const int[][8]){{0, -1}, {1, -1}});
    /* The CPU is one group. */
    t = placed(4, NULL, 0, 1, (const int[][8]){{0, 1, 2, 3, -1}});

    char err[256] = "";
    int mixed[] = {0, -1, 0};
    CHECK(topology_build(&t, 3, mixed, err, sizeof err) == -1 && strstr(err, "replica 1"),
          "a job on the CPU and a GPU: %s", err);
    int many[TOPO_MAX_RANKS + 1] = {0};
    CHECK(topology_build(&t, TOPO_MAX_RANKS + 1, many, err, sizeof err) == -1,
          "too many replicas accepted");
}

/* A job over two processes (MPI): process A holds replicas 0..2 on its
 * GPUs 0, 1 (groups of 2 and 1), B holds replicas 3..4 on its one GPU. The
 * three groups are NCCL ranks 0, 1 | 2, each weighed by its size over all 5
 * replicas, so the NCCL sum of weighed group means is the mean of all 5. */
static void across_processes(void)
{
    const int a_dev[] = {0, 1, 0}, b_dev[] = {0, 0};
    topology a, b;
    char err[256] = "";
    CHECK(topology_build(&a, 3, a_dev, err, sizeof err) == 0 &&
              topology_build(&b, 2, b_dev, err, sizeof err) == 0, "%s", err);
    CHECK(a.nccl_first == 0 && a.nccl_ranks == 2 && a.total == 3,
          "one process: NCCL ranks %d.. of %d, total %d", a.nccl_first, a.nccl_ranks, a.total);
    CHECK(topology_join(&a, 0, 3, 5, err, sizeof err) == 0 &&
              topology_join(&b, 2, 3, 5, err, sizeof err) == 0, "join: %s", err);
    CHECK(b.nccl_first == 2 && b.nccl_ranks == 3, "B's NCCL rank %d of %d", b.nccl_first,
          b.nccl_ranks);
    enum { LEN = 500 };
    float x[5][LEN];
    test_fill_uniform(&x[0][0], 5 * LEN, -10, 10);
    double worst = 0;
    for (int i = 0; i < LEN; i++) {
        double want = 0, scale = 0;
        for (int r = 0; r < 5; r++)
            want += x[r][i] / 5.0, scale += fabs(x[r][i]) / 5.0;
        float got = topology_weight(&a, 0) * ((x[0][i] + x[2][i]) * 0.5f) +
                    topology_weight(&a, 1) * x[1][i] +
                    topology_weight(&b, 0) * ((x[3][i] + x[4][i]) * 0.5f);
        double e = fabs(got - want) / (1e-6 + scale);
        worst = e > worst ? e : worst;
    }
    CHECK(worst <= 1e-5, "the mean over two processes is off by %.3g", worst);
    CHECK_CLOSE(topology_weight(&a, 0) + topology_weight(&a, 1) + topology_weight(&b, 0), 1.0,
                0, 1e-6, "the weights over both processes sum to 1");
    /* Counts that cannot hold this process's part are refused. */
    CHECK(topology_join(&b, 2, 2, 5, err, sizeof err) == -1 && strstr(err, "disagree"),
          "groups past the total accepted");
    CHECK(topology_join(&a, 0, 3, 2, err, sizeof err) == -1, "fewer replicas than here accepted");
}

static void cpulists(void)
{
    int cpus[64];
    struct { const char *s; int n, first, last; } ok[] = {
        {"0-3,8-11\n", 8, 0, 11}, {"5", 1, 5, 5}, {"", 0, 0, 0}, {"\n", 0, 0, 0},
        {"0-15,32-47", 32, 0, 47}, {"2,4,6", 3, 2, 6}, {"7-7\n", 1, 7, 7},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        int n = topology_parse_cpulist(ok[i].s, cpus, 64);
        CHECK(n == ok[i].n, "\"%s\": %d cpus, want %d", ok[i].s, n, ok[i].n);
        if (n == ok[i].n && n > 0)
            CHECK(cpus[0] == ok[i].first && cpus[n - 1] == ok[i].last, "\"%s\": %d..%d", ok[i].s,
                  cpus[0], cpus[n - 1]);
    }
    const char *bad[] = {"1-", "a", "3-1", "1,,2", "-1", "1 2", "0-100"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(topology_parse_cpulist(bad[i], cpus, 64) == -1, "\"%s\" accepted", bad[i]);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "cannot write %s", path);
    if (f) {
        fputs(text, f);
        fclose(f);
    }
}

/* A sysfs tree with one GPU whose cores are 0-3 and 8-11. */
static void near_cpus(void)
{
    char root[] = "/tmp/parle-test-topology-XXXXXX", path[512];
    CHECK(mkdtemp(root) != NULL, "mkdtemp failed");
    const char *dirs[] = {"/bus", "/bus/pci", "/bus/pci/devices", "/bus/pci/devices/0000:3b:00.0"};
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s%s", root, dirs[i]);
        CHECK(mkdir(path, 0700) == 0, "mkdir %s", path);
    }
    snprintf(path, sizeof path, "%s/bus/pci/devices/0000:3b:00.0/local_cpulist", root);
    write_file(path, "0-3,8-11\n");

    int cpus[64];
    /* CUDA's upper-case id finds sysfs's lower-case directory. */
    CHECK(topology_local_cpus(root, "0000:3B:00.0", cpus, 64) == 8, "the GPU's 8 cores");
    CHECK(topology_local_cpus(root, "0000:AF:00.0", cpus, 64) == -1, "a GPU sysfs lacks");

    int job[] = {2, 3, 4, 9, 12}, out[5];
    int n = topology_near_cpus(root, "0000:3B:00.0", job, 5, out);
    CHECK(n == 3 && out[0] == 2 && out[1] == 3 && out[2] == 9, "job cores near the GPU: %d", n);
    int far[] = {20, 21};
    n = topology_near_cpus(root, "0000:3B:00.0", far, 2, out);
    CHECK(n == 2 && out[0] == 20 && out[1] == 21, "none near: all the job's cores (%d)", n);
    n = topology_near_cpus(root, NULL, job, 5, out);
    CHECK(n == 5 && memcmp(out, job, sizeof job) == 0, "no bus id: all the job's cores (%d)", n);
    n = topology_near_cpus(root, "0000:AF:00.0", job, 5, out);
    CHECK(n == 5, "no sysfs entry: all the job's cores (%d)", n);
    /* A real GPU 0 (or none): always some of the job's cores. */
    n = topology_gpu_cpus(0, "/sys", job, 5, out);
    CHECK(n >= 1 && n <= 5, "GPU 0's cores: %d", n);

    unlink(path);
    for (int i = 3; i >= 0; i--) {
        snprintf(path, sizeof path, "%s%s", root, dirs[i]);
        rmdir(path);
    }
    rmdir(root);
}

/* Four ranks each going through a different mix of collectives; rank 2
 * fails in its fourth round (as a replica whose loss diverged does: it
 * aborts the comm and leaves). Every other rank must leave at its next
 * collective, whichever that is, with the failure's reason kept. */
enum { FAIL_RANKS = 4, FAIL_ROUNDS = 1000, FAILING = 2, FAIL_AT = 3 };
typedef struct fail_arg { comm *c; int rank, rounds_done, left_with; } fail_arg;

static void *fail_worker(void *p)
{
    fail_arg *a = p;
    backend_ctx ctx;
    backend_ctx_init_cpu(&ctx, 1);
    float v[16] = {0};
    double mean;
    a->left_with = 0;
    for (int round = 0; round < FAIL_ROUNDS && !a->left_with; round++) {
        if (a->rank == FAILING && round == FAIL_AT) {
            comm_abort(a->c, "replica %d: loss is NaN", a->rank);
            a->left_with = 5;
            break;
        }
        /* Ranks differ in what they do between collectives, never in which. */
        if (!comm_allreduce_mean(a->c, a->rank, &ctx, v, 16))
            a->left_with = 1;
        else if (comm_any(a->c, a->rank, 0) < 0)
            a->left_with = 2;
        else if (comm_mean_double(a->c, a->rank, a->rank, &mean) != 0)
            a->left_with = 3;
        else if (!comm_exchange(a->c, a->rank, &ctx, v, 16) ||
                 comm_exchange_end(a->c, a->rank, &ctx))
            a->left_with = 4;
        else
            a->rounds_done = round + 1;
        if (a->rank == 1)
            usleep(100); /* a slower replica: the others wait for it at barriers */
    }
    backend_ctx_free(&ctx);
    return NULL;
}

static void failure_ends_others(void)
{
    comm c;
    char err[128];
    CHECK(comm_init(&c, FAIL_RANKS, 16, err, sizeof err) == 0, "%s", err);
    pthread_t t[FAIL_RANKS];
    fail_arg a[FAIL_RANKS];
    double t0 = comm_now_s();
    for (int r = 0; r < FAIL_RANKS; r++) {
        a[r] = (fail_arg){&c, r, 0, 0};
        pthread_create(&t[r], NULL, fail_worker, &a[r]);
    }
    for (int r = 0; r < FAIL_RANKS; r++)
        pthread_join(t[r], NULL);
    double took = comm_now_s() - t0;
    CHECK(took < 10, "the others took %.1f s to leave", took);
    for (int r = 0; r < FAIL_RANKS; r++) {
        CHECK(a[r].left_with != 0, "rank %d never left", r);
        /* Nobody can complete a round the failing rank did not. */
        CHECK(a[r].rounds_done <= FAIL_AT, "rank %d did %d rounds past the failure", r,
              a[r].rounds_done);
    }
    CHECK(strcmp(comm_abort_reason(&c), "replica 2: loss is NaN") == 0, "reason \"%s\"",
          comm_abort_reason(&c));
    int missing;
    const char *what;
    CHECK(comm_overdue(&c, comm_now_s() + 1e6, 0.1, &missing, &what) == 0,
          "an aborted comm is never overdue");
    comm_free(&c);
}

int main(void)
{
    test_init("topology");
    groups();
    across_processes();
    cpulists();
    near_cpus();
    failure_ends_others();
    return test_main_end();
}
