/* A generated classification set for tests and quick runs: each class has a
 * smooth prototype image (a coarse random grid, bilinearly upsampled); an
 * example is its class's prototype plus Gaussian pixel noise, clamped to
 * [0, 1]. Every draw comes from Philox (RNG_STREAM_SYNTH) at a fixed counter,
 * so a seed gives the same set anywhere. */
#include "dataset.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "philox.h"

#define SYNTH_GRID 4            /* coarse grid points per side of a prototype */
#define SYNTH_LO 0.25f          /* prototypes span [LO, LO + SPAN] */
#define SYNTH_SPAN 0.5f
#define SYNTH_NOISE 0.2f        /* noise standard deviation per pixel */
#define SYNTH_MAX_SIDE 4096

/* Key "replicas" separate the draws: prototypes are shared by both splits,
 * the noise is not. */
enum { SYNTH_KEY_PROTOTYPES, SYNTH_KEY_TRAIN_NOISE, SYNTH_KEY_TEST_NOISE };

/* Bilinear interpolation of a SYNTH_GRID^2 grid at pixel (y, x) of h x w. */
static float grid_sample(const float *grid, int y, int x, int h, int w)
{
    float gy = h > 1 ? (float)y * (SYNTH_GRID - 1) / (float)(h - 1) : 0.0f;
    float gx = w > 1 ? (float)x * (SYNTH_GRID - 1) / (float)(w - 1) : 0.0f;
    int y0 = (int)gy, x0 = (int)gx;
    int y1 = y0 + 1 < SYNTH_GRID ? y0 + 1 : y0, x1 = x0 + 1 < SYNTH_GRID ? x0 + 1 : x0;
    float fy = gy - (float)y0, fx = gx - (float)x0;
    float top = grid[y0 * SYNTH_GRID + x0] * (1 - fx) + grid[y0 * SYNTH_GRID + x1] * fx;
    float bottom = grid[y1 * SYNTH_GRID + x0] * (1 - fx) + grid[y1 * SYNTH_GRID + x1] * fx;
    return top * (1 - fy) + bottom * fy;
}

static void make_prototypes(float *protos, int classes, int c, int h, int w, uint64_t seed)
{
    philox_key key = philox_make_key(seed, SYNTH_KEY_PROTOTYPES, RNG_STREAM_SYNTH);
    float grid[SYNTH_GRID * SYNTH_GRID];
    uint64_t draw = 0;
    for (int k = 0; k < classes * c; k++) {
        for (int g = 0; g < SYNTH_GRID * SYNTH_GRID; g++)
            grid[g] = SYNTH_LO + SYNTH_SPAN * philox_uniform_at(key, 0, draw++);
        float *plane = protos + (size_t)k * h * w;
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                plane[y * w + x] = grid_sample(grid, y, x, h, w);
    }
}

/* Four standard normals from Philox block `counter`: Box-Muller on each pair
 * of lanes, cosine and sine; 1 - u keeps the log finite. */
static void normals_at(philox_key key, uint64_t counter, float z[4])
{
    philox_out o = philox4x32(key, counter);
    for (int pair = 0; pair < 2; pair++) {
        float r = sqrtf(-2.0f * logf(1.0f - philox_uniform(o.v[2 * pair])));
        float theta = 6.28318530718f * philox_uniform(o.v[2 * pair + 1]);
        z[2 * pair] = r * cosf(theta);
        z[2 * pair + 1] = r * sinf(theta);
    }
}

int synthetic_make(dataset *out, int n, int c, int h, int w, int classes, uint64_t seed,
                   int is_test, const volatile int *stop, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    if (n <= 0 || c <= 0 || c > 64 || h <= 0 || h > SYNTH_MAX_SIDE || w <= 0 ||
        w > SYNTH_MAX_SIDE || classes < 2 || classes > 100000) {
        snprintf(err, errlen,
                 "synthetic: bad shape n=%d c=%d h=%d w=%d classes=%d (need n, c, h, w >= 1, "
                 "classes >= 2)", n, c, h, w, classes);
        return -1;
    }
    out->n = n;
    out->c = c;
    out->h = h;
    out->w = w;
    out->classes = classes;
    size_t size = dataset_example_size(out);
    float *protos = malloc((size_t)classes * size * sizeof(float));
    out->images = malloc((size_t)n * size * sizeof(float));
    out->labels = malloc((size_t)n * sizeof(int32_t));
    if (!protos || !out->images || !out->labels) {
        snprintf(err, errlen, "synthetic: out of memory for %d examples of %zu floats", n, size);
        free(protos);
        dataset_free(out);
        return -1;
    }
    make_prototypes(protos, classes, c, h, w, seed);
    philox_key noise = philox_make_key(seed, is_test ? SYNTH_KEY_TEST_NOISE : SYNTH_KEY_TRAIN_NOISE,
                                       RNG_STREAM_SYNTH);
    size_t blocks = (size + 3) / 4; /* Philox blocks per example */
    for (int i = 0; i < n; i++) {
        if (data_check_stop(stop, err, errlen) != 0) {
            free(protos);
            dataset_free(out);
            return -1;
        }
        int label = i % classes; /* balanced, and so is any prefix */
        out->labels[i] = label;
        const float *p = protos + (size_t)label * size;
        float *x = out->images + (size_t)i * size;
        float z[4];
        for (size_t j = 0; j < size; j++) {
            if (j % 4 == 0)
                normals_at(noise, (uint64_t)i * blocks + j / 4, z);
            float v = p[j] + SYNTH_NOISE * z[j % 4];
            x[j] = v < 0.0f ? 0.0f : v > 1.0f ? 1.0f : v;
        }
    }
    free(protos);
    return 0;
}
