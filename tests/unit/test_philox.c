/* Philox 4x32-10 against the Random123 known-answer vectors, and the uniform
 * draws built on it.
 *
 * philox4x32() takes a 64-bit counter (words c0, c1; c2 = c3 = 0), so only the
 * all-zero vector can be given to it directly. The other two need all four
 * counter words: a local full-width Philox checks them, and is then shown to
 * agree with philox4x32() on random keys and counters, so the header's rounds
 * are the published ones. */
#include <stdlib.h>

#include "philox.h"
#include "testutil.h"

typedef struct kat {
    uint32_t ctr[4], key[2], out[4];
} kat;

/* Salmon et al. / Random123 kat_vectors, philox4x32 with 10 rounds. */
static const kat kats[] = {
    {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
    {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
     {0xffffffffu, 0xffffffffu},
     {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
    {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
     {0xa4093822u, 0x299f31d0u},
     {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
};

/* The specification's 4-word round, with the 64-bit products written out. */
static void philox_full(const uint32_t ctr[4], const uint32_t key[2], uint32_t out[4])
{
    uint32_t x0 = ctr[0], x1 = ctr[1], x2 = ctr[2], x3 = ctr[3], k0 = key[0], k1 = key[1];
    for (int round = 0; round < 10; round++) {
        if (round > 0) {
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        uint64_t p0 = (uint64_t)0xD2511F53u * x0, p1 = (uint64_t)0xCD9E8D57u * x2;
        uint32_t y0 = (uint32_t)(p1 >> 32) ^ x1 ^ k0, y1 = (uint32_t)p1;
        uint32_t y2 = (uint32_t)(p0 >> 32) ^ x3 ^ k1, y3 = (uint32_t)p0;
        x0 = y0, x1 = y1, x2 = y2, x3 = y3;
    }
    out[0] = x0, out[1] = x1, out[2] = x2, out[3] = x3;
}

static uint32_t random_u32(void) { return (uint32_t)test_uniform(0.0, 4294967296.0); }

static void test_known_answers(void)
{
    for (size_t t = 0; t < sizeof kats / sizeof kats[0]; t++) {
        uint32_t out[4];
        philox_full(kats[t].ctr, kats[t].key, out);
        for (int j = 0; j < 4; j++)
            CHECK(out[j] == kats[t].out[j], "KAT %zu word %d: got %08x want %08x", t, j, out[j],
                  kats[t].out[j]);
    }
    /* The zero vector through the header's function itself. */
    philox_key zero = {0, 0};
    philox_out o = philox4x32(zero, 0);
    for (int j = 0; j < 4; j++)
        CHECK(o.v[j] == kats[0].out[j], "philox4x32 zero KAT word %d: got %08x want %08x", j,
              o.v[j], kats[0].out[j]);
    /* The header on counters with c2 = c3 = 0 equals the full-width rounds. */
    int differ = 0;
    for (int t = 0; t < 1000; t++) {
        philox_key key = {random_u32(), random_u32()};
        uint64_t counter = ((uint64_t)random_u32() << 32) | random_u32();
        uint32_t ctr[4] = {(uint32_t)counter, (uint32_t)(counter >> 32), 0, 0}, k[2] = {key.k0, key.k1};
        uint32_t want[4];
        philox_full(ctr, k, want);
        philox_out got = philox4x32(key, counter);
        for (int j = 0; j < 4; j++)
            differ += got.v[j] != want[j];
    }
    CHECK(differ == 0, "philox4x32 differs from the full-width rounds in %d words", differ);
}

static void test_uniforms(void)
{
    const philox_key key = philox_make_key(test_seed(), 1, RNG_STREAM_DATA);
    const uint64_t base = ((uint64_t)random_u32() << 16) | random_u32();
    const size_t count = 1 << 20;
    double sum = 0.0, sum_sq = 0.0;
    int out_of_range = 0, inconsistent = 0;
    for (size_t i = 0; i < count; i++) {
        float u = philox_uniform_at(key, base, i);
        out_of_range += !(u >= 0.0f && u < 1.0f);
        /* Draw i is lane i % 4 of block base + i / 4, from the top 24 bits. */
        uint32_t bits = philox4x32(key, base + i / 4).v[i % 4];
        inconsistent += u != (float)((double)(bits >> 8) / 16777216.0);
        sum += u;
        sum_sq += (double)u * u;
    }
    CHECK(out_of_range == 0, "%d uniforms outside [0, 1)", out_of_range);
    CHECK(inconsistent == 0, "%d uniforms are not the top 24 bits of their block lane",
          inconsistent);
    /* Mean 1/2, variance 1/12; within 5 standard errors. */
    double mean = sum / count, var = sum_sq / count - mean * mean;
    CHECK(fabs(mean - 0.5) < 5.0 * sqrt(1.0 / 12.0 / count), "uniform mean %.6f", mean);
    CHECK(fabs(var - 1.0 / 12.0) < 5.0 * sqrt(1.0 / 180.0 / count), "uniform variance %.6f", var);

    /* Distinct streams: other replica, other use, next counter. */
    const philox_key other_replica = philox_make_key(test_seed(), 2, RNG_STREAM_DATA);
    const philox_key other_stream = philox_make_key(test_seed(), 1, RNG_STREAM_DROPOUT);
    int same_replica = 0, same_stream = 0, same_counter = 0;
    for (uint64_t c = 0; c < 256; c++) {
        philox_out a = philox4x32(key, base + c);
        philox_out b = philox4x32(other_replica, base + c);
        philox_out s = philox4x32(other_stream, base + c);
        philox_out n = philox4x32(key, base + c + 1);
        for (int j = 0; j < 4; j++) {
            same_replica += a.v[j] == b.v[j];
            same_stream += a.v[j] == s.v[j];
            same_counter += a.v[j] == n.v[j];
        }
    }
    /* 1024 pairs of 32-bit words: a chance match is ~2e-7 likely. */
    CHECK(same_replica == 0, "replica streams share %d words", same_replica);
    CHECK(same_stream == 0, "use streams share %d words", same_stream);
    CHECK(same_counter == 0, "consecutive counters share %d words", same_counter);
}

int main(void)
{
    test_init("philox");
    test_known_answers();
    test_uniforms();
    return test_main_end();
}
