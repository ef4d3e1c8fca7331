/* Internal to comm_peer.c (one process's replicas, the top: it calls the
 * two others), comm_peer_net.c (replicas in other processes) and
 * comm_peer_slots.c (one slot's operations, which both share): the block
 * the replicas share. */
#ifndef PARLE_COMM_PEER_IMPL_H
#define PARLE_COMM_PEER_IMPL_H

#include <pthread.h>
#include "comm_peer.h"

/* One published snapshot: written under the write lock, read under a read
 * lock, so a reader holding it sees one whole publish. */
typedef struct snap_buf {
    pthread_rwlock_t lock;
    float *x;
    unsigned long version;   /* 0: never written */
    double clock, loss;
} snap_buf;

/* One replica's part of the block. The owner initialises it before the
 * attach barrier; nobody else touches it before that barrier. */
typedef struct peer_slot {
    int device;              /* the owner's: -1 the host, else its GPU */
    float *scratch;          /* a peer's vector copied in (pairs) */
    snap_buf snap[2];
    int latest;              /* the newest whole snapshot, -1 none (atomic) */
    unsigned long published; /* the owner's publish count (owner only) */
    pthread_mutex_t x_lock;
    float *x;
    pthread_mutex_t box_lock;
    float *box;              /* the a-weighted mean of the x_k in the box */
    double box_mass;         /* m = sum of a_k; guarded by box_lock */
    double weight;           /* a_i: owner-written, read by anyone (atomic) */
    peer_counts counts;      /* each field atomic */
    int score[PEER_MAX];     /* atomic; by the peer's number in the job */
} peer_slot;

struct comm_peer {
    comm *comm;
    int n;                   /* this process's replicas (slots) */
    int first;               /* the job's number of slot 0 (0 in one process) */
    size_t len;
    unsigned parts;
    int live;                /* ranks attached and not yet detached (atomic) */
    pthread_mutex_t centre_lock;
    float *centre;           /* rank 0's memory */
    /* Rank 0 answers the other processes' requests (comm_peer_net.c)
     * from attach until its detach, with this context's arithmetic. */
    int serving;
    backend_ctx serve_ctx;
    peer_slot slot[];
};

/* The slot of replica `peer` (its number in the job), or -1 when another
 * process holds it. */
static inline int peer_slot_of(const comm_peer *p, int peer)
{
    int s = peer - p->first;
    return s >= 0 && s < p->n ? s : -1;
}

/* A vector's bytes. */
static inline size_t bytes_of(const comm_peer *p) { return p->len * sizeof(float); }

/* A vector from replica src_rank's memory to dst_rank's, on ctx's stream: a
 * plain copy within one memory, a peer copy between GPUs (comm's). */
static inline void peer_copy(comm_peer *p, backend_ctx *ctx, float *dst, int dst_rank,
                             const float *src, int src_rank)
{
    comm_peer_copy(p->comm, ctx, dst, dst_rank, src, src_rank, p->len);
}

/* ---- comm_peer_slots.c: operations on this process's slots, which
 * comm_peer.c's calls and comm_peer_net.c's answers to other processes
 * share ---- */
/* One try at slot at's newest whole snapshot, copied into `into` (memory of
 * rank into_rank) with its meta: 1, or 0 when none is whole and free now. */
int peer_snapshot_take(comm_peer *p, int at, backend_ctx *ctx, float *into, int into_rank,
                       peer_meta *meta);
/* (x, a) into slot at's mailbox, x in rank x_rank's memory; the caller
 * holds the box's lock. */
void peer_box_merge(comm_peer *p, int at, backend_ctx *ctx, const float *x, int x_rank, double a);
/* x, c <- (x + c) / 2 on this process's centre, under its lock. */
void peer_centre_average_here(comm_peer *p, backend_ctx *ctx, float *x);

/* ---- comm_peer_net.c: replicas in other processes (CPUs only) ---- */
/* Rank 0, after the attach barrier: answer the other processes until
 * peer_net_unserve, which rank 0's detach calls before any slot is freed.
 * 0, or -1 with a message. */
int peer_net_serve(comm_peer *p, char *err, size_t errlen);
void peer_net_unserve(comm_peer *p);
/* The remote twins of comm_peer.h's operations, for `peer` in another
 * process. fetch: 1 with a snapshot, 0 none yet (the caller retries), -1
 * the comm aborted. The others abort the comm themselves on failure. */
int peer_net_fetch(comm_peer *p, int rank, int peer, backend_ctx *ctx, float *into,
                   peer_meta *meta);
void peer_net_pair_average(comm_peer *p, int rank, int peer, backend_ctx *ctx);
void peer_net_push(comm_peer *p, int rank, int peer, backend_ctx *ctx, const float *x, double a);
void peer_net_centre_average(comm_peer *p, int rank, backend_ctx *ctx, float *x);

#endif
