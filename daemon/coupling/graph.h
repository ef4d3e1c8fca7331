/* What the synchronous graph and leader rules share (docs/algorithms.md):
 * their peer schedules, pure functions of (rank, n, round) so that every
 * replica computes the same graph without talking, and a few helpers over
 * the replica's vectors. */
#ifndef PARLE_COUPLING_GRAPH_H
#define PARLE_COUPLING_GRAPH_H

#include "replica.h"

/* The time-varying directed exponential graph (SGP): m = floor(log2(n-1)) + 1
 * distances 2^0 .. 2^(m-1); at round t (from 0) replica i sends to its p
 * out-peers i + 2^((t p + j) mod m), j < p, and receives from i - 2^(...).
 * n >= 2, 1 <= p <= m. */
int graph_exp_distances(int n);
int graph_exp_out(int i, int n, long t, int j, int p);
int graph_exp_in(int i, int n, long t, int j, int p);

/* The bipartite exponential graph (D-PSGD): one peer per round, at an odd
 * offset (1, 1+2, 1+4, ... < n, forward then backward, offsets equal mod n
 * kept once) that rotates each round; odd ranks step forward by it, even
 * ranks back, so i and its peer always pick each other. n even. */
int graph_bipartite_peer(int i, int n, long t);

/* A zeroed vector of nparams floats in the replica's memory; NULL with the
 * context's error set. */
float *rule_vector(replica *r);
void rule_vector_free(replica *r, float **v);

/* Copies of peers' vectors for replicas on another GPU, allocated on first
 * need (none when all replicas share one memory). */
#define RULE_PEER_SLOTS 6
typedef struct rule_peers { float *copy[RULE_PEER_SLOTS]; } rule_peers;
/* Rank `peer`'s vector of the current comm_exchange, readable by r's ops:
 * its own pointer when it shares r's memory, else a copy in `slot`. NULL
 * with the context's error set when out of memory. */
const float *rule_peer(replica *r, rule_peers *p, int slot, int peer);
void rule_peers_free(replica *r, rule_peers *p);

/* The local optimizer step x <- step(x, g) (momentum or Nesterov) on the
 * replica's own momentum buffer u, with the gradient in model.grads and
 * weight decay taken at x when `decay`. The rules that step one vector while
 * the gradient was taken at another (SGP's numerator, D-PSGD's mixed
 * iterate) fold the decay into g at the right point first, and pass 0. */
void rule_fold_decay(replica *r, const float *at); /* g += weight_decay at */
void rule_local_step(replica *r, float *x, float *u, int decay);

#endif
