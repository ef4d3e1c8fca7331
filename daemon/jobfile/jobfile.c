/* Job files: cJSON parses the text, a table of every field checks types and
 * ranges, then the rules that tie fields together (defaults that depend on the
 * architecture, dataset or algorithm) run once at the end. Every problem is
 * reported by its dotted path, all of them at once (docs/config.md). */
#include "jobfile.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coupling.h"
#include "dataset_table.h"
#include "user_text.h"

#define SEED_MAX 9007199254740992.0 /* 2^53: every integer up to it is exact in a double */

static const char *const archs[] = {"lenet", "allcnn", "wrn", "mlp", NULL};
static const char *const normalizations[] = {"none", "channel", "zca", NULL};
static const char *const samplings[] = {"shuffle", "replacement", NULL};
static const char *const graphs[] = {"ring", "bipartite-exponential", NULL};
static const char *const inits[] = {"same", "independent", NULL};
static const char *const variants[] = {"sync", "async", NULL};
static const char *const interpolations[] = {"constant", "clock", "loss", NULL};
static const char *const bn_modes[] = {"recompute", "average", "replica0", NULL};
static const char *const precisions[] = {"fp32", "tf32", "bf16", NULL};
static const char *const conv_algorithm_choices[] = {"auto", "timed", "heuristic", NULL};
static const char *const gpu_batchnorms[] = {"classic", "split", NULL};
static const char *const failure_modes[] = {"fail", "reseed", NULL};

/* data.dataset's choices: the table's names, NULL-terminated, made once. */
static const char *dataset_name_list[DATASET_KINDS + 1];

static void fill_dataset_names(void)
{
    for (int i = 0; i < DATASET_KINDS; i++)
        dataset_name_list[i] = dataset_kinds[i].name;
}

static const char *const *dataset_names(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, fill_dataset_names);
    return dataset_name_list;
}

/* K_RULE: a string, one of the coupling rules' names (coupling.h); K_DATASET:
 * one of the datasets' names (data/dataset_table.h). */
enum field_kind { K_INT, K_NUM, K_FLOAT, K_BOOL, K_STR, K_RULE, K_DATASET, K_SEED, K_SCHEDULE,
                  K_DURATION };
enum { LO_OPEN = 1, HI_OPEN = 2 };

typedef struct field {
    const char *path;
    enum field_kind kind;
    size_t offset, size;
    double lo, hi;              /* K_INT, K_NUM, K_FLOAT, K_SEED: allowed range */
    int open;                   /* LO_OPEN, HI_OPEN: the bound itself is excluded */
    const char *const *choices; /* K_STR: the allowed values, or NULL for free text */
} field;

#define F(path, kind, member, lo, hi, open, choices)                                          \
    {path, kind, offsetof(job_config, member), sizeof(((job_config *)0)->member), lo, hi, open, \
     choices}
#define INT(path, member, lo, hi) F(path, K_INT, member, lo, hi, 0, NULL)
#define NUM(path, member, lo, hi, open) F(path, K_NUM, member, lo, hi, open, NULL)
#define STR(path, member, choices) F(path, K_STR, member, 0, 0, 0, choices)
#define BOOL(path, member) F(path, K_BOOL, member, 0, 0, 0, NULL)

