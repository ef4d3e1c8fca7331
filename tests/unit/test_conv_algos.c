/* The process-wide table of timed cuDNN algorithms (kernels/cuda/conv_algos.c)
 * with a made-up timer: each key timed once and its answer reused, keys
 * that differ in device, direction or shape timed apart, a failed timing not
 * kept, an untimeable shape kept as such, the bound, and replica threads
 * asking at once (also under ThreadSanitizer): one timing at a time, each
 * key timed exactly once, every thread given the same answer. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "cuda/conv_algos.h"
#include "testutil.h"

static atomic_int timings, timing_now, overlapped;

/* The answer a key's timing gives: derived from the key, so a reused answer
 * can be told from another key's. */
static int answer_of(const conv_algo_key *k) { return k->device * 1000 + k->dir * 100 + k->shape[0]; }

typedef struct timer_arg {
    const conv_algo_key *key;
    int result; /* the timer's return */
    int timed;  /* the answer's timed flag */
    int sleep_us;
} timer_arg;

static int fake_timer(void *arg, conv_algo *out)
{
    const timer_arg *a = arg;
    if (atomic_fetch_add(&timing_now, 1) != 0)
        atomic_store(&overlapped, 1);
    atomic_fetch_add(&timings, 1);
    if (a->sleep_us)
        nanosleep(&(struct timespec){.tv_nsec = a->sleep_us * 1000L}, NULL);
    *out = (conv_algo){a->timed, answer_of(a->key), 1};
    atomic_fetch_sub(&timing_now, 1);
    return a->result;
}

static conv_algo_key key_of(int device, int dir, int shape0)
{
    conv_algo_key k;
    memset(&k, 0, sizeof k);
    k.device = device;
    k.dir = dir;
    k.shape[0] = shape0;
    k.shape[CONV_ALGO_KEY_INTS - 1] = 7; /* the whole key counts, not its first ints */
    return k;
}

/* Asks for a key with the given timer behaviour: the returned code, with *out. */
static int ask(conv_algo_key k, int result, int timed, conv_algo *out)
{
    timer_arg a = {&k, result, timed, 0};
    return conv_algos_get(&k, out, fake_timer, &a);
}

static void test_once_per_key(void)
{
    conv_algos_clear();
    atomic_store(&timings, 0);
    conv_algo got;
    CHECK(ask(key_of(0, 0, 3), 0, 1, &got) == 0 && got.timed && got.algo == 3, "first: timed");
    CHECK(ask(key_of(0, 0, 3), 0, 1, &got) == 0 && got.algo == 3 && timings == 1,
          "second: kept, not timed again (timings %d)", (int)timings);
    CHECK(ask(key_of(1, 0, 3), 0, 1, &got) == 0 && got.algo == 1003, "another device: its own");
    CHECK(ask(key_of(0, 2, 3), 0, 1, &got) == 0 && got.algo == 203, "another direction");
    conv_algo_key k = key_of(0, 0, 3);
    k.shape[CONV_ALGO_KEY_INTS - 1] = 8;
    CHECK(ask(k, 0, 1, &got) == 0 && timings == 4, "another shape's last int: timed apart");
    CHECK(conv_algos_count() == 4, "4 kept, got %d", conv_algos_count());
}

static void test_failures_and_untimeable(void)
{
    conv_algos_clear();
    atomic_store(&timings, 0);
    conv_algo got;
    CHECK(ask(key_of(0, 1, 5), -1, 1, &got) == -1, "a failed timing is the caller's failure");
    CHECK(conv_algos_count() == 0, "and is not kept");
    CHECK(ask(key_of(0, 1, 5), 0, 0, &got) == 0 && !got.timed && timings == 2, "timed again");
    CHECK(ask(key_of(0, 1, 5), 0, 1, &got) == 0 && !got.timed && timings == 2,
          "untimeable is kept: the heuristics decide without timing again");
}

static void test_bound(void)
{
    conv_algos_clear();
    atomic_store(&timings, 0);
    conv_algo got;
    for (int i = 0; i < CONV_ALGOS_MAX; i++)
        ask(key_of(0, 0, i), 0, 1, &got);
    CHECK(conv_algos_count() == CONV_ALGOS_MAX, "full: %d", conv_algos_count());
    CHECK(ask(key_of(0, 0, CONV_ALGOS_MAX), 0, 1, &got) == 0 && got.algo == CONV_ALGOS_MAX,
          "past the bound: still answered");
    CHECK(conv_algos_count() == CONV_ALGOS_MAX, "but not kept");
    const int before = timings;
    ask(key_of(0, 0, CONV_ALGOS_MAX), 0, 1, &got);
    CHECK(timings == before + 1, "so timed again");
    ask(key_of(0, 0, 17), 0, 1, &got);
    CHECK(timings == before + 1 && got.algo == 17, "a kept key is still reused");
}

enum { THREADS = 6, KEYS = 12 };

static void *replica(void *arg)
{
    int *answers = arg;
    for (int i = 0; i < KEYS; i++) {
        conv_algo_key k = key_of(i % 2, i % 3, i);
        timer_arg a = {&k, 0, 1, 500};
        conv_algo got;
        answers[i] = conv_algos_get(&k, &got, fake_timer, &a) == 0 ? got.algo : -1;
    }
    return NULL;
}

static void test_threads(void)
{
    conv_algos_clear();
    atomic_store(&timings, 0);
    atomic_store(&overlapped, 0);
    pthread_t t[THREADS];
    int answers[THREADS][KEYS];
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, replica, answers[i]);
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    CHECK(timings == KEYS, "each key timed once: %d timings for %d keys", (int)timings, KEYS);
    CHECK(!overlapped, "no two timings at once");
    for (int i = 0; i < THREADS; i++)
        for (int j = 0; j < KEYS; j++) {
            conv_algo_key k = key_of(j % 2, j % 3, j);
            CHECK(answers[i][j] == answer_of(&k), "thread %d key %d: %d", i, j, answers[i][j]);
        }
}

int main(void)
{
    test_init("conv_algos");
    test_once_per_key();
    test_failures_and_untimeable();
    test_bound();
    test_threads();
    return test_main_end();
}
