/* Collectives between the replica threads of one job, over shared memory on
 * the CPU and with CUDA events and NCCL on GPUs (docs/architecture.md,
 * "comm"; docs/gpu.md, "Many GPUs"). Every rank of the job makes the same calls
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

struct topology;
struct comm_device;
struct comm;

/* The answer to another process's peer request (comm_net.serve): reads
 * the request's len bytes, writes at most cap bytes of answer into reply and
 * returns how many. Both buffers are aligned as malloc aligns. */
typedef size_t (*comm_peer_handler)(void *arg, const void *req, size_t len, void *reply,
                                    size_t cap);

/* Replicas in other processes (MPI, docs/mpi.md). This process's rank 0
 * (its leader) adds up the processes' partial results while its other ranks
 * wait; the ops poll the comm so that an abort or a peer's failure ends the
 * wait, and give up after timeout_s (aborting the comm with the reason). */
typedef struct comm_net {
    int total;          /* replicas in all processes: the divisor of the means */
    int procs, proc;    /* the job's processes, and this one's place among them */
    double timeout_s;   /* comm.timeout_s: a cross-process sum never waits longer */
    /* In place, the sum over processes of len values. 0, or -1 once the comm
     * is aborted (the op aborts it itself with the reason when it fails). */
    int (*sum_floats)(const struct comm_net *net, struct comm *c, float *buf, size_t len);
    int (*sum_doubles)(const struct comm_net *net, struct comm *c, double *buf, int len);
    /* For GPU jobs' setup (one NCCL communicator over every process's
     * GPUs): every process's `mine` into all[procs]; process 0's len bytes
     * into everyone's buf. 0, or -1 as above. */
    int (*gather_int)(const struct comm_net *net, struct comm *c, int mine, int *all);
    /* Every replica's len floats in all[total * len], by the replica's
     * number in the job: this process's are already in place, the others'
     * arrive. 0, or -1 as above. */
    int (*gather_floats)(const struct comm_net *net, struct comm *c, float *all, size_t len);
    /* The same for one double per replica (comm_shared_rows' rows). */
    int (*gather_doubles)(const struct comm_net *net, struct comm *c, double *all);
    int (*bcast_bytes)(const struct comm_net *net, struct comm *c, void *buf, int len);
    /* The asynchronous rules' peer requests (comm_peer_net.c, CPUs only):
     * send req (len bytes) to the process holding replica `peer` (its number
     * in the job) and wait for the answer, at most cap bytes, in reply. The
     * caller is this process's rank `rank`, one request at a time each.
     * Returns the answer's length, or -1 as above. */
    long (*call)(const struct comm_net *net, struct comm *c, int rank, int peer,
                 const void *req, size_t len, void *reply, size_t cap);
    /* Answer the other processes' requests (at most max_bytes each way) with
     * fn(arg, ...) from a thread of the net's own until unserve, which
     * returns once fn is no longer called. 0, or -1 with a message. */
    int (*serve)(const struct comm_net *net, struct comm *c, comm_peer_handler fn, void *arg,
                 size_t max_bytes, char *err, size_t errlen);
    void (*unserve)(const struct comm_net *net);
    /* The job failed or stopped here: tell the other processes (once). */
    void (*fail)(const struct comm_net *net, const char *reason);
    void *user;
} comm_net;

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
    backend_ctx *result_ctx;    /* rank 0's, when it holds a result larger than host_result */
    void *shared;               /* comm_shared's block */
    int attached;               /* ranks between comm_attach and comm_detach */
    /* Ranks on GPUs (docs/gpu.md, "Many GPUs"), set up by comm_attach. */
    backend_ctx **ctxs;         /* each rank's context */
    unsigned char *stage;       /* per rank: 1 once it holds GPU state its detach undoes */
    struct topology *topo;      /* the ranks' GPUs and groups; NULL on the CPU */
    struct comm_device *dev;    /* per group: its result, events, NCCL rank */
    void **ready;               /* per rank: an event after its published vector */
    double *busy_since;         /* per rank: when it began waiting on NCCL (0: not) */
    const char **busy_what;     /* ... and on what, for the watchdog's message */
    unsigned char nccl_id[128]; /* the job's NCCL communicator, for its leaders */
    const comm_net *net;        /* other processes' replicas; NULL: none (set before attach) */
    int first;                  /* with a net, the job's number of this process's rank 0 */
    float *gathered;            /* with a net, every replica's vector of the last exchange */
    size_t gathered_len;
    const float **everyone;     /* ... and the job's view of it, by replica number */
    double *rows;               /* comm_shared_rows' block, nrows x the job's replicas */
    int nrows;
    int net_busy;               /* replicas in a net sum or peer request (own deadline) */
    double net_value[2];        /* the cross-process result of comm_any / comm_mean_double */
} comm;

int comm_init(comm *c, int n, size_t capacity, char *err, size_t errlen);
void comm_free(comm *c);

/* Every rank calls comm_attach before its first collective, with the length
 * its all-reduces need (rank 0's counts), and comm_detach after its last. It
 * is also the start line: it fails on every rank once any has aborted. On
 * the CPU the result lives in host memory. On GPUs each GPU's lowest rank
 * leads the ranks on it: it holds the GPU's result buffer and, with two or
 * more GPUs in the job (counting other processes' under a net), the GPU's
 * rank of the job's NCCL communicator (created here, its id sent to the
 * other processes by the net, destroyed at detach) and enables peer access
 * to the process's other GPUs;
 * its detach waits until the other ranks on its GPU have detached. Returns
 * 0, or -1 with a message (out of memory; a CUDA or NCCL failure; some
 * ranks on the CPU and some on a GPU). */