/* Every field a job file may hold; a section is any prefix before a dot. */
static const field fields[] = {
    STR("name", name, NULL),
    STR("model.arch", model.arch, archs),
    INT("model.depth", model.depth, 10, 1000),
    INT("model.width", model.width, 1, 64),
    F("model.dropout", K_FLOAT, model.dropout, 0, 1, HI_OPEN, NULL),
    INT("model.classes", model.classes, 0, 100000),
    F("data.dataset", K_DATASET, data.dataset, 0, 0, 0, NULL),
    STR("data.root", data.root, NULL),
    INT("data.train_limit", data.train_limit, 0, INT_MAX),
    INT("data.test_limit", data.test_limit, 0, INT_MAX),
    STR("data.normalize", data.normalize, normalizations),
    BOOL("data.augment", data.augment),
    STR("data.sampling", data.sampling, samplings),
    BOOL("data.split", data.split),
    F("algorithm.name", K_RULE, algorithm.name, 0, 0, 0, NULL),
    INT("algorithm.replicas", algorithm.replicas, 1, 64),
    INT("algorithm.L", algorithm.L, 0, 100000),
    NUM("algorithm.gamma", algorithm.gamma, 0, INFINITY, 0),
    NUM("algorithm.rho", algorithm.rho, 0, INFINITY, 0),
    NUM("algorithm.gamma_max", algorithm.gamma_max, 0, INFINITY, 0),
    NUM("algorithm.rho_max", algorithm.rho_max, 0, INFINITY, 0),
    NUM("algorithm.growth", algorithm.growth, 0, INFINITY, 0),
    NUM("algorithm.alpha", algorithm.alpha, 0, 1, HI_OPEN),
    NUM("algorithm.inner_lr", algorithm.inner_lr, 0, INFINITY, 0),
    STR("algorithm.init", algorithm.init, inits),
    STR("algorithm.graph", algorithm.graph, graphs),
    BOOL("algorithm.mix_after_step", algorithm.mix_after_step),
    INT("algorithm.peers", algorithm.peers, 1, 6),
    INT("algorithm.synch_freq", algorithm.synch_freq, 0, 1000),
    INT("algorithm.group_size", algorithm.group_size, 1, 64),
    INT("algorithm.tau", algorithm.tau, 1, INT_MAX),
    INT("algorithm.tau_global", algorithm.tau_global, 1, INT_MAX),
    INT("algorithm.avg_size", algorithm.avg_size, 1, 100),
    NUM("algorithm.c1", algorithm.c1, 0, 1, 0),
    NUM("algorithm.c2", algorithm.c2, 0, 1, 0),
    NUM("algorithm.p1", algorithm.p1, 0, 1, 0),
    NUM("algorithm.p2", algorithm.p2, 0, 1, 0),
    NUM("algorithm.beta", algorithm.beta, 0, 1, LO_OPEN),
    STR("algorithm.variant", algorithm.variant, variants),
    NUM("algorithm.fetch_probability", algorithm.fetch_probability, 0, 1, 0),
    STR("algorithm.interpolation", algorithm.interpolation, interpolations),
    NUM("algorithm.value", algorithm.value, 0, 1, LO_OPEN),
    NUM("algorithm.divergence_threshold", algorithm.divergence_threshold, 0, INFINITY, 0),
    INT("algorithm.timeout_ms", algorithm.timeout_ms, 0, 10000000),
    NUM("algorithm.p", algorithm.p, 0, 1, 0),
    STR("algorithm.on_replica_failure", algorithm.on_replica_failure, failure_modes),
    INT("algorithm.max_reseeds", algorithm.max_reseeds, 0, 1000000),
    NUM("optim.lr", optim.lr, 0, INFINITY, LO_OPEN),
    F("optim.lr_schedule", K_SCHEDULE, optim.schedule, 0, 0, 0, NULL),
    NUM("optim.momentum", optim.momentum, 0, 1, HI_OPEN),
    BOOL("optim.nesterov", optim.nesterov),
    NUM("optim.weight_decay", optim.weight_decay, 0, INFINITY, 0),
    INT("optim.batch", optim.batch, 1, 4096),
    INT("epochs", epochs, 1, 100000),
    F("seed", K_SEED, seed, 0, SEED_MAX, 0, NULL),
    STR("devices", devices, NULL),
    STR("precision", precision, precisions),
    BOOL("deterministic", deterministic),
    STR("conv_algorithms", conv_algorithms, conv_algorithm_choices),
    STR("gpu_batchnorm", gpu_batchnorm, gpu_batchnorms),
    INT("priority", priority, JOB_PRIORITY_MIN, JOB_PRIORITY_MAX),
    NUM("gpu_share", gpu_share, 0.01, 1, 0),
    F("time_limit", K_DURATION, time_limit, 0, 0, 0, NULL),
    STR("after", after, NULL),
    BOOL("after_any", after_any),
    NUM("comm.timeout_s", comm.timeout_s, 0, 1e7, LO_OPEN),
    INT("checkpoint.every_epochs", checkpoint.every_epochs, 0, INT_MAX),
    INT("checkpoint.keep", checkpoint.keep, 1, 1000),
    STR("eval.bn", eval.bn, bn_modes),
    NUM("eval.every_passes", eval.every_passes, 0, 1e6, 0),
    INT("log_every", log_every, 1, INT_MAX),
};
#define NFIELDS ((int)(sizeof fields / sizeof fields[0]))

