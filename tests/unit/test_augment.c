/* Augmentation against a direct reference (an explicitly padded, flipped
 * image), zero vs reflect borders, determinism; the prefetching loader gives
 * exactly the sampler's batches (then augmented), resumes from its reported
 * position, and stops cleanly mid-stream. Runs under ThreadSanitizer. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "augment.h"
#include "testutil.h"

/* The documented draws of example i: lane 0 bit 0 flips; lanes 1 and 2 give
 * the row and column offsets, floor(bits (2 pad + 1) / 2^32) - pad. */
static void draws(const augment_params *p, philox_key key, uint64_t counter, int *flip, int *dy,
                  int *dx)
{
    philox_out o = philox4x32(key, counter);
    uint64_t span = (uint64_t)(2 * p->pad + 1);
    *flip = p->flip && (o.v[0] & 1);
    *dy = (int)(((uint64_t)o.v[1] * span) >> 32) - p->pad;
    *dx = (int)(((uint64_t)o.v[2] * span) >> 32) - p->pad;
}

/* One image: flip it, pad it into a (h + 2 pad) x (w + 2 pad) array, and cut
 * the h x w window at (pad + dy, pad + dx). */
static void reference(const augment_params *p, const float *in, float *out, int c, int h, int w,
                      int flip, int dy, int dx)
{
    int ph = h + 2 * p->pad, pw = w + 2 * p->pad;
    float *padded = malloc((size_t)c * ph * pw * sizeof(float));
    for (int ch = 0; ch < c; ch++)
        for (int y = 0; y < ph; y++)
            for (int x = 0; x < pw; x++) {
                int sy = y - p->pad, sx = x - p->pad, inside = 1;
                if (p->padding == AUGMENT_PAD_REFLECT) {
                    if (sy < 0)
                        sy = -sy;
                    if (sy >= h)
                        sy = 2 * h - 2 - sy;
                    if (sx < 0)
                        sx = -sx;
                    if (sx >= w)
                        sx = 2 * w - 2 - sx;
                } else {
                    inside = sy >= 0 && sy < h && sx >= 0 && sx < w;
                }
                int col = flip ? w - 1 - sx : sx;
                padded[((size_t)ch * ph + y) * pw + x] =
                    inside ? in[((size_t)ch * h + sy) * w + col] : 0.0f;
            }
    for (int ch = 0; ch < c; ch++)
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                out[((size_t)ch * h + y) * w + x] =
                    padded[((size_t)ch * ph + y + p->pad + dy) * pw + x + p->pad + dx];
    free(padded);
}

static philox_key random_key(void)
{
    return philox_make_key((uint64_t)test_uniform(0, 1e15), (uint32_t)test_uniform(0, 8),
                           RNG_STREAM_DATA);
}

static void test_against_reference(void)
{
    int n = 64, c = 3, h = 7, w = 6;
    size_t ex = (size_t)c * h * w;
    float *x = malloc(n * ex * sizeof(float)), *orig = malloc(n * ex * sizeof(float));
    float *want = malloc(ex * sizeof(float)), *scratch = malloc(ex * sizeof(float));
    augment_params cases[] = {{1, 2, AUGMENT_PAD_ZERO}, {1, 3, AUGMENT_PAD_REFLECT},
                              {0, 2, AUGMENT_PAD_REFLECT}, {1, 0, AUGMENT_PAD_ZERO}};
    for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
        const augment_params *p = &cases[t];
        philox_key key = random_key();
        uint64_t counter = augment_counter((uint64_t)test_uniform(0, 1e6), n);
        test_fill_uniform(orig, n * ex, -1, 2);
        memcpy(x, orig, n * ex * sizeof(float));
        augment_batch(p, key, counter, x, n, c, h, w, scratch);
        int flips = 0, seen[16] = {0}, bad = 0;
        for (int i = 0; i < n; i++) {
            int flip, dy, dx;
            draws(p, key, counter + (uint64_t)i, &flip, &dy, &dx);
            flips += flip;
            seen[dy + p->pad]++;
            reference(p, orig + i * ex, want, c, h, w, flip, dy, dx);
            bad += memcmp(want, x + i * ex, ex * sizeof(float)) != 0;
        }
        CHECK(bad == 0, "case %zu (flip %d, pad %d, %s): %d of %d examples differ from the reference",
              t, p->flip, p->pad, p->padding ? "reflect" : "zero", bad, n);
        CHECK(p->flip ? flips > n / 5 && flips < n - n / 5 : flips == 0, "case %zu: %d flips of %d", t,
              flips, n);
        for (int o = 0; o <= 2 * p->pad; o++)
            CHECK(seen[o] > 0, "case %zu: row offset %d never drawn in %d", t, o - p->pad, n);
    }
    free(x);
    free(orig);
    free(want);
    free(scratch);
}

