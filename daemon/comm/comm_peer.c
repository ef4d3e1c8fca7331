#include "comm_peer_impl.h"

#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* Both in one memory: ctx's ops may do arithmetic on the other's vector. */
static int same_memory(const comm_peer *p, int a, int b)
{
    return p->slot[a].device == p->slot[b].device;
}

/* Context memory for one vector; NULL (sticky error on ctx) if none. */
static float *vector(backend_ctx *ctx, size_t len, const float *from)
{
    float *v = backend_alloc(ctx, len * sizeof(float));
    if (v && from)
        backend_copy(ctx, v, from, len * sizeof(float));
    else if (v)
        backend_zero(ctx, v, len * sizeof(float));
    return v;
}

int comm_peer_attach(comm *c, int rank, backend_ctx *ctx, size_t len, unsigned parts,
                     const float *x0, comm_peer **out, char *err, size_t errlen)
{
    *out = NULL;
    comm_peer *p = comm_shared(c, rank, sizeof(comm_peer) + (size_t)c->n * sizeof(peer_slot));
    if (!p) {
        snprintf(err, errlen, "replica %d: the job stopped before its peers met", rank);
        return -1;
    }
    *out = p;
    __atomic_add_fetch(&p->live, 1, __ATOMIC_ACQ_REL);
    peer_slot *s = &p->slot[rank];
    pthread_rwlock_init(&s->snap[0].lock, NULL);
    pthread_rwlock_init(&s->snap[1].lock, NULL);
    pthread_mutex_init(&s->x_lock, NULL);
    pthread_mutex_init(&s->box_lock, NULL);
    s->latest = -1;
    s->device = ctx->device;
    if (rank == 0) {
        /* Read by the others only after the barrier below. */
        p->comm = c;
        p->n = c->n;
        p->first = c->net ? c->first : 0;
        p->len = len;
        p->parts = parts;
        pthread_mutex_init(&p->centre_lock, NULL);
    }
    int ok = 1;
    if (parts & PEER_PAIR)
        ok &= (s->scratch = vector(ctx, len, NULL)) != NULL;
    if (parts & PEER_SNAPSHOT)
        ok &= (s->snap[0].x = vector(ctx, len, NULL)) && (s->snap[1].x = vector(ctx, len, NULL));
    if (parts & PEER_PAIR)
        ok &= (s->x = vector(ctx, len, x0)) != NULL;
    if (parts & PEER_MAILBOX)
        ok &= (s->box = vector(ctx, len, NULL)) != NULL;
    if ((parts & PEER_CENTRE) && rank == 0)
        ok &= (p->centre = vector(ctx, len, x0)) != NULL;
    /* Whatever another rank reads after the barrier is on the device. */
    ok &= backend_sync(ctx) == 0;
    if (!ok) {
        snprintf(err, errlen, "replica %d: buffers for its peers: %s", rank, ctx->err);
        comm_abort(c, "replica %d: out of memory for its peers' buffers", rank);
        return -1;
    }
    if (comm_barrier(c, rank, "start") != 0) {
        snprintf(err, errlen, "replica %d: the job stopped before its peers met", rank);
        return -1;
    }
    if ((parts & PEER_CENTRE) && !same_memory(p, rank, 0)) {
        snprintf(err, errlen, "replica %d is on another device than replica 0, which holds the "
                 "EASGD centre: easgd needs all its replicas on one device", rank);
        comm_abort(c, "%s", err);
        return -1;
    }
    /* Across processes (MPI, on CPUs) each keeps a copy of the centre, moved
     * alike by the synchronous elastic step: it starts as replica 0's (every
     * replica starts from the same weights today; the copy keeps that an
     * assumption of nobody's). */
    if ((parts & PEER_CENTRE) && c->net && rank == 0 &&
        (bytes_of(p) > INT32_MAX ||
         c->net->bcast_bytes(c->net, c, p->centre, (int)bytes_of(p)) != 0)) {
        comm_abort(c, "replica %d: the EASGD centre's broadcast failed", rank);
        snprintf(err, errlen, "replica %d: the EASGD centre's broadcast failed", rank);
        return -1;
    }
    if ((parts & PEER_CENTRE) && c->net && comm_barrier(c, rank, "start") != 0) {
        snprintf(err, errlen, "replica %d: the job stopped before its peers met", rank);
        return -1;
    }
    /* Other processes' replicas reach ours through rank 0's answers. */
    if (c->net && rank == 0 && (parts & ~PEER_CENTRE) && peer_net_serve(p, err, errlen) != 0) {
        comm_abort(c, "%s", err);
        return -1;
    }
    return 0;
}

