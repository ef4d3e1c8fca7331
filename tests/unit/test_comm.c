/* comm on real threads: all-reduce-mean against a float64 mean over odd
 * lengths (slices of unequal size, fewer elements than ranks), many rounds
 * back to back (the result buffer is reused), and comm_any. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "comm.h"
#include "testutil.h"

#define ROUNDS 50
static const size_t lens[] = {1, 3, 7, 1000, 4097};

typedef struct shared {
    comm c;
    int n;
    float *inputs;       /* [ROUNDS][n][maxlen] */
    size_t maxlen;
    double max_err[8];
    int any_wrong[8];
} shared;

typedef struct arg { shared *s; int rank; } arg;

static void *worker(void *q)
{
    arg *a = q;
    shared *s = a->s;
    backend_ctx ctx;
    backend_ctx_init_cpu(&ctx, 1);
    /* One block shared by all ranks: each writes its slot, all read all. */
    int *block = comm_shared(&s->c, a->rank, (size_t)s->n * sizeof(int));
    if (!block) {
        s->any_wrong[a->rank]++;
        return NULL;
    }
    block[a->rank] = a->rank + 1;
    comm_barrier(&s->c, a->rank, "test");
    for (int j = 0; j < s->n; j++)
        s->any_wrong[a->rank] += block[j] != j + 1;
    for (int round = 0; round < ROUNDS; round++) {
        size_t len = lens[round % 5];
        const float *mine = s->inputs + ((size_t)round * s->n + a->rank) * s->maxlen;
        const float *mean = comm_allreduce_mean(&s->c, a->rank, &ctx, mine, len);
        for (size_t i = 0; i < len; i++) {
            double want = 0, scale = 0;
            for (int j = 0; j < s->n; j++) {
                double x = s->inputs[((size_t)round * s->n + j) * s->maxlen + i];
                want += x;
                scale += fabs(x);
            }
            want /= s->n;
            /* Relative to the mean magnitude: the mean itself may cancel to ~0. */
            double e = fabs(mean[i] - want) / (1e-6 + scale / s->n);
            if (e > s->max_err[a->rank])
                s->max_err[a->rank] = e;
        }
        /* Every rank sees every other's vector, exactly, until the end. */
        const float *const *all = comm_exchange(&s->c, a->rank, &ctx, mine, len);
        for (int j = 0; all && j < s->n; j++)
            if (memcmp(all[j], s->inputs + ((size_t)round * s->n + j) * s->maxlen,
                       len * sizeof(float)) != 0)
                s->any_wrong[a->rank]++;
        if (!all || comm_exchange_end(&s->c, a->rank, &ctx) != 0)
            s->any_wrong[a->rank]++;
        /* Only one rank raises the flag, on odd rounds. */
        int flag = (round % 2) && a->rank == round % s->n;
        if (comm_any(&s->c, a->rank, flag) != (round % 2))
            s->any_wrong[a->rank]++;
    }
    backend_ctx_free(&ctx);
    return NULL;
}

static void run(int n)
{
    static shared s;
    memset(&s, 0, sizeof s);
    s.n = n;
    s.maxlen = 4097;
    s.inputs = malloc(sizeof(float) * ROUNDS * (size_t)n * s.maxlen);
    test_fill_uniform(s.inputs, (size_t)ROUNDS * n * s.maxlen, -10, 10);
    char err[128];
    CHECK(comm_init(&s.c, n, s.maxlen, err, sizeof err) == 0, "%s", err);
    pthread_t t[8];
    arg a[8];
    for (int r = 0; r < n; r++) {
        a[r] = (arg){&s, r};
        pthread_create(&t[r], NULL, worker, &a[r]);
    }
    for (int r = 0; r < n; r++)
        pthread_join(t[r], NULL);
    for (int r = 0; r < n; r++) {
        CHECK(s.max_err[r] <= 1e-5, "n=%d rank %d: mean off by %.3g", n, r, s.max_err[r]);
        CHECK(s.any_wrong[r] == 0, "n=%d rank %d: comm_any wrong %d times", n, r, s.any_wrong[r]);
    }
    comm_free(&s.c);
    free(s.inputs);
}

/* Ranks 0 and 1 enter an all-reduce that rank 2 never reaches: the deadline
 * check names rank 2 and the collective, and an abort sends both home with
 * NULL; every later collective fails at once. */
typedef struct stuck { comm *c; int rank; const float *got; int any_after; } stuck;

static void *enter_allreduce(void *p)
{
    stuck *st = p;
    backend_ctx ctx;
    backend_ctx_init_cpu(&ctx, 1);
    float v[4] = {1, 2, 3, 4};
    st->got = comm_allreduce_mean(st->c, st->rank, &ctx, v, 4);
    st->any_after = comm_any(st->c, st->rank, 0);
    backend_ctx_free(&ctx);
    return NULL;
}

static void abort_wakes_waiters(void)
{
    comm c;
    char err[128];
    CHECK(comm_init(&c, 3, 4, err, sizeof err) == 0, "%s", err);
    stuck st[2] = {{&c, 0, NULL, 0}, {&c, 1, NULL, 0}};
    pthread_t t[2];
    for (int r = 0; r < 2; r++) {
        st[r].got = (const float *)&st; /* anything but NULL */
        pthread_create(&t[r], NULL, enter_allreduce, &st[r]);
    }
    int missing = -1, overdue = 0;
    const char *what = NULL;
    double t0 = comm_now_s();
    while (!overdue && comm_now_s() - t0 < 10) {
        usleep(10000);
        overdue = comm_overdue(&c, comm_now_s(), 0.05, &missing, &what);
    }
    CHECK(overdue == 1 && missing == 2 && what && strcmp(what, "all-reduce") == 0,
          "overdue %d missing %d what %s", overdue, missing, what ? what : "(null)");
    comm_abort(&c, "rank %d is late", missing);
    comm_abort(&c, "a second reason is not kept");
    for (int r = 0; r < 2; r++) {
        pthread_join(t[r], NULL);
        CHECK(st[r].got == NULL && st[r].any_after == -1, "rank %d after the abort: %p %d", r,
              (const void *)st[r].got, st[r].any_after);
    }
    CHECK(comm_aborted(&c) && strcmp(comm_abort_reason(&c), "rank 2 is late") == 0,
          "reason \"%s\"", comm_abort_reason(&c));
    CHECK(comm_barrier(&c, 2, "late") == -1, "the late rank must not wait");
    CHECK(comm_overdue(&c, comm_now_s() + 100, 0.05, &missing, &what) == 0,
          "an aborted comm is not overdue");
    comm_free(&c);
}

int main(void)
{
    test_init("comm");
    for (int n = 1; n <= 5; n++)
        run(n);
    abort_wakes_waiters();
    return test_main_end();
}