/* What the file did with each field (coupling.h's enum rule_field): the
 * defaults and cross-checks need to know, and a bad value must not be
 * reported twice. */

typedef struct parser {
    job_config *cfg;
    enum rule_field state[NFIELDS];
    char *err;
    size_t errlen, used;
    int nerrors;
    int full; /* err holds all it can, ending in "..." */
} parser;

__attribute__((format(printf, 2, 3))) static void report(parser *p, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->nerrors++;
    if (p->full || p->errlen == 0)
        return;
    const char *sep = p->used ? "; " : "";
    size_t need = strlen(sep) + strlen(msg);
    snprintf(p->err + p->used, p->errlen - p->used, "%s%s", sep, msg);
    if (p->used + need < p->errlen) {
        p->used += need;
        return;
    }
    /* Did not fit: snprintf kept what did; its last bytes become "...". */
    size_t end = p->errlen - 1, dots = end < 3 ? end : 3;
    memset(p->err + end - dots, '.', dots);
    p->used = end;
    p->full = 1;
}

static int field_index(const char *path)
{
    for (int i = 0; i < NFIELDS; i++)
        if (!strcmp(fields[i].path, path))
            return i;
    return -1;
}

static int is_section(const char *path)
{
    size_t n = strlen(path);
    for (int i = 0; i < NFIELDS; i++)
        if (!strncmp(fields[i].path, path, n) && fields[i].path[n] == '.')
            return 1;
    return 0;
}

static enum rule_field state_of(const parser *p, const char *path)
{
    return p->state[field_index(path)];
}

/* Finite and within [lo, hi], the ends excluded as `open` says. */
static int in_range(double x, double lo, double hi, int open)
{
    return isfinite(x) && x >= lo && !((open & LO_OPEN) && x == lo) && x <= hi &&
           !((open & HI_OPEN) && x == hi);
}

static int number_in(const cJSON *v, double lo, double hi, int open, double *out)
{
    if (!cJSON_IsNumber(v) || !in_range(v->valuedouble, lo, hi, open))
        return 0;
    *out = v->valuedouble;
    return 1;
}

static int integer_in(const cJSON *v, double lo, double hi, double *out)
{
    return number_in(v, lo, hi, 0, out) && *out == floor(*out);
}

static void report_range(parser *p, const field *f, const char *path)
{
    if (f->kind == K_INT || f->kind == K_SEED) {
        if (f->hi >= INT_MAX && f->kind == K_INT)
            report(p, "%s: must be an integer >= %.0f", path, f->lo);
        else
            report(p, "%s: must be an integer in %.0f..%.0f", path, f->lo, f->hi);
    } else if (isinf(f->hi)) {
        report(p, "%s: must be %s %g", path, (f->open & LO_OPEN) ? ">" : ">=", f->lo);
    } else {
        report(p, "%s: must be in %c%g, %g%c", path, (f->open & LO_OPEN) ? '(' : '[', f->lo, f->hi,
               (f->open & HI_OPEN) ? ')' : ']');
    }
}

static void report_choices(parser *p, const char *path, const char *value,
                           const char *const *choices)
{
    char known[512] = "", buf[48];
    size_t used = 0; /* snprintf truncates: a longer list ends cut, never past the buffer */
    for (int i = 0; choices[i] && used < sizeof known; i++)
        used += (size_t)snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "", choices[i]);
    report(p, "%s: unknown \"%s\"; known: %s", path, user_text_shown(value, buf), known);
}