void comm_peer_detach(comm_peer *p, int rank, backend_ctx *ctx)
{
    if (!p)
        return;
    /* No answer to another process may touch a slot once it is freed: the
     * others free theirs only when rank 0 has come here too. */
    if (rank == 0 && p->serving)
        peer_net_unserve(p);
    __atomic_sub_fetch(&p->live, 1, __ATOMIC_ACQ_REL);
    /* A peer that has not seen the abort yet may still push into our box or
     * read our snapshot; it comes here at its next step at the latest. */
    while (__atomic_load_n(&p->live, __ATOMIC_ACQUIRE) > 0)
        nanosleep(&(struct timespec){.tv_nsec = 1000 * 1000}, NULL);
    peer_slot *s = &p->slot[rank];
    backend_free(ctx, s->scratch);
    backend_free(ctx, s->snap[0].x);
    backend_free(ctx, s->snap[1].x);
    backend_free(ctx, s->x);
    backend_free(ctx, s->box);
    pthread_rwlock_destroy(&s->snap[0].lock);
    pthread_rwlock_destroy(&s->snap[1].lock);
    pthread_mutex_destroy(&s->x_lock);
    pthread_mutex_destroy(&s->box_lock);
    if (rank == 0) {
        backend_free(ctx, p->centre);
        pthread_mutex_destroy(&p->centre_lock);
    }
}

/* ---- snapshots ---- */

int comm_peer_publish(comm_peer *p, int rank, backend_ctx *ctx, const float *x, double clock,
                      double loss)
{
    peer_slot *s = &p->slot[rank];
    /* The older buffer first: readers are most likely on the newer one. */
    int b = __atomic_load_n(&s->latest, __ATOMIC_RELAXED) == 0 ? 1 : 0;
    for (int tries = 0; tries < 2; tries++, b ^= 1) {
        snap_buf *sb = &s->snap[b];
        if (pthread_rwlock_trywrlock(&sb->lock) != 0)
            continue;
        backend_copy(ctx, sb->x, x, bytes_of(p));
        sb->version = ++s->published;
        sb->clock = clock;
        sb->loss = loss;
        /* Readers come in once the lock is free: the bytes must be there. */
        backend_sync(ctx);
        pthread_rwlock_unlock(&sb->lock);
        __atomic_store_n(&s->latest, b, __ATOMIC_RELEASE);
        PEER_COUNT(p, rank, publishes, 1);
        return 1;
    }
    PEER_COUNT(p, rank, skipped, 1);
    return 0;
}

int comm_peer_fetch(comm_peer *p, int rank, int peer, backend_ctx *ctx, double timeout_s,
                    float *into, peer_meta *meta)
{
    int at = peer_slot_of(p, peer);
    double deadline = comm_now_s() + timeout_s;
    for (int spins = 0;; spins++) {
        int got = at >= 0 ? peer_snapshot_take(p, at, ctx, into, rank, meta)
                          : peer_net_fetch(p, rank, peer, ctx, into, meta);
        if (got == 1) {
            PEER_COUNT(p, rank, fetches, 1);
            return 0;
        }
        /* The owner was writing the buffer we picked: it flips `latest` the
         * moment it is done, so a short wait usually suffices. */
        if (got < 0 || comm_now_s() >= deadline || comm_aborted(p->comm)) {
            PEER_COUNT(p, rank, timeouts, 1);
            return -1;
        }
        if (spins < 32)
            sched_yield();
        else
            nanosleep(&(struct timespec){.tv_nsec = 100 * 1000}, NULL);
    }
}