/* A counter whose draw is (no flip, dy, dx). */
static uint64_t find_counter(const augment_params *p, philox_key key, int want_dy, int want_dx)
{
    for (uint64_t ctr = AUGMENT_COUNTER_BASE;; ctr++) {
        int flip, dy, dx;
        draws(p, key, ctr, &flip, &dy, &dx);
        if (!flip && dy == want_dy && dx == want_dx)
            return ctr;
    }
}

/* A 4x4 ramp moved down-right by 2: zeros come in at the top and left, or
 * the image's mirror (without repeating its edge). */
static void test_borders(void)
{
    float in[16], x[16], scratch[16];
    for (int i = 0; i < 16; i++)
        in[i] = (float)(i + 1);
    philox_key key = random_key();
    augment_params zero = {1, 2, AUGMENT_PAD_ZERO}, reflect = {1, 2, AUGMENT_PAD_REFLECT};
    uint64_t ctr = find_counter(&zero, key, -2, -2);
    memcpy(x, in, sizeof x);
    augment_batch(&zero, key, ctr, x, 1, 1, 4, 4, scratch);
    /* out[y][x] = in[y-2][x-2] */
    const float want_zero[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2, 0, 0, 5, 6};
    CHECK(memcmp(x, want_zero, sizeof x) == 0, "zero padding: row 2 is %g %g %g %g", x[8], x[9],
          x[10], x[11]);
    memcpy(x, in, sizeof x);
    augment_batch(&reflect, key, ctr, x, 1, 1, 4, 4, scratch);
    /* rows and columns -2, -1, 0, 1 read 2, 1, 0, 1 */
    const float want_reflect[16] = {11, 10, 9, 10, 7, 6, 5, 6, 3, 2, 1, 2, 7, 6, 5, 6};
    CHECK(memcmp(x, want_reflect, sizeof x) == 0, "reflect padding: row 0 is %g %g %g %g", x[0],
          x[1], x[2], x[3]);
    /* The other way: rows and columns 2, 3, 4, 5 read 2, 3, 2, 1. */
    ctr = find_counter(&reflect, key, 2, 2);
    memcpy(x, in, sizeof x);
    augment_batch(&reflect, key, ctr, x, 1, 1, 4, 4, scratch);
    const float want_up[16] = {11, 12, 11, 10, 15, 16, 15, 14, 11, 12, 11, 10, 7, 8, 7, 6};
    CHECK(memcmp(x, want_up, sizeof x) == 0, "reflect padding, moved up-left: row 3 is %g %g %g %g",
          x[12], x[13], x[14], x[15]);
}

/* Same key and counter, same result; example i at counter k is example 0 at
 * counter k + i (the draw index alone decides); another counter differs. */
static void test_determinism(void)
{
    int n = 16, c = 2, h = 8, w = 8;
    size_t ex = (size_t)c * h * w;
    float *orig = malloc(n * ex * sizeof(float)), *a = malloc(n * ex * sizeof(float));
    float *b = malloc(n * ex * sizeof(float)), *scratch = malloc(ex * sizeof(float));
    test_fill_uniform(orig, n * ex, 0, 1);
    philox_key key = random_key();
    uint64_t ctr = augment_counter((uint64_t)test_uniform(0, 1e9), n);
    memcpy(a, orig, n * ex * sizeof(float));
    memcpy(b, orig, n * ex * sizeof(float));
    augment_batch(&augment_cifar, key, ctr, a, n, c, h, w, scratch);
    augment_batch(&augment_cifar, key, ctr, b, n, c, h, w, scratch);
    CHECK(memcmp(a, b, n * ex * sizeof(float)) == 0, "same key and counter, same batch");
    int split = 1 + (int)test_uniform(0, n - 1);
    memcpy(b, orig, n * ex * sizeof(float));
    augment_batch(&augment_cifar, key, ctr, b, split, c, h, w, scratch);
    augment_batch(&augment_cifar, key, ctr + (uint64_t)split, b + split * ex, n - split, c, h, w,
                  scratch);
    CHECK(memcmp(a, b, n * ex * sizeof(float)) == 0, "a batch split at %d augments alike", split);
    memcpy(b, orig, n * ex * sizeof(float));
    augment_batch(&augment_cifar, key, ctr + (uint64_t)n, b, n, c, h, w, scratch);
    CHECK(memcmp(a, b, n * ex * sizeof(float)) != 0, "the next counters give other draws");
    free(orig);
    free(a);
    free(b);
    free(scratch);
}