/* optim.lr_schedule: [[E1, lr1], [E2, lr2], ...], E integers >= 1 increasing, lr > 0. */
static int parse_schedule(parser *p, const cJSON *v, const char *path)
{
    if (!cJSON_IsArray(v)) {
        report(p, "%s: must be an array of [epoch, lr] pairs", path);
        return 0;
    }
    int n = cJSON_GetArraySize(v);
    if (n > JOB_MAX_SCHEDULE) {
        report(p, "%s: at most %d entries, got %d", path, JOB_MAX_SCHEDULE, n);
        return 0;
    }
    int ok = 1, i = 0;
    double last_epoch = 0;
    for (const cJSON *entry = v->child; entry; entry = entry->next, i++) {
        if (!cJSON_IsArray(entry) || cJSON_GetArraySize(entry) != 2) {
            report(p, "%s[%d]: must be [epoch, lr]", path, i);
            ok = 0;
            continue;
        }
        double epoch, lr;
        if (!integer_in(entry->child, 1, INT_MAX, &epoch)) {
            report(p, "%s[%d]: epoch must be an integer >= 1", path, i);
            ok = 0;
        } else if (epoch <= last_epoch) {
            report(p, "%s[%d]: epochs must increase", path, i);
            ok = 0;
        } else {
            last_epoch = epoch;
            p->cfg->optim.schedule[i][0] = epoch;
        }
        if (!number_in(entry->child->next, 0, INFINITY, LO_OPEN, &lr)) {
            report(p, "%s[%d]: lr must be > 0", path, i);
            ok = 0;
        } else {
            p->cfg->optim.schedule[i][1] = lr;
        }
    }
    if (ok)
        p->cfg->optim.nschedule = n;
    return ok;
}

/* Checks one value against its field and stores it; returns 0 if it is bad. */
static int parse_field(parser *p, const field *f, const cJSON *v, const char *path)
{
    char *dst = (char *)p->cfg + f->offset, buf[48];
    double x;
    switch (f->kind) {
    case K_INT:
    case K_SEED:
        if (!integer_in(v, f->lo, f->hi, &x))
            break;
        if (f->kind == K_INT)
            *(int *)dst = (int)x;
        else
            *(uint64_t *)dst = (uint64_t)x;
        return 1;
    case K_NUM:
    case K_FLOAT:
        if (!cJSON_IsNumber(v)) {
            report(p, "%s: must be a number", path);
            return 0;
        }
        /* A float field is checked as stored: 0.9999999999 rounds to 1. */
        x = f->kind == K_FLOAT ? (double)(float)v->valuedouble : v->valuedouble;
        if (!in_range(x, f->lo, f->hi, f->open))
            break;
        if (f->kind == K_FLOAT)
            *(float *)dst = (float)x;
        else
            *(double *)dst = x;
        return 1;
    case K_DURATION: /* seconds, or "[D-]HH:MM:SS" */
        if (cJSON_IsNumber(v) ? in_range(v->valuedouble, 0, 10 * 366 * 86400.0, 0) &&
                                    (*(double *)dst = v->valuedouble, 1)
                              : cJSON_IsString(v) && job_duration_read(v->valuestring,
                                                                       (double *)dst) == 0)
            return 1;
        report(p, "%s: must be seconds (3600) or [D-]HH:MM:SS (\"1-12:00:00\"), at most 10 "
               "years", path);
        return 0;
    case K_BOOL:
        if (!cJSON_IsBool(v)) {
            report(p, "%s: must be a boolean", path);
            return 0;
        }
        *(bool *)dst = cJSON_IsTrue(v);
        return 1;
    case K_STR:
    case K_RULE:
    case K_DATASET:
        if (!cJSON_IsString(v)) {
            report(p, "%s: must be a string", path);
            return 0;
        }
        const char *const *choices = f->kind == K_RULE      ? coupling_names()
                                     : f->kind == K_DATASET ? dataset_names()
                                                            : f->choices;
        if (choices) {
            int i = 0;
            while (choices[i] && strcmp(choices[i], v->valuestring))
                i++;
            if (!choices[i]) {
                report_choices(p, path, v->valuestring, choices);
                return 0;
            }
        }
        size_t at;
        const char *what;
        if (user_text_check(v->valuestring, &at, &what) != 0) {
            report(p, "%s: byte %zu (0x%02x) %s (text fields take printable UTF-8)", path, at,
                   (unsigned char)v->valuestring[at], what);
            return 0;
        }
        if (strlen(v->valuestring) >= f->size) {
            report(p, "%s: too long (at most %zu bytes): \"%s\"", path, f->size - 1,
                   user_text_shown(v->valuestring, buf));
            return 0;
        }
        strcpy(dst, v->valuestring);
        return 1;
    case K_SCHEDULE:
        return parse_schedule(p, v, path);
    }
    report_range(p, f, path);
    return 0;
}

