/* What the asynchronous rules (easgd, adpsgd, gossip, gosgd) share: their
 * random choices, their meeting at the end of a pass, and the JSON of their
 * status. */
#ifndef PARLE_COUPLING_ASYNC_H
#define PARLE_COUPLING_ASYNC_H

#include "comm_peer.h"
#include "coupling.h"
#include "replica.h"
#include "rule_state.h"

/* The u-th uniform in [0, 1) of this replica's step r->step, from Philox
 * keyed by (seed, r->id, RNG_STREAM_PEER): the same choices on every run of a
 * seed and after a resume (which steps of other replicas they meet is the
 * scheduler's). u < 2^16. */
float async_uniform(const replica *r, unsigned u);
/* A peer other than r->id (by number in the job), uniformly, from u. */
int async_other(const replica *r, float u);

/* The end of a pass: every replica has finished its steps (a barrier), so
 * nothing moves until the next pass begins. 0, or -1 once aborted. */
int async_quiesce(replica *r);

/* The validation they share (their `validate`): at least 2 replicas.
 * Returns whether algorithm.replicas is good (not already reported). */
int async_validate(const job_config *cfg, rule_check *c);

/* The end of a rule: leave the peers (comm_peer_detach), then free the
 * rule's vectors (RULE_VECTORS) and its state (rule_state_free). */
void async_release(replica *r, comm_peer *peer, float **const vecs[], int n);

/* Status: the object's text in json (len bytes), or "" when it does not
 * fit; frees o. Returns the length written. */
struct cJSON;
int async_json_out(struct cJSON *o, char *json, size_t len);
/* An array of one number per replica of this process (every replica of
 * the job but across MPI ranks, where rank 0's status shows its own). */
struct cJSON *async_json_per_replica(comm_peer *p, double (*value)(comm_peer *, int));
/* The same of one peer_counts field, e.g. ASYNC_COUNTS(p, pushes). */
struct cJSON *async_json_counts(comm_peer *p, size_t field_offset);
#define ASYNC_COUNTS(p, field) async_json_counts(p, offsetof(peer_counts, field))

#endif
