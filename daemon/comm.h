/* Collectives between the replica threads of one job, over shared memory
 * (docs/architecture.md, "comm"). Every rank of the job makes the same calls
 * in the same order. A collective's result stays valid until the next one.
 *
 * A job must never outlive its own failure: any thread may abort the comm
 * (a replica whose loss diverged, a cancel, the watchdog that sees a rank
 * miss a collective's deadline). The abort wakes every rank waiting in a
 * collective, and every later collective returns at once with "aborted", so
 * each rank leaves at its next collective whatever the others were doing. */
#ifndef PARLE_COMM_H
#define PARLE_COMM_H

#include <pthread.h>
#include <stddef.h>
#include "backend.h"

typedef struct comm {
    int n;
    pthread_mutex_t lock;       /* guards everything below */
    pthread_cond_t wake;
    unsigned long generation;   /* of the barrier; bumped when the last rank arrives */
    int arrived;                /* ranks in the current barrier */
    double first_arrival;       /* when the first of them arrived (monotonic s) */
    unsigned char *waiting;     /* rank r is in the current barrier */
    const char *what;           /* the collective they are in, for messages */
    int aborted;
    char reason[512];
    const float **published;    /* each rank's input vector for the current collective */
    float *result;              /* the shared result, capacity floats */
    float *host_result;         /* the host's, used unless the ranks run on a GPU */
    size_t capacity;
    int *flags;
    double *values;             /* comm_mean_double's inputs */
    backend_ctx *result_ctx;    /* whose memory holds a device result */
    void *shared;               /* comm_shared's block */
    int attached;               /* ranks between comm_attach and comm_detach */
} comm;

int comm_init(comm *c, int n, size_t capacity, char *err, size_t errlen);
void comm_free(comm *c);

/* Every rank calls comm_attach before its first collective, with the length
 * its all-reduces need (rank 0's counts), and comm_detach after its last. It
 * is also the start line: it fails on every rank once any has aborted. The
 * result lives in rank 0's memory (its GPU's, or the host's), allocated
 * there and freed once every rank has detached. Returns 0, or -1 with a
 * message (out of memory; ranks on different GPUs, which need the NCCL comm
 * of docs/gpu.md, not built yet). */
int comm_attach(comm *c, int rank, backend_ctx *ctx, size_t capacity, char *err, size_t errlen);
void comm_detach(comm *c, int rank);

/* Abort the comm (the first reason is kept) and wake every waiting rank. */
void comm_abort(comm *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int comm_aborted(comm *c);
/* The first abort's reason ("" if none); valid until comm_free. */
const char *comm_abort_reason(comm *c);

/* All ranks meet; `what` names the collective in a timeout message.
 * Returns 0, or -1 once the comm is aborted. */
int comm_barrier(comm *c, int rank, const char *what);

/* The element-wise mean of every rank's `vec` (len <= capacity). Each rank
 * reduces its own slice (a reduce-scatter), then all read the whole result
 * (the all-gather is the shared buffer itself). NULL once aborted. */
const float *comm_allreduce_mean(comm *c, int rank, backend_ctx *ctx, const float *vec,
                                 size_t len);

/* The bitwise OR of every rank's flag (>= 0) on every rank: an agreement
 * point, e.g. "stop now". -1 once aborted. */
int comm_any(comm *c, int rank, int flag);

/* Synchronous peer reads (read_peer): every rank publishes `vec` (context
 * memory, complete on return of the barrier) and gets every rank's vector,
 * indexed by rank, to read until it calls comm_exchange_end, which all
 * ranks must call before anyone's vector changes. NULL once aborted. */
const float *const *comm_exchange(comm *c, int rank, backend_ctx *ctx, const float *vec);
int comm_exchange_end(comm *c, int rank, backend_ctx *ctx);

/* State that a rule shares between its replicas (a centre variable, the
 * mailboxes of asynchronous rules): every rank calls it once, in init, with
 * the same `bytes`; rank 0 allocates it zeroed on the host, every rank gets
 * the same pointer. It lives until comm_free. NULL once aborted or out of
 * memory (then the comm is aborted). */
void *comm_shared(comm *c, int rank, size_t bytes);

/* The mean over ranks of one host value each, in *mean. 0, or -1 once aborted. */
int comm_mean_double(comm *c, int rank, double v, double *mean);

/* For a watchdog: if some rank has waited in a barrier for more than
 * `timeout_s` seconds, returns how many ranks have not arrived, the lowest of
 * them in *missing and the collective in *what; else 0. */
int comm_overdue(comm *c, double now_s, double timeout_s, int *missing, const char **what);

/* CLOCK_MONOTONIC in seconds: the clock of comm_overdue and of the runner. */
double comm_now_s(void);

#endif
