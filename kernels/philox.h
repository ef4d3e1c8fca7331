/* Philox 4x32-10 counter-based RNG (Salmon et al., SC'11), host and device.
 * A stream is keyed by (seed, replica) and indexed by a 64-bit counter, so any
 * draw can be recomputed anywhere (CPU or GPU, before or after a resume) from
 * (seed, replica, counter) alone. */
#ifndef PARLE_PHILOX_H
#define PARLE_PHILOX_H

#include <stdint.h>
#include "hostdevice.h"

typedef struct philox_key { uint32_t k0, k1; } philox_key;
typedef struct philox_out { uint32_t v[4]; } philox_out;

/* The key mixes the job seed and the replica index; `stream` separates uses
 * (dropout, data order, init) so that they never share counters. */
PARLE_HD static inline philox_key philox_make_key(uint64_t seed, uint32_t replica, uint32_t stream)
{
    philox_key k;
    k.k0 = (uint32_t)seed ^ (stream * 0x9E3779B9u);
    k.k1 = (uint32_t)(seed >> 32) ^ (replica * 0x85EBCA6Bu) ^ 0x5bd1e995u;
    return k;
}

/* One round on the counter words, the key words of that round given. Words
 * are separate pointers so that a loop over lanes of independent counters
 * (kernels/cpu/activation.c) vectorises the very same round. */
PARLE_HD static inline void philox_round(uint32_t *c0, uint32_t *c1, uint32_t *c2, uint32_t *c3,
                                         uint32_t k0, uint32_t k1)
{
    const uint64_t p0 = (uint64_t)0xD2511F53u * *c0, p1 = (uint64_t)0xCD9E8D57u * *c2;
    const uint32_t n0 = (uint32_t)(p1 >> 32) ^ *c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ *c3 ^ k1;
    *c1 = (uint32_t)p1;
    *c3 = (uint32_t)p0;
    *c0 = n0;
    *c2 = n2;
}

/* Round r's key words: the Weyl sequence k + r (0x9E3779B9, 0xBB67AE85). */
PARLE_HD static inline uint32_t philox_key0(philox_key key, int r)
{
    return key.k0 + (uint32_t)r * 0x9E3779B9u;
}
PARLE_HD static inline uint32_t philox_key1(philox_key key, int r)
{
    return key.k1 + (uint32_t)r * 0xBB67AE85u;
}

PARLE_HD static inline philox_out philox4x32(philox_key key, uint64_t counter)
{
    philox_out o = {{(uint32_t)counter, (uint32_t)(counter >> 32), 0, 0}};
    for (int r = 0; r < 10; r++)
        philox_round(&o.v[0], &o.v[1], &o.v[2], &o.v[3], philox_key0(key, r), philox_key1(key, r));
    return o;
}

/* Uniform float in [0, 1) from the top 24 bits. */
PARLE_HD static inline float philox_uniform(uint32_t bits)
{
    return (float)(bits >> 8) * (1.0f / 16777216.0f);
}

/* The i-th uniform of a stream: draw i lives in block i/4, lane i%4. */
PARLE_HD static inline float philox_uniform_at(philox_key key, uint64_t base, uint64_t i)
{
    philox_out o = philox4x32(key, base + (i >> 2));
    return philox_uniform(o.v[i & 3]);
}

/* Uses of the generator, so that no two share a counter space. */
enum philox_stream {
    RNG_STREAM_INIT = 1,     /* weight initialisation */
    RNG_STREAM_DATA = 2,     /* data order and sampling */
    RNG_STREAM_DROPOUT = 3,  /* dropout masks */
    RNG_STREAM_COUPLING = 4, /* random choices of coupling rules */
    RNG_STREAM_SYNTH = 5,    /* synthetic dataset */
    RNG_STREAM_PEER = 6,     /* peer choices and coin flips of the asynchronous rules */
};

#endif
