/* The replicas' turns on the cores (daemon/runner/step_schedule.c): every plan
 * covers each replica's steps once, in order, within ceil(n S / c) steps of
 * wall time; replica threads following it never share a slot, run each
 * slot's turns in the plan's order, and a waiter leaves on abort. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "step_schedule.h"
#include "testutil.h"

enum { MAX_N = 9, MAX_STEPS = 40, ITERS = 6, LOG_MAX = 4096 };

/* The part that is turn `seg` of slot j, and its replica; NULL if none. */
static const step_segment *turn_of(const step_schedule *s, int j, int seg, int *owner)
{
    for (int r = 0; r < s->n; r++)
        for (int i = 0; i < 2; i++)
            if (s->parts[r][i].last > 0 && s->parts[r][i].slot == j && s->parts[r][i].seg == seg) {
                *owner = r;
                return &s->parts[r][i];
            }
    return NULL;
}

/* Plays the plan out in unit-time steps, each slot running its turns in
 * order, a replica's tail not before its head has ended; returns the
 * makespan, or -1 when the plan does not cover each replica's steps once,
 * in order, with every turn of every slot taken by one part. */
static int play(const step_schedule *s)
{
    int parts = 0, turns = 0, span = 0;
    for (int r = 0; r < s->n; r++) {
        const step_segment *head = &s->parts[r][0], *tail = &s->parts[r][1];
        parts += 1 + (tail->last > 0);
        if (head->first != 1 || (tail->last ? tail->first != head->last + 1 ||
                                 tail->last != s->steps || head->seg != 0
                                            : head->last != s->steps))
            return -1;
    }
    for (int j = 0; j < s->cores; j++) {
        int t = 0, owner;
        for (int seg = 0; seg < s->nsegs[j]; seg++, turns++) {
            const step_segment *p = turn_of(s, j, seg, &owner);
            if (!p)
                return -1;
            /* A head opens its slot (checked above): it ends at its length. */
            int start = p->first > 1 && s->parts[owner][0].last > t ? s->parts[owner][0].last : t;
            t = start + p->last - p->first + 1;
        }
        span = t > span ? t : span;
    }
    return turns == parts ? span : -1;
}

static void check_plans(void)
{
    for (int c = 1; c <= 4; c++)
        for (int n = c + 1; n <= MAX_N; n++)
            for (int S = 1; S <= MAX_STEPS; S++) {
                step_schedule s;
                if (step_schedule_init(&s, n, c, S, 1) != 0) {
                    CHECK(0, "out of memory");
                    return;
                }
                int span = play(&s), want = (n * S + c - 1) / c;
                CHECK(span == want, "n %d on %d cores, S %d: plan spans %d steps, want %d", n, c,
                      S, span, want);
                step_schedule_free(&s);
            }
}

/* ---- replica threads following the plan ---- */

typedef struct shared {
    step_schedule s;
    pthread_mutex_t lock;
    int running[MAX_N], busy; /* per slot, and in all */
    int most_busy, shared_slot, wrong_slot;
    int log[MAX_N][LOG_MAX], nlog[MAX_N]; /* per slot: replica of each step run */
} shared;

typedef struct worker {
    shared *sh;
    int rank;
    long first_k;
    int rc;
} worker;

static void *replica_thread(void *p)
{
    worker *w = p;
    shared *sh = w->sh;
    for (long k = w->first_k; k < w->first_k + ITERS; k++)
        for (int l = 1; l <= sh->s.steps; l++) {
            int slot = step_schedule_wait(&sh->s, w->rank, k, l);
            if (slot < 0) {
                w->rc = -1;
                return NULL;
            }
            const step_segment *head = &sh->s.parts[w->rank][0];
            pthread_mutex_lock(&sh->lock);
            sh->wrong_slot |= slot != (l <= head->last ? head->slot : sh->s.parts[w->rank][1].slot);
            sh->shared_slot |= sh->running[slot]++ > 0;
            sh->busy++;
            sh->most_busy = sh->busy > sh->most_busy ? sh->busy : sh->most_busy;
            if (sh->nlog[slot] < LOG_MAX)
                sh->log[slot][sh->nlog[slot]++] = w->rank;
            pthread_mutex_unlock(&sh->lock);
            /* 10-200 us, varied (test_uniform is not for threads). */
            long us = 10 + (w->rank * 37 + l * 53 + (int)k * 11) % 190;
            nanosleep(&(struct timespec){.tv_nsec = us * 1000}, NULL);
            pthread_mutex_lock(&sh->lock);
            sh->running[slot]--;
            sh->busy--;
            pthread_mutex_unlock(&sh->lock);
            step_schedule_done(&sh->s, w->rank, l);
        }
    return NULL;
}

