#include "sampler.h"

#include <stdlib.h>
#include <string.h>

/* floor(bits * m / 2^32): an index in [0, m) from 32 random bits. */
static int scaled_index(uint32_t bits, int m) { return (int)(((uint64_t)bits * (uint64_t)m) >> 32); }

static void shuffle_pass(sampler *s)
{
    for (int i = 0; i < s->count; i++)
        s->perm[i] = s->lo + i;
    uint64_t base = (uint64_t)s->pass << 32;
    for (int i = s->count - 1; i > 0; i--) {
        int j = scaled_index(philox4x32(s->key, base + (uint64_t)i).v[0], i + 1);
        int32_t t = s->perm[i];
        s->perm[i] = s->perm[j];
        s->perm[j] = t;
    }
    s->pass++;
    s->pos = 0;
}

int sampler_init(sampler *s, const job_config *cfg, int n_examples, int rank, int replicas)
{
    memset(s, 0, sizeof(*s));
    s->key = philox_make_key(cfg->seed, (uint32_t)rank, RNG_STREAM_DATA);
    if (cfg->data.split) {
        s->lo = (int)((long)n_examples * rank / replicas);
        s->count = (int)((long)n_examples * (rank + 1) / replicas) - s->lo;
    } else {
        s->count = n_examples;
    }
    s->batch = cfg->optim.batch;
    s->replacement = strcmp(cfg->data.sampling, "replacement") == 0;
    if (!s->replacement) {
        if (!(s->perm = malloc((size_t)s->count * sizeof(int32_t))))
            return -1;
        s->pos = s->count; /* the first call starts pass 0 */
    }
    return 0;
}

static void copy_example(const dataset *d, int idx, float *x, int32_t *y, int slot)
{
    size_t ex = dataset_example_size(d);
    memcpy(x + (size_t)slot * ex, d->images + (size_t)idx * ex, ex * sizeof(float));
    y[slot] = d->labels[idx];
}

int sampler_next(sampler *s, const dataset *d, float *x, int32_t *y)
{
    if (s->replacement) {
        for (int i = 0; i < s->batch; i++, s->draws++) {
            philox_out o = philox4x32(s->key, s->draws);
            copy_example(d, s->lo + scaled_index(o.v[0], s->count), x, y, i);
        }
        return s->batch;
    }
    /* A lone example left at the end of a pass would make a batch without
     * variance for batch norm: start the next pass instead. */
    if (s->count - s->pos < 2)
        shuffle_pass(s);
    int n = s->count - s->pos < s->batch ? s->count - s->pos : s->batch;
    for (int i = 0; i < n; i++)
        copy_example(d, s->perm[s->pos + i], x, y, i);
    s->pos += n;
    return n;
}

void sampler_restore(sampler *s, long pass, int pos, uint64_t draws)
{
    s->draws = draws;
    if (s->replacement || pass == 0)
        return;
    s->pass = pass - 1;
    shuffle_pass(s); /* regenerates pass `pass - 1`'s order and counts it */
    s->pos = pos;
}

void sampler_free(sampler *s)
{
    free(s->perm);
    s->perm = NULL;
}
