#include "augment.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An offset in [0, m) from 32 random bits (as the sampler draws indices). */
static int scaled_offset(uint32_t bits, int m) { return (int)(((uint64_t)bits * (uint64_t)m) >> 32); }

/* Where padded coordinate i (image coordinates, may be outside [0, len))
 * reads from, or -1 for a zero. */
static int source_index(int i, int len, augment_padding padding)
{
    if (i >= 0 && i < len)
        return i;
    if (padding == AUGMENT_PAD_ZERO)
        return -1;
    return i < 0 ? -i : 2 * (len - 1) - i;
}

void augment_batch(const augment_params *p, philox_key key, uint64_t counter, float *x, int n,
                   int c, int h, int w, float *scratch)
{
    size_t plane = (size_t)h * w, ex = (size_t)c * plane;
    for (int i = 0; i < n; i++) {
        philox_out o = philox4x32(key, counter + (uint64_t)i);
        int flip = p->flip && (o.v[0] & 1);
        int dy = p->pad ? scaled_offset(o.v[1], 2 * p->pad + 1) - p->pad : 0;
        int dx = p->pad ? scaled_offset(o.v[2], 2 * p->pad + 1) - p->pad : 0;
        if (!flip && dy == 0 && dx == 0)
            continue;
        float *img = x + (size_t)i * ex;
        memcpy(scratch, img, ex * sizeof(float));
        /* out[y][x] = flipped[y + dy][x + dx], flipped[r][s] = in[r][w-1-s]. */
        for (int yy = 0; yy < h; yy++) {
            int sy = source_index(yy + dy, h, p->padding);
            for (int xx = 0; xx < w; xx++) {
                int sx = source_index(xx + dx, w, p->padding);
                if (sx >= 0 && flip)
                    sx = w - 1 - sx;
                for (int ch = 0; ch < c; ch++)
                    img[ch * plane + (size_t)yy * w + xx] =
                        sy < 0 || sx < 0 ? 0.0f : scratch[ch * plane + (size_t)sy * w + sx];
            }
        }
    }
}

/* ---- batch_loader ---- */

static void *loader_main(void *arg)
{
    batch_loader *bl = arg;
    pthread_mutex_lock(&bl->mu);
    for (;;) {
        while (!bl->stop && bl->state[bl->fill] != LOADER_FREE)
            pthread_cond_wait(&bl->cv, &bl->mu);
        if (bl->stop)
            break;
        int b = bl->fill;
        pthread_mutex_unlock(&bl->mu);
        /* Buffer b is the worker's until it is marked full; the caller
         * released it only once its upload had finished. */
        int n = sampler_next(bl->smp, bl->data, bl->x[b], bl->y[b]);
        if (bl->augment)
            augment_batch(&bl->aug, bl->key, augment_counter(bl->step, bl->smp->batch), bl->x[b], n,
                          bl->data->c, bl->data->h, bl->data->w, bl->scratch);
        bl->step++;
        pthread_mutex_lock(&bl->mu);
        bl->n[b] = n;
        bl->pass[b] = bl->smp->pass;
        bl->pos[b] = bl->smp->pos;
        bl->draws[b] = bl->smp->draws;
        bl->state[b] = LOADER_FULL;
        bl->fill = (b + 1) % LOADER_BUFFERS;
        pthread_cond_broadcast(&bl->cv);
    }
    pthread_mutex_unlock(&bl->mu);
    return NULL;
}

static void *host_buffer(const batch_loader *bl, size_t bytes)
{
    return bl->pinned ? backend_host_alloc(bl->pinned, bytes) : malloc(bytes);
}

static void host_buffer_free(const batch_loader *bl, void *p)
{
    if (bl->pinned)
        backend_host_free(bl->pinned, p);
    else
        free(p);
}

