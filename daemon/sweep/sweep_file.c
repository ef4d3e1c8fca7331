/* A sweep object read, validated and expanded (sweep_file.h). */
#include "sweep_file.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jobfile.h"
#include "user_text.h"

#define MAX_BAD_POINTS 3   /* points whose errors are spelt out; the rest counted */
#define SEED_LIMIT 9007199254740992.0

/* Problems, each "field: why", joined by "; " as the job validator's. */
typedef struct report {
    char *buf;
    size_t len, used;
    int n;
} report;

static void add(report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void add(report *r, const char *fmt, ...)
{
    if (r->used + 1 >= r->len) {
        r->n++;
        return;
    }
    if (r->n++ > 0)
        r->used += (size_t)snprintf(r->buf + r->used, r->len - r->used, "; ");
    va_list ap;
    va_start(ap, fmt);
    if (r->used < r->len)
        r->used += (size_t)vsnprintf(r->buf + r->used, r->len - r->used, fmt, ap);
    va_end(ap);
    if (r->used >= r->len)
        r->used = r->len - 1;
}

/* An integer in [lo, hi] (a JSON number without a fraction). */
static int read_int(const cJSON *v, double lo, double hi, double *out)
{
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble != floor(v->valuedouble) ||
        v->valuedouble < lo || v->valuedouble > hi)
        return -1;
    *out = v->valuedouble;
    return 0;
}

/* Letters, digits and '_' between single dots: what job field paths are. */
static int dotted_key(const char *k)
{
    size_t n = strlen(k);
    if (n == 0 || n > SWEEP_KEY_MAX || k[0] == '.' || k[n - 1] == '.' || strstr(k, ".."))
        return 0;
    for (size_t i = 0; i < n; i++)
        if (!(k[i] == '.' || k[i] == '_' || (k[i] >= 'a' && k[i] <= 'z') ||
              (k[i] >= 'A' && k[i] <= 'Z') || (k[i] >= '0' && k[i] <= '9')))
            return 0;
    return 1;
}

/* `a` is `b` or a dotted prefix of it ("optim" of "optim.lr"). */
static int key_prefix(const char *a, const char *b)
{
    size_t n = strlen(a);
    return strncmp(a, b, n) == 0 && (b[n] == '\0' || b[n] == '.');
}

/* Set dotted `key` of obj to a copy of v, making objects on the way: 0;
 * -1 out of memory; -2 a part on the way is there and not an object. */
static int set_dotted(cJSON *obj, const char *key, const cJSON *v)
{
    char part[SWEEP_KEY_MAX + 1];
    for (const char *at = key;;) {
        const char *dot = strchr(at, '.');
        size_t n = dot ? (size_t)(dot - at) : strlen(at);
        memcpy(part, at, n);
        part[n] = '\0';
        cJSON *child = cJSON_GetObjectItemCaseSensitive(obj, part);
        if (!dot) {
            cJSON *copy = cJSON_Duplicate(v, 1);
            int ok = copy && (child ? cJSON_ReplaceItemInObjectCaseSensitive(obj, part, copy)
                                    : cJSON_AddItemToObject(obj, part, copy));
            if (!ok)
                cJSON_Delete(copy);
            return ok ? 0 : -1;
        }
        if (!child && !(child = cJSON_AddObjectToObject(obj, part)))
            return -1;
        if (!cJSON_IsObject(child))
            return -2;
        obj = child;
        at = dot + 1;
    }
}

const cJSON *sweep_value(const sweep_spec *s, long point, int key)
{
    long stride = 1;
    for (int i = s->nkeys - 1; i > key; i--)
        stride *= s->nvalues[i];
    return cJSON_GetArrayItem(s->values[key], (int)(point / stride % s->nvalues[key]));
}

const char *sweep_point_label(const sweep_spec *s, long point, char *out, size_t outlen)
{
    size_t used = 0;
    snprintf(out, outlen, "%s", s->nkeys ? "" : "the base job");
    for (int i = 0; i < s->nkeys && used < outlen; i++) {
        char *v = cJSON_PrintUnformatted(sweep_value(s, point, i));
        used += (size_t)snprintf(out + used, outlen - used, "%s%s=%.40s%s", i ? ", " : "",
                                 s->keys[i], v ? v : "?", v && strlen(v) > 40 ? "..." : "");
        free(v);
    }
    return out;
}

