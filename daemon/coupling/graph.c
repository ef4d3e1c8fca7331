#include "graph.h"

#include "coupling.h"

int graph_exp_distances(int n)
{
    int m = 0;
    while ((1L << m) <= n - 1) /* 2^(m-1) <= n-1 < 2^m: m = floor(log2(n-1)) + 1 */
        m++;
    return m > 0 ? m : 1;
}

static int wrap(long v, int n) { return (int)(((v % n) + n) % n); }

int graph_exp_out(int i, int n, long t, int j, int p)
{
    return wrap(i + (1L << ((t * p + j) % graph_exp_distances(n))), n);
}

int graph_exp_in(int i, int n, long t, int j, int p)
{
    return wrap(i - (1L << ((t * p + j) % graph_exp_distances(n))), n);
}

int graph_bipartite_peer(int i, int n, long t)
{
    /* At most 2 (floor(log2(n-1)) + 1) <= 128 offsets for n <= 2^63. */
    long offs[128];
    int count = 0;
    for (int e = 0; (1L << e) <= n - 1 && count < 126; e++) {
        long d = e == 0 ? 1 : 1 + (1L << e);
        for (int sign = 1; sign >= -1; sign -= 2) {
            int dup = 0;
            for (int c = 0; c < count; c++)
                dup |= wrap(offs[c] - sign * d, n) == 0;
            if (!dup)
                offs[count++] = sign * d;
        }
    }
    long off = offs[t % count];
    return wrap(i % 2 ? i + off : i - off, n);
}

float *rule_vector(replica *r)
{
    size_t bytes = r->model.nparams * sizeof(float);
    float *v = backend_alloc(&r->ctx, bytes);
    if (v)
        backend_zero(&r->ctx, v, bytes);
    return v;
}

void rule_vector_free(replica *r, float **v)
{
    backend_free(&r->ctx, *v);
    *v = NULL;
}

const float *rule_peer(replica *r, rule_peers *p, int slot, int peer)
{
    if (!comm_same_memory(r->comm, r->rank, peer) && !p->copy[slot] &&
        !(p->copy[slot] = rule_vector(r)))
        return NULL;
    return comm_read_peer(r->comm, r->rank, &r->ctx, peer, p->copy[slot], r->model.nparams);
}

void rule_peers_free(replica *r, rule_peers *p)
{
    for (int i = 0; i < RULE_PEER_SLOTS; i++)
        rule_vector_free(r, &p->copy[i]);
}

void rule_fold_decay(replica *r, const float *at)
{
    float wd = (float)r->cfg->optim.weight_decay;
    if (wd > 0.0f)
        vec_axpby(&r->ctx, r->model.nparams, wd, at, 1.0f, r->model.grads);
}

void rule_local_step(replica *r, float *x, float *u, int decay)
{
    const job_config *cfg = r->cfg;
    vec_sgd_momentum(&r->ctx, r->model.nparams, r->lr, (float)cfg->optim.momentum,
                     decay ? (float)cfg->optim.weight_decay : 0.0f, cfg->optim.nesterov, x, u,
                     r->model.grads);
}
