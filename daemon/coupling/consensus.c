/* The consensus a failed replica is re-seeded from (coupling.h,
 * coupling_consensus): the healthy replicas' weights, read through one
 * exchange at a meeting point where nobody steps; and the re-seed of the
 * rules whose consensus is their mean (rule_reseed_mean). */
#include <math.h>

#include "coupling.h"
#include "graph.h"

int coupling_consensus(replica *r, int bad, float *w, int exact)
{
    size_t n = r->model.nparams;
    float *sum = NULL;
    if (bad) {
        /* Its own values are not to be trusted, nor taken for a peer's. */
        vec_scale(&r->ctx, n, NAN, w);
        if (!(sum = rule_vector(r)))
            comm_abort(r->comm, "replica %d: re-seed: %s", r->id, r->ctx.err);
    }
    const float *const *all = comm_exchange(r->comm, r->rank, &r->ctx, w, n);
    rule_peers copies = {0};
    int healthy = 0;
    for (int j = 0; all && bad && j < r->n && !(exact && healthy); j++) {
        if (j == r->id)
            continue;
        const float *x = rule_peer(r, &copies, 0, j);
        if (!x) {
            comm_abort(r->comm, "replica %d: re-seed: a copy of replica %d: %s", r->id, j,
                       r->ctx.err);
            break;
        }
        if (isfinite(vec_dist2(&r->ctx, n, x, x))) {
            vec_axpby(&r->ctx, n, 1.0f, x, 1.0f, sum);
            healthy++;
        }
    }
    int rc = all && comm_exchange_end(r->comm, r->rank, &r->ctx) == 0 ? 0 : -1;
    if (rc == 0 && bad && healthy == 0) {
        comm_abort(r->comm, "replica %d failed and no replica is left healthy to re-seed it "
                   "from", r->id);
        rc = -1;
    }
    if (rc == 0 && bad) {
        vec_scale(&r->ctx, n, 1.0f / (float)healthy, sum);
        backend_copy(&r->ctx, w, sum, n * sizeof(float));
    }
    rule_peers_free(r, &copies);
    if (sum)
        rule_vector_free(r, &sum);
    return rc;
}

int rule_reseed_mean(replica *r, int bad, float *x, float *u)
{
    if (coupling_consensus(r, bad, x, 0) != 0)
        return -1;
    if (bad)
        backend_zero(&r->ctx, u, r->model.nparams * sizeof(float));
    return 0;
}