/* ---- pairs ---- */

float *comm_peer_x(comm_peer *p, int rank) { return p->slot[rank].x; }

void comm_peer_pair_average(comm_peer *p, int rank, int id, backend_ctx *ctx, double *dist2)
{
    int peer = peer_slot_of(p, id);
    if (peer < 0) {
        peer_net_pair_average(p, rank, id, ctx);
        if (dist2)
            *dist2 = 0.0; /* both now hold the one average the peer sent */
        PEER_COUNT(p, rank, exchanges, 1);
        return;
    }
    /* One global lock order (by rank) makes any set of concurrent pairs
     * deadlock-free, whichever side starts each. */
    int lo = rank < peer ? rank : peer, hi = rank < peer ? peer : rank;
    pthread_mutex_lock(&p->slot[lo].x_lock);
    pthread_mutex_lock(&p->slot[hi].x_lock);
    float *xi = p->slot[rank].x, *xj = p->slot[peer].x, *tmp = p->slot[rank].scratch;
    peer_copy(p, ctx, tmp, rank, xj, peer);
    vec_axpby(ctx, p->len, 0.5f, tmp, 0.5f, xi);
    peer_copy(p, ctx, xj, peer, xi, rank);
    if (dist2) {
        peer_copy(p, ctx, tmp, rank, xj, peer);
        *dist2 = vec_dist2(ctx, p->len, xi, tmp);
    }
    backend_sync(ctx);
    pthread_mutex_unlock(&p->slot[hi].x_lock);
    pthread_mutex_unlock(&p->slot[lo].x_lock);
    PEER_COUNT(p, rank, exchanges, 1);
}

/* ---- mailboxes ---- */

double comm_peer_weight(comm_peer *p, int rank)
{
    double a;
    __atomic_load(&p->slot[rank].weight, &a, __ATOMIC_ACQUIRE);
    return a;
}

void comm_peer_set_weight(comm_peer *p, int rank, double a)
{
    __atomic_store(&p->slot[rank].weight, &a, __ATOMIC_RELEASE);
}

void comm_peer_push(comm_peer *p, int rank, int id, backend_ctx *ctx, const float *x, double a)
{
    int peer = peer_slot_of(p, id);
    if (peer < 0) {
        peer_net_push(p, rank, id, ctx, x, a);
        PEER_COUNT(p, rank, pushes, 1);
        return;
    }
    peer_slot *s = &p->slot[peer];
    pthread_mutex_lock(&s->box_lock);
    /* Merging needs arithmetic on the box: only where our ops reach it.
     * Elsewhere a full box waits for its owner's next absorb (one step). */
    while (s->box_mass > 0.0 && !same_memory(p, rank, peer) && !comm_aborted(p->comm)) {
        pthread_mutex_unlock(&s->box_lock);
        nanosleep(&(struct timespec){.tv_nsec = 100 * 1000}, NULL);
        pthread_mutex_lock(&s->box_lock);
    }
    peer_box_merge(p, peer, ctx, x, rank, a);
    pthread_mutex_unlock(&s->box_lock);
    PEER_COUNT(p, rank, pushes, 1);
}