/* Its fields count as bad, so that none is also reported as missing. */
static void bad_section(parser *p, const char *path)
{
    size_t n = strlen(path);
    report(p, "%s: must be an object", path);
    for (int i = 0; i < NFIELDS; i++)
        if (!strncmp(fields[i].path, path, n) && fields[i].path[n] == '.')
            p->state[i] = RULE_FIELD_BAD;
}

/* Walks one JSON object whose fields are named `prefix.key`. */
static void parse_object(parser *p, const cJSON *obj, const char *prefix)
{
    for (const cJSON *item = obj->child; item; item = item->next) {
        char path[128], buf[48];
        snprintf(path, sizeof path, "%s%s%s", prefix, *prefix ? "." : "", user_text_shown(item->string, buf));
        int i = strchr(item->string, '.') ? -1 : field_index(path);
        if (i >= 0) {
            if (p->state[i] != RULE_FIELD_ABSENT)
                report(p, "%s: given twice", path);
            else
                p->state[i] = parse_field(p, &fields[i], item, path) ? RULE_FIELD_SET : RULE_FIELD_BAD;
        } else if (!strchr(item->string, '.') && is_section(path)) {
            const cJSON *prev = obj->child;
            while (prev != item && strcmp(prev->string, item->string))
                prev = prev->next;
            if (prev != item)
                report(p, "%s: given twice", path);
            else if (!cJSON_IsObject(item))
                bad_section(p, path);
            else
                parse_object(p, item, path);
        } else {
            report(p, "%s: unknown field", path);
        }
    }
}

static int is_name(const char *have, const char *want) { return !strcmp(have, want); }

static int rule_reads(const coupling_rule *rule, const char *path)
{
    for (const char *const *f = rule->fields; f && *f; f++)
        if (!strcmp(*f, path))
            return 1;
    return 0;
}

/* The rule's own checks, on what the parser saw; its reports join ours. */
static void rule_validate(parser *p, const coupling_rule *rule)
{
    const char *paths[NFIELDS];
    for (int i = 0; i < NFIELDS; i++)
        paths[i] = fields[i].path;
    rule_check c = {.field = paths, .state = p->state, .nfields = NFIELDS};
    rule->validate(p->cfg, &c);
    for (int i = 0; i < c.nreports; i++)
        report(p, "%s", c.report[i]);
}

/* algorithm.L by whether the rule takes inner steps, and the fields the
 * rule fixes; the fields that only some rules read, given for another; then
 * the rule's own checks. */
