/* Parle's per-replica state, exposed for tests that check every buffer. */
#ifndef PARLE_COUPLING_PARLE_H
#define PARLE_COUPLING_PARLE_H

typedef struct parle_state {
    float *x;   /* the replica's weights x^a; with L = 0 this is model.params */
    float *z;   /* running average of the inner iterate (L > 0) */
    float *v;   /* inner momentum (L > 0), never reset */
    float *u;   /* outer momentum, never reset */
} parle_state;

#endif
