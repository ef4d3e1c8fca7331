/* A sweep's reading and expansion (daemon/sweep/sweep_file.c): the grid in
 * row-major order, seeds, a random subset drawn by its own seed, the bounds,
 * and errors that name the key or the point. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cjson/cJSON.h>

#include "sweep_file.h"
#include "testutil.h"

#define BASE "\"base\": {\"model\": {\"arch\": \"mlp\"}, \"data\": {\"dataset\": \"synthetic\"}, " \
             "\"algorithm\": {\"name\": \"sgd\"}, \"epochs\": 2, \"seed\": 7}"

static double job_num(const cJSON *job, const char *section, const char *key)
{
    const cJSON *o = section ? cJSON_GetObjectItemCaseSensitive(job, section) : job;
    return cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, key));
}

/* Read and every job checked: 0 and the spec, or -1 with the message in err. */
static int read_text(const char *text, cJSON **root, sweep_spec *s, char *err, size_t errlen)
{
    *root = cJSON_Parse(text);
    CHECK(*root != NULL, "not JSON: %s", text);
    int rc = *root ? sweep_spec_read(*root, s, err, errlen) : -1;
    if (rc == 0 && sweep_spec_check(s, err, errlen) != 0) {
        sweep_spec_free(s);
        rc = -1;
    }
    return rc;
}

/* {BASE, "samples": S, "grid": {"optim.lr": [n1 values], "optim.batch": [n2 values]}}; with
 * `same`, every value of a list is 0. malloc'd. */
static char *two_key_sweep(int n1, int n2, int samples, int same)
{
    size_t cap = 64 + 12 * ((size_t)n1 + (size_t)n2) + 256;
    char *t = malloc(cap);
    if (!t)
        return NULL;
    int n = snprintf(t, cap, "{" BASE ", \"samples\": %d, \"grid\": {\"optim.lr\": [", samples);
    for (int v = 1; v <= n1; v++)
        n += snprintf(t + n, cap - (size_t)n, "%s%d", v > 1 ? "," : "", same ? 0 : -v);
    n += snprintf(t + n, cap - (size_t)n, "], \"optim.batch\": [");
    for (int v = 1; v <= n2; v++)
        n += snprintf(t + n, cap - (size_t)n, "%s%d", v > 1 ? "," : "", same ? 0 : v);
    snprintf(t + n, cap - (size_t)n, "]}}");
    return t;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* Reading decides the cheap bounds before it builds any job, so that parled
 * can refuse a sweep past a bound (its own per-user one included) at once:
 * a grid past a million points is refused from its lists' lengths alone
 * (their values, all repeats here, are never looked at), and a million
 * points of invalid jobs read without a job built; the check then finds
 * them. */
static void test_cheap_bounds(void)
{
    char err[8192];
    sweep_spec s;
    char *text = two_key_sweep(1001, 1000, 10, 1);
    cJSON *root = text ? cJSON_Parse(text) : NULL;
    int rc = root ? sweep_spec_read(root, &s, err, sizeof err) : 0;
    CHECK(rc == -1 && strcmp(err, "grid: more than 1000000 points") == 0,
          "a 1001 x 1000 grid: rc %d, \"%s\"", rc, err);
    cJSON_Delete(root);
    free(text);

    text = two_key_sweep(1000, 1000, 1000, 0);
    root = text ? cJSON_Parse(text) : NULL;
    double t0 = now_s();
    rc = root ? sweep_spec_read(root, &s, err, sizeof err) : -1;
    double took = now_s() - t0;
    CHECK(rc == 0 && s.grid == 1000000 && s.npoints == 1000 && s.seeds == 1,
          "a 10^6-point grid of invalid jobs, 1000 drawn, was not read without building them: "
          "rc %d, %s", rc, rc ? err : "");
    printf("sweep_file: read a 10^6-point grid (1000 drawn) in %.1f ms\n", took * 1e3);
    if (rc == 0) {
        CHECK(sweep_spec_check(&s, err, sizeof err) == -1 && strstr(err, "optim.lr: must be > 0") &&
                  strstr(err, "and 997 more points fail"),
              "the check: %s", err);
        sweep_spec_free(&s);
    }
    cJSON_Delete(root);
    free(text);
}

static void test_grid_and_seeds(void)
{
    cJSON *root;
    sweep_spec s;
    char err[8192];
    int rc = read_text("{\"name\": \"lr\", " BASE ", \"seeds\": 3, \"grid\": {\"optim.lr\": [0.1, "
                       "0.05], \"algorithm.replicas\": [1, 1.0e0, 1]}}", &root, &s, err, sizeof err);
    /* 1.0e0 and 1 are the same value: refused as a repeat. */
    CHECK(rc == -1 && strstr(err, "grid.\"algorithm.replicas\": value 2 repeats value 1"), "%s", err);
    cJSON_Delete(root);

    rc = read_text("{\"name\": \"lr\", " BASE ", \"seeds\": 3, \"grid\": {\"optim.lr\": [0.1, 0.05], "
                   "\"optim.batch\": [16, 32, 64]}}", &root, &s, err, sizeof err);
    CHECK(rc == 0, "%s", err);
    if (rc == 0) {
        CHECK(s.grid == 6 && s.npoints == 6 && s.seeds == 3 && s.nkeys == 2, "grid %ld points %d",
              s.grid, s.npoints);
        const double lr[6] = {0.1, 0.1, 0.1, 0.05, 0.05, 0.05}, batch[6] = {16, 32, 64, 16, 32, 64};
        for (int p = 0; p < s.npoints; p++)
            for (int k = 0; k < s.seeds; k++) {
                cJSON *job = sweep_job(&s, s.points[p], k, err, sizeof err);
                CHECK(job != NULL, "point %d seed %d: %s", p, k, err);
                if (!job)
                    continue;
                CHECK(s.points[p] == p, "point %d is grid index %ld", p, s.points[p]);
                CHECK(job_num(job, "optim", "lr") == lr[p], "point %d lr", p);
                CHECK(job_num(job, "optim", "batch") == batch[p], "point %d batch", p);
                CHECK(job_num(job, NULL, "seed") == 7 + k, "point %d seed %d: %g", p, k,
                      job_num(job, NULL, "seed"));
                char want[64];
                snprintf(want, sizeof want, "lr p%d s%d", p, k);
                const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(job, "name"));
                CHECK(name && strcmp(name, want) == 0, "name %s, want %s", name ? name : "-", want);
                /* The base's other fields are kept. */
                CHECK(job_num(job, NULL, "epochs") == 2, "epochs");
                cJSON_Delete(job);
            }
        char label[256];
        CHECK(strcmp(sweep_point_label(&s, 4, label, sizeof label), "optim.lr=0.05, optim.batch=32") == 0,
              "label %s", label);
        sweep_spec_free(&s);
    }
    cJSON_Delete(root);

    /* No grid: one point, seeds alone; the seed from the validator's default. */
    rc = read_text("{\"base\": {\"model\": {\"arch\": \"mlp\"}, \"data\": {\"dataset\": \"synthetic\"}, "
                   "\"algorithm\": {\"name\": \"sgd\"}}, \"grid\": {}, \"seeds\": 2}",
                   &root, &s, err, sizeof err);
    CHECK(rc == 0 && s.npoints == 1 && s.grid == 1, "%s", err);
    if (rc == 0) {
        cJSON *job = sweep_job(&s, 0, 1, err, sizeof err);
        CHECK(job && job_num(job, NULL, "seed") == 43, "default seed 42 + 1");
        CHECK(strcmp(s.name, "sweep") == 0, "default name %s", s.name);
        cJSON_Delete(job);
        sweep_spec_free(&s);
    }
    cJSON_Delete(root);
}