static void finish_rule(parser *p)
{
    job_config *cfg = p->cfg;
    const char *alg = cfg->algorithm.name;
    const coupling_rule *rule = coupling_find(alg); /* NULL: absent or reported */
    if (state_of(p, "algorithm.L") == RULE_FIELD_ABSENT)
        cfg->algorithm.L = rule && rule->inner_steps ? 25 : 0;
    else if (rule && !rule->inner_steps && state_of(p, "algorithm.L") == RULE_FIELD_SET &&
             cfg->algorithm.L != 0)
        report(p, "algorithm.L: must be 0 for %s", alg);
    if (!rule)
        return;
    for (int k = 0; k < RULE_MAX_FIXED && rule->fixed[k].path; k++) {
        int i = field_index(rule->fixed[k].path);
        char *at = (char *)cfg + fields[i].offset;
        double want = rule->fixed[k].value;
        double have = fields[i].kind == K_INT ? *(int *)at : *(double *)at;
        if (p->state[i] == RULE_FIELD_ABSENT && fields[i].kind == K_INT)
            *(int *)at = (int)want;
        else if (p->state[i] == RULE_FIELD_ABSENT)
            *(double *)at = want;
        else if (p->state[i] == RULE_FIELD_SET && have != want)
            report(p, "%s: must be %g for %s", fields[i].path, want, alg);
    }
    for (int i = 0; i < NFIELDS; i++) {
        if (p->state[i] != RULE_FIELD_SET || rule_reads(rule, fields[i].path))
            continue;
        char owners[256] = "";
        for (size_t r = 0; coupling_rule_at(r); r++)
            if (rule_reads(coupling_rule_at(r), fields[i].path) &&
                strlen(owners) + strlen(coupling_rule_at(r)->name) + 2 < sizeof owners)
                strcat(strcat(owners, " "), coupling_rule_at(r)->name);
        if (*owners)
            report(p, "%s: only for%s, not %s", fields[i].path, owners, alg);
    }
    if (rule->validate)
        rule_validate(p, rule);
}

/* The rules between fields, and the defaults that depend on another field.
 * A field that is RULE_FIELD_BAD was already reported and is left out here. */
static void finish(parser *p)
{
    job_config *cfg = p->cfg;
    const char *arch = cfg->model.arch, *dataset = cfg->data.dataset, *alg = cfg->algorithm.name;
    char buf[48];

    if (state_of(p, "model.arch") == RULE_FIELD_ABSENT)
        report(p, "model.arch: required");
    if (state_of(p, "data.dataset") == RULE_FIELD_ABSENT)
        report(p, "data.dataset: required");
    if (state_of(p, "algorithm.name") == RULE_FIELD_ABSENT)
        report(p, "algorithm.name: required");

    if (*arch && !is_name(arch, "wrn")) {
        if (state_of(p, "model.depth") != RULE_FIELD_ABSENT)
            report(p, "model.depth: only for arch wrn, not %s", arch);
        if (state_of(p, "model.width") != RULE_FIELD_ABSENT)
            report(p, "model.width: only for arch wrn, not %s", arch);
    }
    if (is_name(arch, "wrn") && (cfg->model.depth - 4) % 6 != 0)
        report(p, "model.depth: must be 6k+4 (16, 22, 28, 40, ...) for wrn, got %d",
               cfg->model.depth);
    if (state_of(p, "optim.weight_decay") == RULE_FIELD_ABSENT)
        cfg->optim.weight_decay = is_name(arch, "allcnn") ? 1e-3 : is_name(arch, "wrn") ? 5e-4 : 0;

    const dataset_kind *data = dataset_kind_find(dataset);
    if (data && data->default_root && state_of(p, "data.root") == RULE_FIELD_ABSENT)
        snprintf(cfg->data.root, sizeof cfg->data.root, "%s", data->default_root);
    if (data && dataset_kind_needs_root(data) && !*cfg->data.root &&
        state_of(p, "data.root") != RULE_FIELD_BAD)
        report(p, "data.root: required for dataset %s", dataset);

    finish_rule(p);
    if (cfg->algorithm.gamma_max < cfg->algorithm.gamma &&
        state_of(p, "algorithm.gamma") != RULE_FIELD_BAD &&
        state_of(p, "algorithm.gamma_max") != RULE_FIELD_BAD)
        report(p, "algorithm.gamma_max: must be >= algorithm.gamma (%g)", cfg->algorithm.gamma);
    if (cfg->algorithm.rho_max < cfg->algorithm.rho &&
        state_of(p, "algorithm.rho") != RULE_FIELD_BAD &&
        state_of(p, "algorithm.rho_max") != RULE_FIELD_BAD)
        report(p, "algorithm.rho_max: must be >= algorithm.rho (%g)", cfg->algorithm.rho);
    if (strcmp(cfg->algorithm.on_replica_failure, "reseed") == 0 &&
        cfg->algorithm.replicas < 2 && state_of(p, "algorithm.replicas") != RULE_FIELD_BAD)
        report(p, "algorithm.on_replica_failure: \"reseed\" needs >= 2 replicas (a replica is "
               "restored from the others), got %d", cfg->algorithm.replicas);

    if (state_of(p, "name") == RULE_FIELD_ABSENT) {
        if (*arch && *dataset && *alg)
            snprintf(cfg->name, sizeof cfg->name, "%s-%s-%s", arch, dataset, alg);
    } else if (state_of(p, "name") == RULE_FIELD_SET) {
        const char *c = cfg->name;
        while (*c && isprint((unsigned char)*c))
            c++;
        if (!*cfg->name || *c)
            report(p, "name: must be non-empty printable text, got \"%s\"", user_text_shown(cfg->name, buf));
    }
    char why[200];
    int devices = state_of(p, "devices") == RULE_FIELD_SET
                      ? job_devices_read(cfg->devices, &cfg->device_spec, why, sizeof why)
                      : 0;
    if (devices == -1)
        report(p, "devices: \"%s\": %s", user_text_shown(cfg->devices, buf), why);
    else if (devices != 0)
        report(p, "devices: \"%s\" is not \"cpu\", \"cpu:K\", \"auto\", \"gpu\", \"gpu:N\" or "
               "distinct GPU ids like \"0,1\" or \"cuda:0,1\"",
               user_text_shown(cfg->devices, buf));
    char ids[JOB_MAX_AFTER][16];
    if (job_after_ids(cfg->after, ids, why, sizeof why) < 0)
        report(p, "after: \"%s\": %s", user_text_shown(cfg->after, buf), why);
}