/* ---- the loader ---- */

static dataset make_data(int n, int c, int h, int w)
{
    dataset d = {.n = n, .c = c, .h = h, .w = w, .classes = 10};
    d.images = malloc((size_t)n * c * h * w * sizeof(float));
    d.labels = malloc((size_t)n * sizeof(int32_t));
    test_fill_uniform(d.images, (size_t)n * c * h * w, 0, 1);
    for (int i = 0; i < n; i++)
        d.labels[i] = i; /* identifies the example */
    return d;
}

static void short_pause(void)
{
    struct timespec ts = {0, (long)test_uniform(0, 2e6)};
    nanosleep(&ts, NULL);
}

/* `steps` batches from a loader against sampler_next + augment_batch on a
 * twin sampler, positions included; from first_step on after `skip` batches. */
static void check_sequence(const char *sampling, const augment_params *aug, int steps)
{
    job_config cfg;
    job_config_defaults(&cfg);
    strcpy(cfg.data.sampling, sampling);
    cfg.optim.batch = 5 + (int)test_uniform(0, 12);
    cfg.seed = (uint64_t)test_uniform(0, 1e12);
    dataset d = make_data(40 + (int)test_uniform(0, 40), 3, 6, 6);
    size_t ex = dataset_example_size(&d);
    int rank = (int)test_uniform(0, 3);
    sampler direct, loaded;
    sampler_init(&direct, &cfg, d.n, rank, 3);
    sampler_init(&loaded, &cfg, d.n, rank, 3);
    philox_key key = philox_make_key(cfg.seed, (uint32_t)rank, RNG_STREAM_DATA);
    float *want_x = malloc((size_t)cfg.optim.batch * ex * sizeof(float));
    int32_t *want_y = malloc((size_t)cfg.optim.batch * sizeof(int32_t));
    float *scratch = malloc(ex * sizeof(float));
    batch_loader bl;
    char err[256];
    int rc = batch_loader_start(&bl, NULL, &loaded, &d, aug, key, 0, err, sizeof err);
    CHECK(rc == 0, "start: %s", err);
    /* As the runner uses it: a step trains on `cur` while `next` is staged,
     * so the caller holds two batches and the worker fills the third. Each
     * is copied when taken and must be unchanged when released. */
    const size_t xbytes = (size_t)cfg.optim.batch * ex * sizeof(float);
    float *copy_next = malloc(xbytes), *copy_cur = malloc(xbytes);
    loader_batch next = {0}, cur;
    if (rc == 0) {
        rc = batch_loader_take(&bl, &next);
        memcpy(copy_next, next.x, (size_t)next.n * ex * sizeof(float));
    }
    int bad = 0, bad_pos = 0, bad_order = 0;
    for (int t = 0; rc == 0 && t < steps; t++) {
        int want_n = sampler_next(&direct, &d, want_x, want_y);
        if (aug)
            augment_batch(aug, key, augment_counter((uint64_t)t, cfg.optim.batch), want_x, want_n,
                          d.c, d.h, d.w, scratch);
        cur = next;
        memcpy(copy_cur, copy_next, xbytes);
        bad_order += batch_loader_take(&bl, &next) != 0;
        memcpy(copy_next, next.x, (size_t)next.n * ex * sizeof(float));
        loader_batch extra;
        bad_order += batch_loader_take(&bl, &extra) != -1; /* a third: refused */
        bad_order += batch_loader_release(&bl, &next) != -1; /* out of order: refused */
        bad_order += cur.buf == next.buf;
        if (t % 3 == 0) /* compute for a while: the worker fills the third buffer, then waits */
            short_pause();
        const int n = cur.n;
        bad += n != want_n || memcmp(cur.y, want_y, (size_t)n * sizeof(int32_t)) != 0 ||
               memcmp(cur.x, want_x, (size_t)n * ex * sizeof(float)) != 0 ||
               memcmp(cur.x, copy_cur, (size_t)n * ex * sizeof(float)) != 0 ||
               memcmp(next.x, copy_next, (size_t)next.n * ex * sizeof(float)) != 0;
        long pass;
        int pos;
        uint64_t drawn;
        batch_loader_position(&bl, &pass, &pos, &drawn);
        bad_pos += t > 0 && (pass == direct.pass && pos == direct.pos && drawn == direct.draws);
        bad_order += batch_loader_release(&bl, &cur) != 0;
        batch_loader_position(&bl, &pass, &pos, &drawn);
        bad_pos += pass != direct.pass || pos != direct.pos || drawn != direct.draws;
    }
    free(copy_next);
    free(copy_cur);
    CHECK(bad == 0, "%s%s: %d of %d loader batches differ from sampler_next%s (or changed "
          "while held)", sampling, aug ? " + augment" : "", bad, steps,
          aug ? " + augment_batch" : "");
    CHECK(bad_pos == 0, "%s: %d of %d positions differ from the sampler's after the release "
          "(or moved before it)", sampling, bad_pos, steps);
    CHECK(bad_order == 0, "%s: %d refusals missing or takes/releases failing", sampling,
          bad_order);

    /* Resume: a fresh sampler restored to the reported position, and a loader
     * from that step, go on exactly as the first, from the batch it holds
     * without having released it. */
    long pass;
    int pos;
    uint64_t drawn;
    batch_loader_position(&bl, &pass, &pos, &drawn);
    sampler resumed;
    sampler_init(&resumed, &cfg, d.n, rank, 3);
    sampler_restore(&resumed, pass, pos, drawn);
    batch_loader bl2;
    rc = batch_loader_start(&bl2, NULL, &resumed, &d, aug, key, (uint64_t)steps, err, sizeof err);
    CHECK(rc == 0, "restart: %s", err);
    bad = 0;
    for (int t = 0; rc == 0 && t < 2 * (d.n / cfg.optim.batch + 1); t++) {
        loader_batch b1 = next, b2;
        batch_loader_take(&bl, &next);
        batch_loader_take(&bl2, &b2);
        bad += b1.n != b2.n || memcmp(b1.y, b2.y, (size_t)b1.n * sizeof(int32_t)) != 0 ||
               memcmp(b1.x, b2.x, (size_t)b1.n * ex * sizeof(float)) != 0;
        batch_loader_release(&bl, &b1);
        batch_loader_release(&bl2, &b2);
    }
    CHECK(bad == 0, "%s: a resumed loader differs in %d batches", sampling, bad);
    batch_loader_stop(&bl);
    batch_loader_stop(&bl2);
    sampler_free(&direct);
    sampler_free(&loaded);
    sampler_free(&resumed);
    dataset_free(&d);
    free(want_x);
    free(want_y);
    free(scratch);
}

