/* Peer messaging for the asynchronous coupling rules (docs/algorithms.md,
 * "Asynchronous rules"): what one replica reads or writes of another's state
 * without a barrier. Built on comm's public API: the control data (locks,
 * sequence numbers, weights, counters) lives on the host in comm_shared's
 * block; every vector lives in its owner's context memory (backend_alloc on
 * the owner's context) and is read and written only through backend ops.
 *
 * Parts, chosen at attach:
 *   PEER_SNAPSHOT  each replica publishes (x, clock, loss) into one of two
 *                  buffers under a read-write lock: the owner only ever
 *                  *tries* the write lock (a busy buffer skips the publish,
 *                  never waits), readers try the read lock of the newest
 *                  whole buffer until a deadline and copy it out. A reader
 *                  gets a whole snapshot or none: never a torn one (gossip).
 *   PEER_PAIR      a shared x per replica under a mutex; a pair average
 *                  locks both in rank order (no deadlock whoever starts it)
 *                  and leaves both equal to the same average (AD-PSGD).
 *   PEER_MAILBOX   a push mailbox per replica holding m = sum a_k and the
 *                  a-weighted mean of the x_k of the messages not yet
 *                  absorbed: absorbing it at once is exactly absorbing them
 *                  one by one. Plus each replica's weight a_i (GoSGD).
 *   PEER_CENTRE    the EASGD centre variable c, in rank 0's memory, under a
 *                  mutex for the asynchronous exchange.
 *
 * Ordering on a GPU: a barrier or a lock orders threads, not device work.
 * Whoever writes a buffer another thread may read next (a publish, a push,
 * a pair average, a centre update) synchronises its own stream before it
 * releases the lock; whoever reads another's buffer synchronises before it
 * releases the lock that kept the buffer still. Arithmetic runs on the
 * caller's stream over its own memory; another replica's vector is only
 * copied (comm_peer_copy: peer to peer between GPUs), except where both live
 * in one memory (the host, or one GPU): a mailbox merge and the EASGD
 * centre.
 *
 * Ranks and peers: `rank` is the caller's rank in its process's comm (its
 * own slot); `peer` is the other replica's number in the job. In one
 * process they coincide. Across processes (MPI, CPUs only) a peer held by
 * another process is reached through that process's rank 0, which answers
 * requests from a thread of the net's (comm_peer_net.c): the same
 * operations with the same atomicity, the vectors sent over the net. */
#ifndef PARLE_COMM_PEER_H
#define PARLE_COMM_PEER_H

#include <stddef.h>
#include "comm.h"

enum comm_peer_part {
    PEER_SNAPSHOT = 1,
    PEER_PAIR = 2,
    PEER_MAILBOX = 4,
    PEER_CENTRE = 8,
    PEER_CENTRE_ASYNC = 16, /* with PEER_CENTRE: comm_peer_centre_average is used */
};

#define PEER_MAX 64 /* algorithm.replicas' bound */

typedef struct comm_peer comm_peer;

/* Every rank calls it once, in its rule's init, with the same len (floats a
 * vector) and parts; it ends with a barrier, after which every rank's
 * buffers exist. x0 (the rank's weights, context memory) fills its PEER_PAIR
 * x and, on rank 0, the centre. Returns 0, or -1 with a message (out of
 * memory, or the comm aborted). Whenever *out is set, success or not, the
 * rank must call comm_peer_detach(*out, ...) once it is done. */
int comm_peer_attach(comm *c, int rank, backend_ctx *ctx, size_t len, unsigned parts,
                     const float *x0, comm_peer **out, char *err, size_t errlen);
/* Waits until every rank that attached has come here too (so nobody still
 * writes into this rank's buffers), then frees them. Not abortable, but every
 * replica of a job reaches its rule's free. NULL p: nothing. */
void comm_peer_detach(comm_peer *p, int rank, backend_ctx *ctx);

/* ---- snapshots (gossip) ---- */
/* Publish x (context memory) with its clock and loss. Returns 1, or 0 when
 * both buffers had readers (the previous snapshot stays). */
int comm_peer_publish(comm_peer *p, int rank, backend_ctx *ctx, const float *x, double clock,
                      double loss);
