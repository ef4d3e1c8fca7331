/* comm_peer_impl.h: the peer operations when the peer is another process's
 * replica (MPI, docs/mpi.md "Asynchronous rules"). The caller sends one
 * request to that process (comm_net.call) and waits for its answer; there,
 * rank 0's comm_peer answers from the net's own thread (comm_net.serve)
 * with the same operation on the peer's slot under the same locks as a
 * replica of that process would take, so a pair average, a push or a
 * centre average is as atomic as in one process and a fetch gets a whole
 * snapshot or none. CPUs only (the vectors are host memory); every process
 * runs the same build on the same architecture, since the wire is the
 * struct's bytes. The answering thread never waits on a lock for long: a
 * busy pair or snapshot is answered "not now" and the caller tries again,
 * so no two processes can wait on each other's answers. */
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "comm_impl.h"
#include "comm_peer_impl.h"

enum peer_op { OP_FETCH = 1, OP_PAIR, OP_PUSH, OP_CENTRE };
enum peer_answer { ANSWER_DONE = 1, ANSWER_NOT_NOW, ANSWER_REFUSED };

typedef struct peer_wire {
    int op, peer, answer, pad; /* peer: the replica asked for, its number in the job */
    double a;                  /* a push's weight */
    double clock, loss;        /* a fetched snapshot's */
    unsigned long version;
} peer_wire; /* followed by len floats where the operation moves a vector */

static size_t wire_bytes(const comm_peer *p) { return sizeof(peer_wire) + p->len * sizeof(float); }
static float *wire_x(peer_wire *w) { return (float *)(w + 1); }
static const float *wire_cx(const peer_wire *w) { return (const float *)(w + 1); }

/* How long the answering thread tries a busy lock before "not now". */
#define ANSWER_TRY_S 0.001

static void nap_us(long us) { nanosleep(&(struct timespec){.tv_nsec = us * 1000}, NULL); }

/* ---- the answering side (the net's thread) ---- */

static int try_lock_for(pthread_mutex_t *m)
{
    double until = comm_now_s() + ANSWER_TRY_S;
    while (pthread_mutex_trylock(m) != 0) {
        if (comm_now_s() > until)
            return -1;
        sched_yield();
    }
    return 0;
}

/* The reply's buffer is host memory, as slot at's is (CPUs only). */
static enum peer_answer answer_fetch(comm_peer *p, int at, peer_wire *w)
{
    double until = comm_now_s() + ANSWER_TRY_S;
    peer_meta m;
    while (!peer_snapshot_take(p, at, &p->serve_ctx, wire_x(w), at, &m)) {
        if (comm_now_s() > until)
            return ANSWER_NOT_NOW;
        sched_yield();
    }
    w->clock = m.clock, w->loss = m.loss, w->version = m.version;
    return ANSWER_DONE;
}

/* x_j, x_i <- (x_i + x_j) / 2 as comm_peer_pair_average computes it; the
 * average goes back to the caller. */
static enum peer_answer answer_pair(comm_peer *p, peer_slot *s, const peer_wire *q, peer_wire *w)
{
    if (try_lock_for(&s->x_lock) != 0)
        return ANSWER_NOT_NOW;
    backend_ctx *ctx = &p->serve_ctx;
    backend_copy(ctx, wire_x(w), wire_cx(q), p->len * sizeof(float));
    vec_axpby(ctx, p->len, 0.5f, s->x, 0.5f, wire_x(w));
    backend_copy(ctx, s->x, wire_x(w), p->len * sizeof(float));
    pthread_mutex_unlock(&s->x_lock);
    return ANSWER_DONE;
}

/* The box's lock is held only for one vector op at a time: wait for it. */
static enum peer_answer answer_push(comm_peer *p, int at, const peer_wire *q)
{
    pthread_mutex_lock(&p->slot[at].box_lock);
    peer_box_merge(p, at, &p->serve_ctx, wire_cx(q), at, q->a);
    pthread_mutex_unlock(&p->slot[at].box_lock);
    return ANSWER_DONE;
}

static enum peer_answer answer_centre(comm_peer *p, const peer_wire *q, peer_wire *w)
{
    backend_copy(&p->serve_ctx, wire_x(w), wire_cx(q), p->len * sizeof(float));
    peer_centre_average_here(p, &p->serve_ctx, wire_x(w));
    return ANSWER_DONE;
}