enum backend_precision job_precision(const job_config *cfg)
{
    if (strcmp(cfg->precision, "fp32") == 0)
        return PRECISION_FP32;
    return strcmp(cfg->precision, "bf16") == 0 ? PRECISION_BF16 : PRECISION_TF32;
}

int job_times_conv_algorithms(const job_config *cfg)
{
    if (cfg->deterministic)
        return 0;
    if (strcmp(cfg->conv_algorithms, "auto") == 0)
        return backend_times_algorithms_by_default(job_precision(cfg));
    return strcmp(cfg->conv_algorithms, "timed") == 0;
}

/* The job object's fields, then the rules between them. */
static void parse_job(parser *p, const cJSON *root)
{
    if (!cJSON_IsObject(root)) {
        report(p, "job: must be a JSON object");
        return;
    }
    parse_object(p, root, "");
    finish(p);
}

int job_config_from_json(const cJSON *root, job_config *cfg, char *err, size_t errlen)
{
    parser p = {.cfg = cfg, .err = err, .errlen = err ? errlen : 0};
    if (p.errlen)
        err[0] = '\0';
    job_config_defaults(cfg);
    parse_job(&p, root);
    return p.nerrors ? -1 : 0;
}

int job_config_parse(const char *json, size_t len, job_config *cfg, char *err, size_t errlen)
{
    parser p = {.cfg = cfg, .err = err, .errlen = err ? errlen : 0};
    if (p.errlen)
        err[0] = '\0';
    job_config_defaults(cfg);
    if (!json)
        len = 0;
    const char *nul = len ? memchr(json, '\0', len) : NULL;
    if (nul) {
        report(&p, "JSON syntax error at byte %zu: NUL byte", (size_t)(nul - json));
        return -1;
    }
    /* cJSON gets a terminated copy: the caller's buffer need not be. */
    char *text = malloc(len + 1);
    if (!text) {
        report(&p, "out of memory");
        return -1;
    }
    if (len)
        memcpy(text, json, len);
    text[len] = '\0';
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!root) {
        report(&p, "JSON syntax error at byte %zu", end ? (size_t)(end - text) : (size_t)0);
    } else {
        size_t at = (size_t)(end - text);
        while (at < len && (unsigned char)text[at] <= ' ')
            at++;
        if (at < len)
            report(&p, "JSON syntax error at byte %zu: text after the job", at);
        else
            parse_job(&p, root);
        cJSON_Delete(root);
    }
    free(text);
    return p.nerrors ? -1 : 0;
}