int batch_loader_start(batch_loader *bl, backend_ctx *pinned, sampler *s, const dataset *d,
                       const augment_params *aug, philox_key key, uint64_t first_step, char *err,
                       size_t errlen)
{
    memset(bl, 0, sizeof *bl);
    if (aug && aug->padding == AUGMENT_PAD_REFLECT && (aug->pad >= d->h || aug->pad >= d->w)) {
        snprintf(err, errlen, "augment: a reflect padding of %d needs images larger than %dx%d",
                 aug->pad, d->h, d->w);
        return -1;
    }
    bl->smp = s;
    bl->data = d;
    bl->augment = aug != NULL;
    if (aug)
        bl->aug = *aug;
    bl->key = key;
    bl->step = first_step;
    bl->out_pass = s->pass;
    bl->out_pos = s->pos;
    bl->out_draws = s->draws;
    size_t ex = dataset_example_size(d);
    bl->scratch = malloc(ex * sizeof(float));
    bl->pinned = pinned;
    int ok = bl->scratch != NULL;
    for (int b = 0; b < LOADER_BUFFERS; b++) {
        bl->x[b] = host_buffer(bl, (size_t)s->batch * ex * sizeof(float));
        bl->y[b] = host_buffer(bl, (size_t)s->batch * sizeof(int32_t));
        ok = ok && bl->x[b] && bl->y[b];
    }
    if (!ok) {
        snprintf(err, errlen, "batch loader: out of memory for %d batches of %d", LOADER_BUFFERS,
                 s->batch);
        batch_loader_stop(bl);
        return -1;
    }
    pthread_mutex_init(&bl->mu, NULL);
    pthread_cond_init(&bl->cv, NULL);
    if (pthread_create(&bl->thread, NULL, loader_main, bl) != 0) {
        snprintf(err, errlen, "batch loader: cannot start its thread");
        pthread_mutex_destroy(&bl->mu);
        pthread_cond_destroy(&bl->cv);
        batch_loader_stop(bl);
        return -1;
    }
    bl->started = 1;
    return 0;
}

static int held(const batch_loader *bl)
{
    int count = 0;
    for (int b = 0; b < LOADER_BUFFERS; b++)
        count += bl->state[b] == LOADER_HELD;
    return count;
}

int batch_loader_take(batch_loader *bl, loader_batch *out)
{
    pthread_mutex_lock(&bl->mu);
    if (held(bl) >= LOADER_HELD_MAX) {
        pthread_mutex_unlock(&bl->mu);
        return -1;
    }
    while (bl->state[bl->take] != LOADER_FULL)
        pthread_cond_wait(&bl->cv, &bl->mu);
    int b = bl->take;
    bl->state[b] = LOADER_HELD;
    bl->take = (b + 1) % LOADER_BUFFERS;
    pthread_mutex_unlock(&bl->mu);
    *out = (loader_batch){.x = bl->x[b], .y = bl->y[b], .n = bl->n[b], .buf = b};
    return 0;
}

int batch_loader_release(batch_loader *bl, const loader_batch *batch)
{
    int b = batch->buf, rc = -1;
    pthread_mutex_lock(&bl->mu);
    if (b == bl->release && bl->state[b] == LOADER_HELD) {
        bl->state[b] = LOADER_FREE;
        bl->release = (b + 1) % LOADER_BUFFERS;
        bl->out_pass = bl->pass[b];
        bl->out_pos = bl->pos[b];
        bl->out_draws = bl->draws[b];
        pthread_cond_broadcast(&bl->cv);
        rc = 0;
    }
    pthread_mutex_unlock(&bl->mu);
    return rc;
}

void batch_loader_position(const batch_loader *bl, long *pass, int *pos, uint64_t *draws)
{
    *pass = bl->out_pass;
    *pos = bl->out_pos;
    *draws = bl->out_draws;
}

void batch_loader_stop(batch_loader *bl)
{
    if (bl->started) {
        pthread_mutex_lock(&bl->mu);
        bl->stop = 1;
        pthread_cond_broadcast(&bl->cv);
        pthread_mutex_unlock(&bl->mu);
        pthread_join(bl->thread, NULL);
        pthread_mutex_destroy(&bl->mu);
        pthread_cond_destroy(&bl->cv);
    }
    for (int b = 0; b < LOADER_BUFFERS; b++) {
        host_buffer_free(bl, bl->x[b]);
        host_buffer_free(bl, bl->y[b]);
    }
    free(bl->scratch);
    memset(bl, 0, sizeof *bl);
}