/* The job of (point, k) and its validated config in *cfg: NULL with err set
 * ("point P (label): ...") when invalid or out of memory. */
static cJSON *build_job(const sweep_spec *s, long point, int k, job_config *cfg, char *err,
                        size_t errlen)
{
    char label[512], why[8192], name[SWEEP_NAME_MAX + 32];
    snprintf(name, sizeof name, "%s p%ld s%d", s->name, point, k);
    cJSON *job = cJSON_Duplicate(s->base, 1);
    int rc = job && cJSON_IsObject(job) ? 0 : -1;
    for (int i = 0; i < s->nkeys && rc == 0; i++)
        rc = set_dotted(job, s->keys[i], sweep_value(s, point, i));
    cJSON *name_item = rc == 0 ? cJSON_CreateString(name) : NULL;
    if (rc == 0 && (!name_item || set_dotted(job, "name", name_item) != 0))
        rc = -1;
    cJSON_Delete(name_item);
    if (rc == 0)
        rc = job_config_from_json(job, cfg, why, sizeof why) == 0 ? 0 : -3;
    if (rc == 0 && k > 0) {
        cJSON *seed = cJSON_CreateNumber((double)cfg->seed + k);
        rc = seed && set_dotted(job, "seed", seed) == 0 ? 0 : -1;
        cJSON_Delete(seed);
        if (rc == 0)
            rc = job_config_from_json(job, cfg, why, sizeof why) == 0 ? 0 : -3;
    }
    if (rc == 0)
        return job;
    cJSON_Delete(job);
    char seed[32] = "";
    if (k > 0)
        snprintf(seed, sizeof seed, ", seed %d of %d", k + 1, s->seeds);
    if (rc == -3)
        snprintf(err, errlen, "point %ld (%s%s): %.4000s", point,
                 sweep_point_label(s, point, label, sizeof label), seed, why);
    else
        snprintf(err, errlen, "point %ld: out of memory", point);
    return NULL;
}

cJSON *sweep_job(const sweep_spec *s, long point, int k, char *err, size_t errlen)
{
    job_config cfg;
    cJSON *job = build_job(s, point, k, &cfg, err, errlen);
    if (job && s->early_after >= cfg.epochs) {
        snprintf(err, errlen, "early_stop.after_epochs: %d is not before the last epoch of point "
                 "%ld (epochs %d)", s->early_after, point, cfg.epochs);
        cJSON_Delete(job);
        job = NULL;
    }
    return job;
}

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, n), without modulo bias. */
static uint64_t below(uint64_t *x, uint64_t n)
{
    uint64_t limit = UINT64_MAX - UINT64_MAX % n, r;
    do
        r = splitmix64(x);
    while (r >= limit);
    return r % n;
}