static size_t answer(void *arg, const void *req, size_t len, void *reply, size_t cap)
{
    comm_peer *p = arg;
    const peer_wire *q = req;
    peer_wire *w = reply;
    if (cap < wire_bytes(p))
        return 0;
    /* The context is the answering thread's own: made on its first call. */
    if (!p->serve_ctx.ops)
        backend_ctx_init_cpu(&p->serve_ctx, 1);
    *w = (peer_wire){.answer = ANSWER_REFUSED};
    if (len < sizeof *q)
        return sizeof *w;
    w->op = q->op, w->peer = q->peer;
    int at = peer_slot_of(p, q->peer), with_x = q->op != OP_FETCH;
    if (at < 0 || (with_x && len != wire_bytes(p)) || p->serve_ctx.failed)
        return sizeof *w;
    peer_slot *s = &p->slot[at];
    if (q->op == OP_FETCH && (p->parts & PEER_SNAPSHOT))
        w->answer = answer_fetch(p, at, w);
    else if (q->op == OP_PAIR && (p->parts & PEER_PAIR))
        w->answer = answer_pair(p, s, q, w);
    else if (q->op == OP_PUSH && (p->parts & PEER_MAILBOX) && q->a > 0.0)
        w->answer = answer_push(p, at, q);
    else if (q->op == OP_CENTRE && (p->parts & PEER_CENTRE_ASYNC) && q->peer == 0)
        w->answer = answer_centre(p, q, w);
    if (p->serve_ctx.failed)
        w->answer = ANSWER_REFUSED;
    int sends_x = w->answer == ANSWER_DONE && q->op != OP_PUSH;
    return sends_x ? wire_bytes(p) : sizeof *w;
}

int peer_net_serve(comm_peer *p, char *err, size_t errlen)
{
    const comm_net *net = p->comm->net;
    if (!net->serve) {
        snprintf(err, errlen, "replica %d: this net cannot answer peer requests", p->first);
        return -1;
    }
    if (net->serve(net, p->comm, answer, p, wire_bytes(p), err, errlen) != 0)
        return -1;
    p->serving = 1;
    return 0;
}

void peer_net_unserve(comm_peer *p)
{
    p->comm->net->unserve(p->comm->net);
    p->serving = 0;
    if (p->serve_ctx.ops)
        backend_ctx_free(&p->serve_ctx);
}

/* ---- the asking side (a replica thread) ---- */

/* One request about replica `peer` and its answer (malloc'd, the caller
 * frees it), or NULL once the comm is aborted: by the net (it says why) or
 * here, on an answer that makes no sense. */
static peer_wire *ask(comm_peer *p, int rank, int peer, int op, backend_ctx *ctx, const float *x,
                      double a)
{
    comm *c = p->comm;
    size_t len = x ? wire_bytes(p) : sizeof(peer_wire);
    peer_wire *q = malloc(len), *w = malloc(wire_bytes(p));
    if (!q || !w) {
        free(q);
        free(w);
        comm_abort(c, "replica %d: out of memory for a request to replica %d", p->first + rank,
                   peer);
        return NULL;
    }
    *q = (peer_wire){.op = op, .peer = peer, .a = a};
    if (x)
        backend_download(ctx, wire_x(q), x, p->len * sizeof(float));
    comm_net_enter(c, 1); /* the call's own deadline names the rank that did not answer */
    long got = c->net->call(c->net, c, rank, peer, q, len, w, wire_bytes(p));
    comm_net_enter(c, 0);
    free(q);
    if (got < 0) {
        free(w);
        return NULL;
    }
    int sends_x = op != OP_PUSH && (size_t)got >= sizeof *w && w->answer == ANSWER_DONE;
    if ((size_t)got < sizeof *w || w->op != op || w->peer != peer ||
        w->answer == ANSWER_REFUSED || (sends_x && (size_t)got != wire_bytes(p))) {
        free(w);
        comm_abort(c, "replica %d: replica %d's process refused or garbled a peer request "
                   "(operation %d)", p->first + rank, peer, op);
        return NULL;
    }
    return w;
}

int peer_net_fetch(comm_peer *p, int rank, int peer, backend_ctx *ctx, float *into,
                   peer_meta *meta)
{
    peer_wire *w = ask(p, rank, peer, OP_FETCH, ctx, NULL, 0.0);
    if (!w)
        return -1;
    int got = w->answer == ANSWER_DONE;
    if (got) {
        backend_copy(ctx, into, wire_x(w), p->len * sizeof(float));
        *meta = (peer_meta){.clock = w->clock, .loss = w->loss, .version = w->version};
    }
    free(w);
    return got;
}

void peer_net_pair_average(comm_peer *p, int rank, int peer, backend_ctx *ctx)
{
    float *x = p->slot[rank].x;
    for (int tries = 0;; tries++) {
        comm_peer_lock(p, rank);
        peer_wire *w = ask(p, rank, peer, OP_PAIR, ctx, x, 0.0);
        int done = w && w->answer == ANSWER_DONE;
        if (done)
            backend_copy(ctx, x, wire_x(w), p->len * sizeof(float));
        comm_peer_unlock(p, rank, ctx);
        free(w);
        if (done || !w)
            return;
        /* Busy there: let go of ours meanwhile, whoever may want it. */
        nap_us(tries < 10 ? 50 : 1000);
    }
}

void peer_net_push(comm_peer *p, int rank, int peer, backend_ctx *ctx, const float *x, double a)
{
    free(ask(p, rank, peer, OP_PUSH, ctx, x, a));
}

void peer_net_centre_average(comm_peer *p, int rank, backend_ctx *ctx, float *x)
{
    peer_wire *w = ask(p, rank, 0, OP_CENTRE, ctx, x, 0.0);
    if (w && w->answer == ANSWER_DONE)
        backend_copy(ctx, x, wire_x(w), p->len * sizeof(float));
    free(w);
}
