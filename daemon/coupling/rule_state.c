#include "rule_state.h"

#include <stdio.h>
#include <stdlib.h>

void *rule_state_new(replica *r, size_t size, const char *rule, char *err, size_t errlen)
{
    r->rule_state = calloc(1, size);
    if (!r->rule_state)
        snprintf(err, errlen, "replica %d: out of memory for %s's state", r->rank, rule);
    return r->rule_state;
}

int rule_state_vectors(replica *r, const char *rule, float **const vecs[], int n, char *err,
                       size_t errlen)
{
    for (int i = 0; i < n; i++)
        if (vecs[i] && !(*vecs[i] = rule_vector(r))) {
            snprintf(err, errlen, "replica %d: %s's buffers: %s", r->rank, rule, r->ctx.err);
            return -1;
        }
    return 0;
}

void rule_state_free(replica *r, rule_peers *peers, float **const vecs[], int n)
{
    for (int i = 0; i < n; i++)
        if (vecs[i])
            rule_vector_free(r, vecs[i]);
    if (peers)
        rule_peers_free(r, peers);
    free(r->rule_state);
    r->rule_state = NULL;
}