/* The grid indices drawn for `samples` of a 10 x 10 grid with `seed`. */
static int draw(int samples, int seed, long *out)
{
    char text[1024];
    snprintf(text, sizeof text, "{" BASE ", \"grid\": {\"optim.lr\": [1,2,3,4,5,6,7,8,9,10], "
             "\"optim.momentum\": [0,0.1,0.2,0.3,0.4,0.5,0.6,0.7,0.8,0.9]}, \"samples\": %d, "
             "\"sample_seed\": %d}", samples, seed);
    cJSON *root;
    sweep_spec s;
    char err[8192];
    int rc = read_text(text, &root, &s, err, sizeof err);
    CHECK(rc == 0, "%s", err);
    int n = rc == 0 ? s.npoints : 0;
    if (rc == 0) {
        memcpy(out, s.points, (size_t)n * sizeof *out);
        sweep_spec_free(&s);
    }
    cJSON_Delete(root);
    return n;
}

static void test_samples(void)
{
    long a[100], b[100], c[100];
    int n = draw(7, 1, a);
    CHECK(n == 7, "7 samples, got %d", n);
    for (int i = 0; i < n; i++) {
        CHECK(a[i] >= 0 && a[i] < 100, "index %ld", a[i]);
        CHECK(i == 0 || a[i] > a[i - 1], "not ascending and distinct at %d", i);
    }
    CHECK(draw(7, 1, b) == 7 && memcmp(a, b, sizeof(long) * 7) == 0, "the same seed draws the same");
    CHECK(draw(7, 2, c) == 7 && memcmp(a, c, sizeof(long) * 7) != 0, "another seed draws others");
    n = draw(100, 5, a);
    for (int i = 0; i < n; i++)
        CHECK(a[i] == i, "all 100 samples are the whole grid (%d: %ld)", i, a[i]);
    /* Every point is drawn about as often: 2000 draws of 10, each ~200 times. */
    int count[100] = {0};
    for (int seed = 0; seed < 200; seed++) {
        n = draw(10, seed, a);
        for (int i = 0; i < n; i++)
            count[a[i]]++;
    }
    int lo = 1 << 30, hi = 0;
    for (int i = 0; i < 100; i++) {
        lo = count[i] < lo ? count[i] : lo;
        hi = count[i] > hi ? count[i] : hi;
    }
    CHECK(lo >= 2 && hi <= 45, "draw counts per point from %d to %d (expected ~20 each)", lo, hi);
}

