/* A rule's per-replica state (coupling_rule.init and .free): the struct
 * r->rule_state points to and the vectors of nparams floats it holds, made
 * and freed alike by every rule, so that each rule's init keeps only what is
 * its own. */
#ifndef PARLE_COUPLING_RULE_STATE_H
#define PARLE_COUPLING_RULE_STATE_H

#include <stddef.h>

#include "graph.h"
#include "replica.h"

/* r->rule_state: `size` zeroed bytes. NULL after "replica R: out of memory
 * for RULE's state" in err. */
void *rule_state_new(replica *r, size_t size, const char *rule, char *err, size_t errlen);

/* A list of the state's vector fields, as the two functions below take it:
 * RULE_VECTORS(&s->u, &s->tmp); a NULL entry (a vector the job does not
 * use) is skipped. */
#define RULE_VECTORS(...) \
    (float **const[]){__VA_ARGS__}, (int)(sizeof((float **[]){__VA_ARGS__}) / sizeof(float **))

/* Each vector zeroed (rule_vector): 0, or -1 after "replica R: RULE's
 * buffers: <the context's error>" in err; those made stay for
 * rule_state_free. */
int rule_state_vectors(replica *r, const char *rule, float **const vecs[], int n, char *err,
                       size_t errlen);

/* Frees the vectors (each set to NULL), the copies of peers' vectors when
 * `peers` is not NULL, and r->rule_state, which it clears. */
void rule_state_free(replica *r, rule_peers *peers, float **const vecs[], int n);

#endif