static void check_threads(int n, int c, int S, long first_k)
{
    shared *sh = calloc(1, sizeof *sh);
    if (!sh || step_schedule_init(&sh->s, n, c, S, first_k) != 0) {
        CHECK(0, "out of memory");
        free(sh);
        return;
    }
    pthread_mutex_init(&sh->lock, NULL);
    pthread_t tid[MAX_N];
    worker w[MAX_N];
    for (int r = 0; r < n; r++) {
        w[r] = (worker){.sh = sh, .rank = r, .first_k = first_k};
        pthread_create(&tid[r], NULL, replica_thread, &w[r]);
    }
    for (int r = 0; r < n; r++) {
        pthread_join(tid[r], NULL);
        CHECK(w[r].rc == 0, "replica %d was aborted", r);
    }
    CHECK(!sh->wrong_slot, "n %d, c %d, S %d: a step was told another slot than its plan's", n,
          c, S);
    CHECK(!sh->shared_slot, "n %d, c %d, S %d: two replicas stepped on one slot at once", n, c, S);
    CHECK(sh->most_busy <= c, "n %d, c %d: %d replicas stepped at once", n, c, sh->most_busy);
    /* Each slot ran its turns in the plan's order, every iteration. */
    for (int j = 0; j < c; j++) {
        int at = 0, ok = 1;
        for (int it = 0; it < ITERS; it++)
            for (int seg = 0; seg < sh->s.nsegs[j]; seg++)
                for (int r = 0; r < n; r++)
                    for (int i = 0; i < 2; i++) {
                        const step_segment *p = &sh->s.parts[r][i];
                        if (p->last && p->slot == j && p->seg == seg)
                            for (int l = p->first; l <= p->last; l++)
                                ok &= at < sh->nlog[j] && sh->log[j][at++] == r;
                    }
        CHECK(ok && at == sh->nlog[j], "n %d, c %d, S %d: slot %d ran its turns out of order", n,
              c, S, j);
    }
    pthread_mutex_destroy(&sh->lock);
    step_schedule_free(&sh->s);
    free(sh);
}

/* A replica whose turn never comes (its predecessor failed) leaves on abort. */
static void *stuck_thread(void *p)
{
    worker *w = p;
    /* 3 on 2, S 25: replica 2 (slot 1, turn 1) waits for replica 1's head. */
    w->rc = step_schedule_wait(&w->sh->s, 2, w->first_k, 1);
    return NULL;
}

static void check_abort(void)
{
    shared *sh = calloc(1, sizeof *sh);
    if (!sh || step_schedule_init(&sh->s, 3, 2, 25, 1) != 0) {
        CHECK(0, "out of memory");
        free(sh);
        return;
    }
    worker w = {.sh = sh, .first_k = 1, .rc = 1};
    pthread_t tid;
    pthread_create(&tid, NULL, stuck_thread, &w);
    nanosleep(&(struct timespec){.tv_nsec = 20 * 1000 * 1000}, NULL);
    step_schedule_abort(&sh->s);
    pthread_join(tid, NULL);
    CHECK(w.rc == -1, "a waiter left with %d after an abort", w.rc);
    step_schedule_free(&sh->s);
    free(sh);
}

int main(void)
{
    test_init("step_schedule");
    CHECK(step_schedule_wanted(3, 2, 25), "3 replicas on 2 cores, L 25: 38 steps for 37.5");
    CHECK(step_schedule_wanted(3, 2, 7), "3 on 2, S 7: 11 for 10.5");
    CHECK(!step_schedule_wanted(3, 2, 5), "3 on 2, S 5: 8 for 7.5 costs 6.7%%");
    CHECK(!step_schedule_wanted(3, 2, 1), "3 on 2, S 1: 2 for 1.5");
    CHECK(!step_schedule_wanted(2, 2, 25) && !step_schedule_wanted(1, 2, 25),
          "no more replicas than cores: nothing to schedule");

    /* 3 on 2, S 25: slot 0 runs replica 0, then replica 1's last 12
     * steps (37 in all); slot 1 replica 1's first 13, then replica 2 (38). */
    step_schedule s;
    if (step_schedule_init(&s, 3, 2, 25, 1) == 0) {
        const step_segment *a = s.parts[0], *b = s.parts[1], *c = s.parts[2];
        CHECK(a[0].slot == 0 && a[0].seg == 0 && a[0].first == 1 && a[0].last == 25 && !a[1].last,
              "replica 0: slot %d turn %d steps %d..%d", a[0].slot, a[0].seg, a[0].first, a[0].last);
        CHECK(b[0].slot == 1 && b[0].seg == 0 && b[0].first == 1 && b[0].last == 13,
              "replica 1's head: slot %d turn %d steps %d..%d", b[0].slot, b[0].seg, b[0].first,
              b[0].last);
        CHECK(b[1].slot == 0 && b[1].seg == 1 && b[1].first == 14 && b[1].last == 25,
              "replica 1's tail: slot %d turn %d steps %d..%d", b[1].slot, b[1].seg, b[1].first,
              b[1].last);
        CHECK(c[0].slot == 1 && c[0].seg == 1 && c[0].first == 1 && c[0].last == 25 && !c[1].last,
              "replica 2: slot %d turn %d steps %d..%d", c[0].slot, c[0].seg, c[0].first, c[0].last);
        step_schedule_free(&s);
    }

    check_plans();
    check_threads(3, 2, 25, 1);
    check_threads(3, 2, 7, 40); /* resumed at outer iteration 40 */
    check_threads(5, 3, 9, 1);
    check_threads(7, 2, 4, 2);
    check_abort();
    return test_main_end();
}