/* Stops at any point: before a batch is taken, while one or two are held,
 * while the worker waits on full buffers; and on a loader never started. */
static void test_stop(void)
{
    job_config cfg;
    job_config_defaults(&cfg);
    cfg.optim.batch = 8;
    dataset d = make_data(64, 3, 8, 8);
    char err[256];
    for (int taken = 0; taken < 4; taken++) {
        sampler s;
        sampler_init(&s, &cfg, d.n, 0, 1);
        batch_loader bl;
        int rc = batch_loader_start(&bl, NULL, &s, &d, &augment_cifar, s.key, 0, err, sizeof err);
        CHECK(rc == 0, "start: %s", err);
        loader_batch held[4];
        for (int t = 0; rc == 0 && t < taken; t++) {
            if (t >= LOADER_HELD_MAX)
                CHECK(batch_loader_release(&bl, &held[t - LOADER_HELD_MAX]) == 0, "release");
            CHECK(batch_loader_take(&bl, &held[t]) == 0 && held[t].n == 8, "batch of %d",
                  held[t].n);
        }
        if (taken & 1)
            short_pause();
        batch_loader_stop(&bl);
        CHECK(bl.x[0] == NULL && !bl.started, "stop frees and resets the loader");
        sampler_free(&s);
    }
    batch_loader idle;
    memset(&idle, 0, sizeof idle);
    batch_loader_stop(&idle);
    sampler s;
    sampler_init(&s, &cfg, d.n, 0, 1);
    augment_params too_wide = {1, 8, AUGMENT_PAD_REFLECT};
    CHECK(batch_loader_start(&idle, NULL, &s, &d, &too_wide, s.key, 0, err, sizeof err) == -1 &&
          strstr(err, "reflect padding of 8"), "reflect padding as wide as the image: %s", err);
    batch_loader_stop(&idle);
    sampler_free(&s);
    dataset_free(&d);
}

int main(void)
{
    test_init("augment");
    test_against_reference();
    test_borders();
    test_determinism();
    check_sequence("shuffle", &augment_cifar, 40);
    check_sequence("replacement", &augment_cifar, 25);
    check_sequence("shuffle", NULL, 20);
    augment_params zero_crop = {1, 2, AUGMENT_PAD_ZERO};
    check_sequence("shuffle", &zero_crop, 15);
    test_stop();
    return test_main_end();
}