static int by_index(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

/* The chosen points: the whole grid, or `samples` of it drawn without
 * replacement (Floyd's algorithm) from sample_seed, in grid order. */
static int choose_points(sweep_spec *s)
{
    long n = s->samples ? s->samples : s->grid;
    if (!(s->points = malloc((size_t)n * sizeof *s->points)))
        return -1;
    s->npoints = (int)n;
    if (!s->samples) {
        for (long i = 0; i < n; i++)
            s->points[i] = i;
        return 0;
    }
    uint64_t state = s->sample_seed;
    long have = 0;
    for (long j = s->grid - n; j < s->grid; j++) {
        long t = (long)below(&state, (uint64_t)j + 1);
        int taken = 0;
        for (long i = 0; i < have && !taken; i++)
            taken = s->points[i] == t;
        s->points[have++] = taken ? j : t;
    }
    qsort(s->points, (size_t)n, sizeof *s->points, by_index);
    return 0;
}

/* What is wrong with grid key i, or 0: 1 the key (or a part of it) is a
 * field the job validator calls unknown, probed with the base and the key's
 * first value; 2 a part on the way is a value in the base, not an object. */
static int key_problem(const sweep_spec *s, int i)
{
    char why[8192];
    job_config cfg;
    cJSON *job = cJSON_Duplicate(s->base, 1);
    int set = job ? set_dotted(job, s->keys[i], cJSON_GetArrayItem(s->values[i], 0)) : -1;
    int problem = set == -2 ? 2 : 0;
    if (set == 0 && job_config_from_json(job, &cfg, why, sizeof why) != 0)
        for (char *seg = why, *end; seg && !problem; seg = end ? end + 2 : NULL) {
            if ((end = strstr(seg, "; ")))
                *end = '\0';
            char *colon = strstr(seg, ": unknown field");
            if (colon && strcmp(colon, ": unknown field") == 0) {
                *colon = '\0';
                problem = key_prefix(seg, s->keys[i]);
            }
        }
    cJSON_Delete(job);
    return problem;
}

/* A grid value, sorted by type, then number or text, then place. */
typedef struct grid_value {
    const cJSON *v;
    char *text;    /* a string's, or any other non-number printed (malloc'd) */
    int index;
} grid_value;

static int by_value(const void *a, const void *b)
{
    const grid_value *x = a, *y = b;
    int tx = x->v->type & 0xff, ty = y->v->type & 0xff, c = 0;
    if (tx != ty)
        return tx < ty ? -1 : 1;
    if (cJSON_IsNumber(x->v))
        c = (x->v->valuedouble > y->v->valuedouble) - (x->v->valuedouble < y->v->valuedouble);
    else
        c = strcmp(x->text, y->text);
    return c ? c : (x->index > y->index) - (x->index < y->index);
}

/* Whether a value of `list` (n long) repeats another: 1 with both places,
 * 0 if none, -1 out of memory. Sorted, so n log n: a list may hold
 * SWEEP_MAX_VALUES. */
static int find_repeat(const cJSON *list, int n, int *later, int *earlier)
{
    grid_value *vals = calloc((size_t)n, sizeof *vals);
    int i = 0, rc = vals ? 0 : -1;
    const cJSON *v;
    cJSON_ArrayForEach(v, list) {
        if (rc != 0)
            break;
        vals[i] = (grid_value){.v = v, .index = i};
        if (cJSON_IsString(v))
            vals[i].text = strdup(v->valuestring);
        else if (!cJSON_IsNumber(v))
            vals[i].text = cJSON_PrintUnformatted(v);
        rc = cJSON_IsNumber(v) || vals[i].text ? 0 : -1;
        i++;
    }
    if (rc == 0)
        qsort(vals, (size_t)n, sizeof *vals, by_value);
    for (int a = 1; rc == 0 && a < n; a++)
        if (cJSON_Compare(vals[a - 1].v, vals[a].v, 1)) {
            *later = vals[a].index;
            *earlier = vals[a - 1].index;
            rc = 1;
        }
    for (int a = 0; vals && a < n; a++)
        free(vals[a].text);
    free(vals);
    return rc;
}

/* The bounds a grid's size alone decides, before any value is looked at:
 * points (the product of its lists' lengths) and, without "samples", jobs
 * (points x seeds). 0, or -1 with the problem added. */
static int check_grid_size(const sweep_spec *s, const cJSON *grid, report *r)
{
    const cJSON *it;
    double points = 1;
    cJSON_ArrayForEach(it, grid)
        if (cJSON_IsArray(it) && cJSON_GetArraySize(it) > 0 && points <= SWEEP_MAX_GRID)
            points *= cJSON_GetArraySize(it);
    if (points > SWEEP_MAX_GRID) {
        add(r, "grid: more than %ld points", SWEEP_MAX_GRID);
        return -1;
    }
    if (!s->samples && points * s->seeds > SWEEP_MAX_JOBS) {
        add(r, "grid: %.0f points x %d seeds is %.0f jobs, more than the %d a sweep may queue "
            "(draw a subset with \"samples\")", points, s->seeds, points * s->seeds,
            SWEEP_MAX_JOBS);
        return -1;
    }
    return 0;
}

/* The "grid" object: keys, their value lists, the grid's size. */
static void read_grid(sweep_spec *s, const cJSON *grid, report *r)
{
    const cJSON *it;
    s->grid = 1;
    if (check_grid_size(s, grid, r) != 0)
        return;
    cJSON_ArrayForEach(it, grid) {
        char shown[48];
        const char *k = it->string;
        user_text_shown(k, shown);
        if (!dotted_key(k)) {
            add(r, "grid.\"%s\": not a dotted key (letters, digits and '_' between dots, at "
                "most %d bytes)", shown, SWEEP_KEY_MAX);
            continue;
        }
        int clash = -1;
        for (int i = 0; i < s->nkeys && clash < 0; i++)
            if (sweep_keys_overlap(s->keys[i], strlen(s->keys[i]), k, strlen(k)))
                clash = i;
        if (clash >= 0) {
            add(r, strcmp(s->keys[clash], k) ? "grid.\"%s\": overlaps grid.\"%s\""
                                             : "grid.\"%s\": given twice%.0s", k, s->keys[clash]);
            continue;
        }
        if (strcmp(k, "name") == 0) {
            add(r, "grid.\"name\": a sweep names its jobs itself (\"<name> p<point> s<seed>\")");
            continue;
        }
        int n = cJSON_GetArraySize(it);
        if (!cJSON_IsArray(it) || n == 0) {
            add(r, "grid.\"%s\": must be a non-empty list of values", k);
            continue;
        }
        if (n > SWEEP_MAX_VALUES) {
            add(r, "grid.\"%s\": %d values, more than %d", k, n, SWEEP_MAX_VALUES);
            continue;
        }
        int later = 0, earlier = 0, rep = find_repeat(it, n, &later, &earlier);
        if (rep != 0) {
            if (rep < 0)
                add(r, "out of memory");
            else
                add(r, "grid.\"%s\": value %d repeats value %d", k, later + 1, earlier + 1);
        }
        if (s->nkeys == SWEEP_MAX_KEYS) {
            add(r, "grid: more than %d keys", SWEEP_MAX_KEYS);
            return;
        }
        s->keys[s->nkeys] = k;
        s->values[s->nkeys] = it;
        s->nvalues[s->nkeys] = n;
        int problem = key_problem(s, s->nkeys);
        if (problem) {
            add(r, problem == 1 ? "grid.\"%s\": unknown key: a job has no field %s (docs/config.md)"
                                : "grid.\"%s\": goes through a value of the base job that is "
                                  "not an object%.0s", k, k);
            continue;
        }
        s->grid *= n; /* within SWEEP_MAX_GRID: check_grid_size */
        s->nkeys++;
    }
}

static void read_early_stop(sweep_spec *s, const cJSON *o, report *r)
{
    const cJSON *it;
    double v;
    int have_after = 0, have_margin = 0;
    if (!cJSON_IsObject(o)) {
        add(r, "early_stop: must be an object {\"after_epochs\": E, \"margin\": M}");
        return;
    }
    cJSON_ArrayForEach(it, o) {
        if (strcmp(it->string, "after_epochs") == 0) {
            have_after = 1;
            if (read_int(it, 1, 100000, &v) != 0)
                add(r, "early_stop.after_epochs: must be an integer in 1..100000");
            else
                s->early_after = (int)v;
        } else if (strcmp(it->string, "margin") == 0) {
            have_margin = 1;
            if (!cJSON_IsNumber(it) || !(it->valuedouble >= 0 && it->valuedouble <= 1))
                add(r, "early_stop.margin: must be a number in [0, 1] (a test error fraction)");
            else
                s->early_margin = it->valuedouble;
        } else {
            char shown[48];
            add(r, "early_stop.%s: unknown field", user_text_shown(it->string, shown));
        }
    }
    if (!have_after)
        add(r, "early_stop.after_epochs: missing");
    if (!have_margin)
        add(r, "early_stop.margin: missing");
}

/* The top-level fields; the grid and the early stop in their readers. */
static void read_fields(sweep_spec *s, const cJSON *root, report *r)
{
    const cJSON *it, *grid = NULL;
    double v;
    int have_samples = 0, have_sample_seed = 0;
    cJSON_ArrayForEach(it, root) {
        const char *k = it->string;
        size_t at;
        const char *what;
        if (cJSON_GetObjectItemCaseSensitive(root, k) != it) {
            char shown[48];
            add(r, "%s: given twice", user_text_shown(k, shown));
        } else if (strcmp(k, "name") == 0) {
            if (!cJSON_IsString(it) || !it->valuestring[0] || strlen(it->valuestring) > SWEEP_NAME_MAX)
                add(r, "name: must be a non-empty string of at most %d bytes", SWEEP_NAME_MAX);
            else if (user_text_check(it->valuestring, &at, &what) != 0)
                add(r, "name: byte %zu %s", at, what);
            else
                snprintf(s->name, sizeof s->name, "%s", it->valuestring);
        } else if (strcmp(k, "base") == 0) {
            if (!cJSON_IsObject(it))
                add(r, "base: must be the base job's object (parlectl reads the file it names)");
            else
                s->base = it;
        } else if (strcmp(k, "grid") == 0) {
            if (!cJSON_IsObject(it))
                add(r, "grid: must be an object of dotted keys and value lists");
            else
                grid = it;
        } else if (strcmp(k, "seeds") == 0) {
            if (read_int(it, 1, SWEEP_MAX_SEEDS, &v) != 0)
                add(r, "seeds: must be an integer in 1..%d", SWEEP_MAX_SEEDS);
            else
                s->seeds = (int)v;
        } else if (strcmp(k, "samples") == 0) {
            have_samples = 1;
            if (read_int(it, 1, SWEEP_MAX_JOBS, &v) != 0)
                add(r, "samples: must be an integer in 1..%d", SWEEP_MAX_JOBS);
            else
                s->samples = (long)v;
        } else if (strcmp(k, "sample_seed") == 0) {
            have_sample_seed = 1;
            if (read_int(it, 0, SEED_LIMIT, &v) != 0)
                add(r, "sample_seed: must be an integer in 0..2^53");
            else
                s->sample_seed = (uint64_t)v;
        } else if (strcmp(k, "early_stop") == 0) {
            read_early_stop(s, it, r);
        } else {
            char shown[48];
            add(r, "%s: unknown field (a sweep has name, base, grid, seeds, samples, "
                "sample_seed, early_stop)", user_text_shown(k, shown));
        }
    }
    if (have_sample_seed && !have_samples)
        add(r, "sample_seed: only with samples");
    if (!s->base && !cJSON_GetObjectItemCaseSensitive(root, "base"))
        add(r, "base: missing (the base job)");
    if (!grid && !cJSON_GetObjectItemCaseSensitive(root, "grid"))
        add(r, "grid: missing (an object of dotted keys and value lists; {} for seeds alone)");
    if (s->base && grid)
        read_grid(s, grid, r);
}

/* The sweep's default name: the base job's, if it fits, else "sweep". */
static void default_name(sweep_spec *s)
{
    const char *base = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(s->base, "name"));
    size_t at;
    const char *what;
    int ok = base && base[0] && strlen(base) <= SWEEP_NAME_MAX &&
             user_text_check(base, &at, &what) == 0;
    snprintf(s->name, sizeof s->name, "%s", ok ? base : "sweep");
}