int comm_peer_absorb(comm_peer *p, int rank, backend_ctx *ctx, float *x, int wait)
{
    peer_slot *s = &p->slot[rank];
    if (wait)
        pthread_mutex_lock(&s->box_lock);
    else if (pthread_mutex_trylock(&s->box_lock) != 0)
        return 0;
    double m = s->box_mass;
    if (m > 0.0) {
        double a = comm_peer_weight(p, rank), sum = a + m;
        vec_axpby(ctx, p->len, (float)(m / sum), s->box, (float)(a / sum), x);
        comm_peer_set_weight(p, rank, sum);
        s->box_mass = 0.0;
        /* The next push overwrites the box: our read of it must be done. */
        backend_sync(ctx);
    }
    pthread_mutex_unlock(&s->box_lock);
    if (m > 0.0)
        PEER_COUNT(p, rank, absorbs, 1);
    return m > 0.0;
}

double comm_peer_total_weight(comm_peer *p)
{
    double total = 0.0;
    /* An absorb moves weight from the box to a_i under the box's lock:
     * read both under it, so nothing is counted twice or not at all. */
    for (int i = 0; i < p->n; i++) {
        pthread_mutex_lock(&p->slot[i].box_lock);
        total += p->slot[i].box_mass + comm_peer_weight(p, i);
        pthread_mutex_unlock(&p->slot[i].box_lock);
    }
    return total;
}

/* ---- the centre ---- */

float *comm_peer_centre(comm_peer *p) { return p->centre; }

int comm_peer_centre_elastic(comm_peer *p, int rank, backend_ctx *ctx, float *x, float alpha,
                             float beta)
{
    const float *xbar = comm_allreduce_mean(p->comm, rank, ctx, x, p->len);
    if (!xbar)
        return -1;
    vec_axpby(ctx, p->len, alpha, p->centre, 1.0f - alpha, x);
    /* Everyone's read of the old c is done before rank 0 moves it. */
    if (backend_sync(ctx) != 0 || comm_barrier(p->comm, rank, "EASGD centre") != 0)
        return -1;
    /* xbar stays until the next collective, which starts with a stream sync
     * on every rank: c is whole before anyone reads it again, but for a
     * failing replica's copy (comm_peer_centre_copy), which takes the lock. */
    if (rank == 0) {
        pthread_mutex_lock(&p->centre_lock);
        vec_axpby(ctx, p->len, beta, xbar, 1.0f - beta, p->centre);
        backend_sync(ctx);
        pthread_mutex_unlock(&p->centre_lock);
    }
    return 0;
}

void comm_peer_centre_copy(comm_peer *p, int rank, backend_ctx *ctx, float *x)
{
    pthread_mutex_lock(&p->centre_lock);
    comm_peer_copy(p->comm, ctx, x, rank, p->centre, 0, p->len);
    backend_sync(ctx);
    pthread_mutex_unlock(&p->centre_lock);
}

void comm_peer_centre_average(comm_peer *p, int rank, backend_ctx *ctx, float *x)
{
    /* Across processes the centre is replica 0's process's. */
    if (peer_slot_of(p, 0) < 0)
        peer_net_centre_average(p, rank, ctx, x);
    else
        peer_centre_average_here(p, ctx, x);
}

/* ---- counters ---- */

void comm_peer_count(comm_peer *p, int rank, size_t field_offset, long add)
{
    long *f = (long *)((char *)&p->slot[rank].counts + field_offset);
    __atomic_add_fetch(f, add, __ATOMIC_RELAXED);
}

int comm_peer_replicas(const comm_peer *p) { return p->n; }

void comm_peer_counts(comm_peer *p, int rank, peer_counts *out)
{
    const long *in = (const long *)&p->slot[rank].counts;
    long *o = (long *)out;
    for (size_t i = 0; i < sizeof(peer_counts) / sizeof(long); i++)
        o[i] = __atomic_load_n(&in[i], __ATOMIC_RELAXED);
}

int comm_peer_score(comm_peer *p, int rank, int peer)
{
    return __atomic_load_n(&p->slot[rank].score[peer], __ATOMIC_RELAXED);
}

void comm_peer_set_score(comm_peer *p, int rank, int peer, int score)
{
    __atomic_store_n(&p->slot[rank].score[peer], score, __ATOMIC_RELAXED);
}