/* A bad sweep: its message contains `want`. */
static void bad(const char *text, const char *want)
{
    cJSON *root;
    sweep_spec s;
    char err[8192];
    int rc = read_text(text, &root, &s, err, sizeof err);
    CHECK(rc == -1, "accepted: %s", text);
    CHECK(strstr(err, want) != NULL, "message \"%s\" lacks \"%s\"", err, want);
    if (rc == 0)
        sweep_spec_free(&s);
    cJSON_Delete(root);
}

static void test_errors(void)
{
    bad("{" BASE ", \"grid\": {\"optim.lr\": []}}", "grid.\"optim.lr\": must be a non-empty list");
    bad("{" BASE ", \"grid\": {\"optim.lr\": 0.1}}", "grid.\"optim.lr\": must be a non-empty list");
    bad("{" BASE ", \"grid\": {\"optim.lrr\": [0.1]}}", "grid.\"optim.lrr\": unknown key");
    bad("{" BASE ", \"grid\": {\"optimizer.lr\": [0.1]}}", "grid.\"optimizer.lr\": unknown key");
    bad("{" BASE ", \"grid\": {\"model.arch.x\": [1]}}", "grid.\"model.arch.x\": goes through a value");
    bad("{" BASE ", \"grid\": {\"optim..lr\": [1]}}", "grid.\"optim..lr\": not a dotted key");
    bad("{" BASE ", \"grid\": {\"optim\": [{}], \"optim.lr\": [1]}}",
        "grid.\"optim.lr\": overlaps grid.\"optim\"");
    bad("{" BASE ", \"grid\": {\"name\": [\"a\"]}}", "grid.\"name\": a sweep names its jobs");
    bad("{" BASE ", \"grid\": {\"optim.lr\": [0.1, -1]}}",
        "point 1 (optim.lr=-1): optim.lr: must be > 0");
    bad("{" BASE ", \"grid\": {}, \"seeds\": 0}", "seeds: must be an integer in 1..100");
    bad("{" BASE ", \"grid\": {}, \"samples\": 2}", "samples: 2 is more than the grid's 1 points");
    bad("{" BASE ", \"grid\": {}, \"sample_seed\": 2}", "sample_seed: only with samples");
    bad("{" BASE ", \"grid\": {}, \"seed\": 2}", "seed: unknown field");
    bad("{" BASE "}", "grid: missing");
    bad("{\"grid\": {}}", "base: missing");
    bad("{\"base\": \"job.json\", \"grid\": {}}", "base: must be the base job's object");
    bad("{" BASE ", \"grid\": {}, \"early_stop\": {\"after_epochs\": 1}}", "early_stop.margin: missing");
    bad("{" BASE ", \"grid\": {}, \"early_stop\": {\"after_epochs\": 2, \"margin\": 0.1}}",
        "early_stop.after_epochs: 2 is not before the last epoch of point 0 (epochs 2)");
    bad("{" BASE ", \"grid\": {}, \"early_stop\": {\"after\": 1, \"after_epochs\": 1, \"margin\": 0}}",
        "early_stop.after: unknown field");
    bad("{\"name\": \"a\\nb\", " BASE ", \"grid\": {}}", "name: byte 1 is a control character");
    /* 1001 jobs, and a grid past a million points. */
    bad("{" BASE ", \"seeds\": 91, \"grid\": {\"optim.lr\": [1,2,3,4,5,6,7,8,9,10,11]}}",
        "grid: 11 points x 91 seeds is 1001 jobs, more than the 1000");
    char *big = malloc(200000);
    int n = snprintf(big, 200000, "{" BASE ", \"samples\": 5, \"grid\": {");
    const char *keys[] = {"optim.lr", "optim.momentum", "optim.weight_decay"};
    for (int k = 0; k < 3; k++) {
        n += snprintf(big + n, 200000 - (size_t)n, "%s\"%s\": [", k ? ", " : "", keys[k]);
        for (int v = 1; v <= 101; v++)
            n += snprintf(big + n, 200000 - (size_t)n, "%s%g", v > 1 ? "," : "", v / 1000.0);
        n += snprintf(big + n, 200000 - (size_t)n, "]");
    }
    snprintf(big + n, 200000 - (size_t)n, "}}");
    bad(big, "grid: more than 1000000 points");
    free(big);
    /* Every problem at once. */
    bad("{" BASE ", \"grid\": {\"optim.lrr\": [1], \"optim.lr\": []}, \"seeds\": -1}",
        "seeds: must be an integer in 1..100; grid.\"optim.lrr\": unknown key: a job has no "
        "field optim.lrr (docs/config.md); grid.\"optim.lr\": must be a non-empty list of values");
}

int main(void)
{
    test_init("sweep_file");
    test_cheap_bounds();
    test_grid_and_seeds();
    test_samples();
    test_errors();
    return test_main_end();
}
