/* Which examples a replica trains on, step by step: a fresh Philox
 * permutation of its data each pass (`shuffle`), or uniform draws with
 * replacement (`replacement`, the Parle paper's). Fully determined by
 * (seed, replica, position), so a resume continues the same sequence. */
#ifndef PARLE_SAMPLER_H
#define PARLE_SAMPLER_H

#include <stdint.h>
#include "dataset.h"
#include "jobconfig.h"

typedef struct sampler {
    philox_key key;
    int lo, count;          /* the replica's shard [lo, lo + count) */
    int batch;
    int replacement;
    int32_t *perm;          /* current pass's order (shuffle) */
    long pass;              /* passes started */
    int pos;                /* next position in the pass */
    uint64_t draws;         /* examples drawn so far (replacement) */
} sampler;

int sampler_init(sampler *s, const job_config *cfg, int n_examples, int rank, int replicas);
/* Gathers the next mini-batch into x, y; returns its size (the last batch of
 * a pass may be short). */
int sampler_next(sampler *s, const dataset *d, float *x, int32_t *y);
/* Continue from a saved position (pass, pos, draws as in the struct). */
void sampler_restore(sampler *s, long pass, int pos, uint64_t draws);
void sampler_free(sampler *s);

#endif