/* Every job, validated; errors of the first few bad points spelt out. */
static void check_jobs(const sweep_spec *s, report *r)
{
    int bad = 0;
    for (int p = 0; p < s->npoints; p++)
        for (int k = 0; k < s->seeds; k++) {
            char why[8192];
            cJSON *job = sweep_job(s, s->points[p], k, why, sizeof why);
            if (!job && bad++ < MAX_BAD_POINTS)
                add(r, "%s", why);
            cJSON_Delete(job);
            if (!job)
                break; /* one error per point */
        }
    if (bad > MAX_BAD_POINTS)
        add(r, "and %d more points fail", bad - MAX_BAD_POINTS);
}

int sweep_spec_read(const cJSON *root, sweep_spec *s, char *err, size_t errlen)
{
    memset(s, 0, sizeof *s);
    s->seeds = 1;
    report r = {.buf = err, .len = errlen};
    err[0] = '\0';
    if (!cJSON_IsObject(root)) {
        snprintf(err, errlen, "sweep: must be an object");
        return -1;
    }
    read_fields(s, root, &r);
    if (r.n == 0 && s->samples > s->grid)
        add(&r, "samples: %ld is more than the grid's %ld points", s->samples, s->grid);
    long points = r.n == 0 ? (s->samples ? s->samples : s->grid) : 0;
    if (r.n == 0 && points * s->seeds > SWEEP_MAX_JOBS)
        add(&r, "samples: %ld points x %d seeds is %ld jobs, more than the %d a sweep may queue",
            points, s->seeds, points * s->seeds, SWEEP_MAX_JOBS);
    if (r.n == 0 && !s->name[0])
        default_name(s);
    if (r.n == 0 && choose_points(s) != 0)
        add(&r, "out of memory");
    if (r.n == 0)
        return 0;
    sweep_spec_free(s);
    return -1;
}

int sweep_spec_check(const sweep_spec *s, char *err, size_t errlen)
{
    report r = {.buf = err, .len = errlen};
    err[0] = '\0';
    check_jobs(s, &r);
    return r.n == 0 ? 0 : -1;
}

void sweep_spec_free(sweep_spec *s)
{
    free(s->points);
    s->points = NULL;
    s->npoints = 0;
}
