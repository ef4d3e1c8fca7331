/* comm_peer_slots.c (comm_peer_impl.h): the operations on one of this process's slots that
 * both a replica of this process (comm_peer.c) and an answer to another
 * process's request (comm_peer_net.c) make, under the slot's locks. They
 * call neither file. */
#include "comm_peer_impl.h"

#include <pthread.h>

int peer_snapshot_take(comm_peer *p, int at, backend_ctx *ctx, float *into, int into_rank,
                       peer_meta *meta)
{
    peer_slot *s = &p->slot[at];
    int b = __atomic_load_n(&s->latest, __ATOMIC_ACQUIRE);
    if (b < 0 || pthread_rwlock_tryrdlock(&s->snap[b].lock) != 0)
        return 0;
    const snap_buf *sb = &s->snap[b];
    int whole = sb->version > 0;
    if (whole) {
        peer_copy(p, ctx, into, into_rank, sb->x, at);
        *meta = (peer_meta){.clock = sb->clock, .loss = sb->loss, .version = sb->version};
        /* The owner may write there again once we let go. */
        backend_sync(ctx);
    }
    pthread_rwlock_unlock(&s->snap[b].lock);
    return whole;
}

void comm_peer_lock(comm_peer *p, int rank) { pthread_mutex_lock(&p->slot[rank].x_lock); }

void comm_peer_unlock(comm_peer *p, int rank, backend_ctx *ctx)
{
    backend_sync(ctx);
    pthread_mutex_unlock(&p->slot[rank].x_lock);
}

void peer_box_merge(comm_peer *p, int at, backend_ctx *ctx, const float *x, int x_rank, double a)
{
    peer_slot *s = &p->slot[at];
    double m = s->box_mass;
    /* An empty box may hold stale numbers: overwrite, do not merge. */
    if (m == 0.0)
        peer_copy(p, ctx, s->box, at, x, x_rank);
    else
        vec_axpby(ctx, p->len, (float)(a / (m + a)), x, (float)(m / (m + a)), s->box);
    s->box_mass = m + a;
    backend_sync(ctx);
}

void peer_centre_average_here(comm_peer *p, backend_ctx *ctx, float *x)
{
    pthread_mutex_lock(&p->centre_lock);
    vec_axpby(ctx, p->len, 0.5f, p->centre, 0.5f, x);
    backend_copy(ctx, p->centre, x, bytes_of(p));
    backend_sync(ctx);
    pthread_mutex_unlock(&p->centre_lock);
}
