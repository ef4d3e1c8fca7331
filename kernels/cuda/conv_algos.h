/* The cuDNN algorithms chosen by timing, kept for the life of the process
 * and shared by every context on the same device: timing a shape's
 * candidates costs tens of milliseconds a direction, so each (device, shape,
 * precision, direction) is timed once, by the first replica that meets it,
 * and every later replica and job reuses the answer. Plain C, no cuDNN
 * types, so that it is tested on any machine (tests/unit/test_conv_algos.c). */
#ifndef PARLE_CONV_ALGOS_H
#define PARLE_CONV_ALGOS_H

/* At most this many answers are kept; past it, a shape is timed again by
 * each context that meets it (correct, only slower to start). A job has a
 * few dozen; the bound keeps a daemon that runs thousands of jobs of
 * varied batch sizes from growing without end. */
enum { CONV_ALGOS_MAX = 4096 };

/* What identifies one timing: every int of the convolution's shape and
 * settings (the caller's key, zero-padded) and the device it ran on. */
enum { CONV_ALGO_KEY_INTS = 12 };
typedef struct conv_algo_key {
    int device;
    int dir;
    int shape[CONV_ALGO_KEY_INTS];
} conv_algo_key;

typedef struct conv_algo {
    int timed; /* 0: timing could not run (out of memory, say): the caller's heuristics decide */
    int algo;  /* a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t */
    int math;  /* its cudnnMathType_t */
} conv_algo;

/* Runs the timing for a key: 0 with *out set (out->timed 0 when no
 * candidate could be timed), or -1 when the context failed (its sticky
 * error says why; nothing is kept). */
typedef int (*conv_algo_timer)(void *arg, conv_algo *out);

/* The answer for *key: the kept one, or else time_it's, which runs with
 * the table locked so that no two timings share a GPU (each would slow
 * the other's candidates) and no key is timed twice. 0, or time_it's -1. */
int conv_algos_get(const conv_algo_key *key, conv_algo *out, conv_algo_timer time_it, void *arg);

/* Answers kept (for tests and the bench's report). */
int conv_algos_count(void);

/* Forget every answer (tests). */
void conv_algos_clear(void);

#endif