int comm_attach(comm *c, int rank, backend_ctx *ctx, size_t capacity, char *err, size_t errlen);
/* Returns once every rank that attached has detached: then nobody reads
 * this rank's vectors any more (an abort lets ranks leave a collective at
 * different points), and the rank may free them. */
void comm_detach(comm *c, int rank);

/* Abort the comm (the first reason is kept) and wake every waiting rank. */
void comm_abort(comm *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int comm_aborted(comm *c);
/* The first abort's reason ("" if none); valid until comm_free. */
const char *comm_abort_reason(comm *c);

/* All ranks meet; `what` names the collective in a timeout message.
 * Returns 0, or -1 once the comm is aborted. */
int comm_barrier(comm *c, int rank, const char *what);

/* The element-wise mean of every rank's `vec` (len <= capacity), in the
 * rank's memory; with a net, of every replica's in every process. On the
 * CPU each rank reduces its own slice (a reduce-scatter), then all read the
 * whole result (the all-gather is the shared buffer itself), and rank 0
 * adds up the processes' results over the net. On GPUs each group's leader
 * sums its group's vectors in rank order on its GPU and, with two or more
 * GPUs in the job, the leaders (of every process) add up the group means
 * with NCCL, each weighed size / total; every GPU then holds the result. Ordered by CUDA events, without waiting for the device:
 * vec may change (in stream order) as soon as this returns. NULL once
 * aborted (a failure on a GPU aborts the comm with its reason). */
const float *comm_allreduce_mean(comm *c, int rank, backend_ctx *ctx, const float *vec,
                                 size_t len);

/* The bitwise OR of every rank's flag (>= 0) on every rank: an agreement
 * point, e.g. "stop now". -1 once aborted. */
int comm_any(comm *c, int rank, int flag);

/* Synchronous peer reads (read_peer): every rank publishes `vec` (len
 * floats, context memory, complete on return of the barrier) and gets every
 * replica's vector, indexed by its number in the job (the rank, in one
 * process), to read until it calls comm_exchange_end, which all ranks must
 * call before anyone's vector changes. With a net (CPU only) rank 0 copies
 * this process's vectors into one host buffer and the net fills in the
 * other processes' (an all-gather: every replica's vector reaches every
 * process). NULL once aborted. */
const float *const *comm_exchange(comm *c, int rank, backend_ctx *ctx, const float *vec,
                                  size_t len);
int comm_exchange_end(comm *c, int rank, backend_ctx *ctx);

/* Between comm_exchange and comm_exchange_end: the vector of replica `peer`
 * (its number in the job), readable by ctx's ops. The peer's own pointer (or
 * its gathered copy) when it shares rank's memory (the host, or the same
 * GPU); else a copy of len floats in `scratch` (ctx memory), made on ctx's
 * stream by comm_peer_copy. */
const float *comm_read_peer(comm *c, int rank, backend_ctx *ctx, int peer, float *scratch,
                            size_t len);
/* Do rank a and replica b (its number in the job) share one memory (the
 * host, or one GPU)? After attach. A replica of another process is read
 * from the host copy comm_exchange gathered. */
int comm_same_memory(const comm *c, int a, int b);
/* len floats from src (memory of rank src_rank) to dst (memory of rank
 * dst_rank) on ctx's stream: a copy within one memory, or between GPUs
 * (peer to peer where enabled, staged through the host where not). For the
 * gossip rules' read_peer and push; the caller orders it against the
 * owners' use of both buffers (comm_exchange, locks). */
void comm_peer_copy(comm *c, backend_ctx *ctx, float *dst, int dst_rank, const float *src,
                    int src_rank, size_t len);

/* State that a rule shares between its replicas (a centre variable, the
 * mailboxes of asynchronous rules): every rank calls it once, in init, with
 * the same `bytes`; rank 0 allocates it zeroed on the host, every rank gets
 * the same pointer. It lives until comm_free. NULL once aborted or out of
 * memory (then the comm is aborted). */
void *comm_shared(comm *c, int rank, size_t bytes);

/* Host numbers a rule's replicas share, `rows` rows of one double per
 * replica of the job (row k, replica id: [k * replicas + id]), zeroed: entry
 * id is written by replica id alone and read by the others only between an
 * exchange's barriers (comm_exchange .. comm_exchange_end). Every rank calls
 * it once, in init, with the same rows. In one process the block is shared;
 * with a net each process has its own, and comm_exchange brings every row's
 * entries of the other processes' replicas in with their vectors. NULL once
 * aborted or out of memory. */
double *comm_shared_rows(comm *c, int rank, int rows);

/* The mean over ranks of one host value each, in *mean. 0, or -1 once aborted. */
int comm_mean_double(comm *c, int rank, double v, double *mean);

/* For a watchdog: if some rank has waited in a barrier for more than
 * `timeout_s` seconds, returns how many ranks have not arrived, the lowest of
 * them in *missing and the collective in *what; else, if some GPU leader has
 * waited on NCCL that long (where all leaders wait, with nobody in a
 * barrier), how many such leaders, the lowest and what it waits on; else 0.
 * Aborting the comm then makes those leaders abort their NCCL ranks. */
int comm_overdue(comm *c, double now_s, double timeout_s, int *missing, const char **what);

/* CLOCK_MONOTONIC in seconds: the clock of comm_overdue and of the runner. */
double comm_now_s(void);

#endif