typedef struct peer_meta {
    double clock, loss;
    unsigned long version;  /* the peer's publish count when it was written */
} peer_meta;
/* Copy `peer`'s newest whole snapshot into `into` (rank's memory) and its
 * clock and loss into *meta, trying for timeout_s seconds. The peer's buffer
 * is held only for the copy. Returns 0, or -1: the peer's buffers stayed
 * busy or unpublished that long, or the comm was aborted. */
int comm_peer_fetch(comm_peer *p, int rank, int peer, backend_ctx *ctx, double timeout_s,
                    float *into, peer_meta *meta);

/* ---- pairs (AD-PSGD) ---- */
/* The rank's shared x (context memory of the rank's ctx). Between
 * comm_peer_lock and comm_peer_unlock the owner may change it; at other times
 * only pair averages do. */
float *comm_peer_x(comm_peer *p, int rank);
void comm_peer_lock(comm_peer *p, int rank);
void comm_peer_unlock(comm_peer *p, int rank, backend_ctx *ctx);
/* x_rank, x_peer <- (x_rank + x_peer) / 2, atomically for the pair: both
 * locks are held (lower rank first) over the whole update. With dist2, the
 * squared distance between the two afterwards, read under the locks (0 when
 * the exchange was whole). ctx is the caller's (rank's). */
void comm_peer_pair_average(comm_peer *p, int rank, int peer, backend_ctx *ctx, double *dist2);

/* ---- mailboxes (GoSGD) ---- */
double comm_peer_weight(comm_peer *p, int rank);
/* Only the owner sets its weight. */
void comm_peer_set_weight(comm_peer *p, int rank, double a);
/* Add (x, a) to peer's mailbox: it blocks only while another push or the
 * peer's absorb holds the box (one vector op), and, when the peer's memory
 * is another GPU's, until the peer has absorbed what was there. */
void comm_peer_push(comm_peer *p, int rank, int peer, backend_ctx *ctx, const float *x, double a);
/* The owner absorbs its mailbox into x (its weights): x <- (a x + sum a_k
 * x_k) / (a + sum a_k), a <- a + sum a_k. wait = 0 skips a mailbox being
 * written (never holds the owner up); 1 waits for it (a quiescent point).
 * Returns 1 if anything was absorbed. */
int comm_peer_absorb(comm_peer *p, int rank, backend_ctx *ctx, float *x, int wait);
/* sum_i a_i + the weight in every mailbox of this process: 1 for GoSGD at
 * all times in one process, up to rounding (exactly what is in flight is
 * counted). */
double comm_peer_total_weight(comm_peer *p);

/* ---- the EASGD centre ---- */
float *comm_peer_centre(comm_peer *p);
/* Synchronous elastic step, every rank at once: xbar = mean of the x before
 * they move (an all-reduce), x <- x - alpha (x - c), and once all have read
 * c, rank 0 does c <- c + beta (xbar - c). 0, or -1 once aborted. */
int comm_peer_centre_elastic(comm_peer *p, int rank, backend_ctx *ctx, float *x, float alpha,
                             float beta);
/* x <- c, this process's centre read whole (under the lock its updates
 * take): a failed replica's re-seed. */
void comm_peer_centre_copy(comm_peer *p, int rank, backend_ctx *ctx, float *x);
/* Asynchronous exchange, one replica at a time: x, c <- (x + c) / 2, i.e.
 * x <- x - a (x - c), c <- c + a (x - c) with a = 1/2. */
void comm_peer_centre_average(comm_peer *p, int rank, backend_ctx *ctx, float *x);

/* ---- counters for status (each written by its owner; read by anyone) ---- */
typedef struct peer_counts {
    long publishes, skipped;  /* snapshots published; skipped (both buffers read) */
    long fetches, timeouts;   /* snapshot reads done; given up */
    long pushes, absorbs;     /* mailbox messages sent; absorbs with something in */
    long exchanges;           /* pair or centre averages this rank started */
} peer_counts;
void comm_peer_counts(comm_peer *p, int rank, peer_counts *out);
/* This process's replicas: the ranks whose counts are here. */
int comm_peer_replicas(const comm_peer *p);
void comm_peer_count(comm_peer *p, int rank, size_t field_offset, long add);
#define PEER_COUNT(p, rank, field, add) \
    comm_peer_count(p, rank, offsetof(peer_counts, field), add)
/* Per-reader scores of peers (gossip's flow control), owner-written. */
int comm_peer_score(comm_peer *p, int rank, int peer);
void comm_peer_set_score(comm_peer *p, int rank, int peer, int score);

#endif
