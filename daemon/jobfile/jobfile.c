/* Job files: cJSON parses the text, each field is checked against its line
 * of the table (jobfile_fields.c) for type and range, then the rules that
 * tie fields together (defaults that depend on the architecture, dataset or
 * algorithm) run once at the end (jobfile_checks.c). Every problem is
 * reported by its dotted path, all of them at once (docs/config.md). */
#include "jobfile.h"

#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coupling.h"
#include "jobfile_impl.h"
#include "user_text.h"

static int is_section(const char *path)
{
    size_t n = strlen(path);
    for (int i = 0; i < NFIELDS; i++)
        if (!strncmp(fields[i].path, path, n) && fields[i].path[n] == '.')
            return 1;
    return 0;
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
