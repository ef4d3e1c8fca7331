/* core_turns: at most `cores` holders at once, turns given first come first
 * served, and no turns at all when cores is 0. */
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include "daemon/core_turns.h"
#include "testutil.h"

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Waits (up to 5 s) until `want` tickets were handed out: a taker is queued. */
static int wait_taken(core_turns *t, unsigned long want)
{
    for (int i = 0; i < 5000; i++) {
        pthread_mutex_lock(&t->lock);
        unsigned long taken = t->taken;
        pthread_mutex_unlock(&t->lock);
        if (taken >= want)
            return 1;
        sleep_ms(1);
    }
    return 0;
}

typedef struct taker {
    core_turns *turns;
    int id;
    int *order, *next; /* where this taker writes its id once it holds a turn */
    pthread_mutex_t *lock;
} taker;

static void *take_and_note(void *arg)
{
    taker *k = arg;
    core_turns_take(k->turns);
    pthread_mutex_lock(k->lock);
    k->order[(*k->next)++] = k->id;
    pthread_mutex_unlock(k->lock);
    return NULL;
}

static int noted(pthread_mutex_t *lock, const int *next)
{
    pthread_mutex_lock(lock);
    int n = *next;
    pthread_mutex_unlock(lock);
    return n;
}

/* Two turns: two takers hold them at once; a third waits until one comes
 * back, and a fourth queued after it waits for the next. */
static void test_first_come_first_served(void)
{
    core_turns t;
    core_turns_init(&t, 2);
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    int order[2], next = 0;
    core_turns_take(&t);
    core_turns_take(&t);
    CHECK(t.taken == 2, "two turns of two taken without waiting: taken %lu", t.taken);
    taker a = {&t, 1, order, &next, &lock}, b = {&t, 2, order, &next, &lock};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, take_and_note, &a);
    CHECK(wait_taken(&t, 3), "the third taker never queued");
    pthread_create(&tb, NULL, take_and_note, &b);
    CHECK(wait_taken(&t, 4), "the fourth taker never queued");
    sleep_ms(50);
    CHECK(noted(&lock, &next) == 0, "a third holder with both turns out");
    core_turns_give(&t);
    pthread_join(ta, NULL);
    sleep_ms(50);
    CHECK(noted(&lock, &next) == 1 && order[0] == 1,
          "one turn back: %d holders more, first %d (want the one queued first)",
          noted(&lock, &next), order[0]);
    core_turns_give(&t);
    pthread_join(tb, NULL);
    CHECK(next == 2 && order[1] == 2, "the second queued taker did not follow: %d", next);
    core_turns_give(&t);
    core_turns_give(&t);
    core_turns_destroy(&t);
}

/* Threads taking and giving in a loop: never more than `cores` inside, all
 * get their turns. */
typedef struct looper {
    core_turns *turns;
    pthread_mutex_t *lock;
    int *inside, *most, rounds;
} looper;

static void *loop_turns(void *arg)
{
    looper *l = arg;
    for (int i = 0; i < l->rounds; i++) {
        core_turns_take(l->turns);
        pthread_mutex_lock(l->lock);
        (*l->inside)++;
        *l->most = *l->inside > *l->most ? *l->inside : *l->most;
        pthread_mutex_unlock(l->lock);
        sched_yield();
        pthread_mutex_lock(l->lock);
        (*l->inside)--;
        pthread_mutex_unlock(l->lock);
        core_turns_give(l->turns);
    }
    return NULL;
}

static void test_bound(int cores, int threads)
{
    core_turns t;
    core_turns_init(&t, cores);
    pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    int inside = 0, most = 0;
    looper l = {&t, &lock, &inside, &most, 300};
    pthread_t tids[8];
    for (int i = 0; i < threads; i++)
        pthread_create(&tids[i], NULL, loop_turns, &l);
    for (int i = 0; i < threads; i++)
        pthread_join(tids[i], NULL);
    CHECK(most <= cores, "%d turns, %d threads: %d held at once", cores, threads, most);
    CHECK(t.taken == (unsigned long)(threads * l.rounds) && t.given == t.taken,
          "%d turns: %lu taken, %lu given, want %d", cores, t.taken, t.given,
          threads * l.rounds);
    core_turns_destroy(&t);
}

/* cores 0: no turns; taking never waits. */
static void test_no_turns(void)
{
    core_turns t;
    core_turns_init(&t, 0);
    for (int i = 0; i < 5; i++)
        core_turns_take(&t);
    CHECK(t.taken == 0, "no turns, yet %lu tickets", t.taken);
    core_turns_destroy(&t);
}

int main(void)
{
    test_init("core_turns");
    test_first_come_first_served();
    test_bound(2, 5);
    test_bound(3, 7);
    test_no_turns();
    return test_main_end();
}
