/* The accounting record (accounting.h): its lines read and validated, runs
 * appended durably, the history summed per owner. */
#include "accounting.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fsutil.h"

double acct_device_units(int ngpus, double gpu_share, int cores, int ncores)
{
    double units = ngpus > 0 ? ngpus * (gpu_share > 0 && gpu_share <= 1 ? gpu_share : 1) : 0;
    if (cores > 0 && ncores > 0)
        units += (double)(cores < ncores ? cores : ncores) / ncores;
    return units;
}

cJSON *acct_run_json(const acct_run *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", r->id);
    cJSON_AddNumberToObject(o, "uid", r->uid);
    cJSON_AddStringToObject(o, "user", r->user);
    cJSON_AddStringToObject(o, "end", r->end);
    cJSON_AddStringToObject(o, "devices", r->devices);
    cJSON_AddNumberToObject(o, "started_at", r->started_at);
    cJSON_AddNumberToObject(o, "ended_at", r->ended_at);
    cJSON_AddNumberToObject(o, "device_seconds", r->device_seconds);
    return o;
}

/* A string field of at most size - 1 bytes into out: 0, or -1 with why. */
static int text_field(const cJSON *o, const char *k, char *out, size_t size, char *why,
                      size_t whylen)
{
    const char *s = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
    if (!s || strlen(s) >= size) {
        snprintf(why, whylen, "%s: must be a string of at most %zu bytes", k, size - 1);
        return -1;
    }
    memcpy(out, s, strlen(s) + 1);
    return 0;
}

/* A number field in lo..hi: 0, or -1 with why. */
static int num_field(const cJSON *o, const char *k, double lo, double hi, double *out, char *why,
                     size_t whylen)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= lo && v->valuedouble <= hi)) {
        snprintf(why, whylen, "%s: must be a number in %g..%g", k, lo, hi);
        return -1;
    }
    *out = v->valuedouble;
    return 0;
}

int acct_run_from_json(const cJSON *o, acct_run *r, char *why, size_t whylen)
{
    static const char *const ends[] = {"done", "failed",  "cancelled", "timeout",
                                       "preempted", "held", "stopped",   "interrupted"};
    double uid;
    memset(r, 0, sizeof *r);
    if (!cJSON_IsObject(o)) {
        snprintf(why, whylen, "not a JSON object");
        return -1;
    }
    if (text_field(o, "id", r->id, sizeof r->id, why, whylen) != 0 ||
        num_field(o, "uid", 0, 4294967294.0, &uid, why, whylen) != 0 ||
        text_field(o, "user", r->user, sizeof r->user, why, whylen) != 0 ||
        text_field(o, "end", r->end, sizeof r->end, why, whylen) != 0 ||
        text_field(o, "devices", r->devices, sizeof r->devices, why, whylen) != 0 ||
        num_field(o, "started_at", 0, 1e11, &r->started_at, why, whylen) != 0 ||
        num_field(o, "ended_at", r->started_at, 1e11, &r->ended_at, why, whylen) != 0 ||
        num_field(o, "device_seconds", 0, ACCT_DEVICE_S_MAX, &r->device_seconds, why,
                  whylen) != 0)
        return -1;
    if (uid != floor(uid)) {
        snprintf(why, whylen, "uid: must be a user id");
        return -1;
    }
    r->uid = (unsigned)uid;
    size_t k = 0;
    while (k < sizeof ends / sizeof ends[0] && strcmp(r->end, ends[k]) != 0)
        k++;
    if (k == sizeof ends / sizeof ends[0]) {
        snprintf(why, whylen, "end: must be done, failed, cancelled, timeout, preempted, held, "
                 "stopped or interrupted");
        return -1;
    }
    return 0;
}

int acct_parse_line(const char *line, size_t len, acct_run *r, char *why, size_t whylen)
{
    if (len > ACCT_LINE_MAX) {
        snprintf(why, whylen, "longer than %d bytes", ACCT_LINE_MAX);
        return -1;
    }
    cJSON *o = cJSON_ParseWithLength(line, len);
    int rc = o ? acct_run_from_json(o, r, why, whylen) : -1;
    if (!o)
        snprintf(why, whylen, "not JSON");
    cJSON_Delete(o);
    return rc;
}

static acct_name *name_of(const acct_log *log, unsigned uid)
{
    for (int i = 0; i < log->nnames; i++)
        if (log->names[i].uid == uid)
            return &log->names[i];
    return NULL;
}

/* uid's latest name is `user`: 0, or -1 when out of memory. */
static int note_name(acct_log *log, unsigned uid, const char *user)
{
    acct_name *name = name_of(log, uid);
    if (!name && log->nnames < ACCT_OWNERS_MAX) {
        if (log->nnames == log->capnames) {
            int cap = log->capnames ? 2 * log->capnames : 16;
            acct_name *a = realloc(log->names, (size_t)cap * sizeof *a);
            if (!a)
                return -1;
            log->names = a;
            log->capnames = cap;
        }
        name = &log->names[log->nnames++];
        name->uid = uid;
    }
    if (name)
        snprintf(name->user, sizeof name->user, "%s", user);
    return 0;
}

int acct_add(acct_log *log, const acct_run *r)
{
    if (note_name(log, r->uid, r->user) != 0)
        return -1;
    if (log->n == log->cap) {
        size_t cap = log->cap ? 2 * log->cap : 256;
        acct_entry *e = realloc(log->e, cap * sizeof *e);
        if (!e)
            return -1;
        log->e = e;
        log->cap = cap;
    }
    log->e[log->n++] = (acct_entry){r->uid, r->ended_at, r->device_seconds};
    return 0;
}

int acct_load_text(acct_log *log, const char *text, size_t len, const char *what, size_t *whole)
{
    size_t at = 0;
    long lineno = 0;
    *whole = 0;
    while (at < len) {
        const char *nl = memchr(text + at, '\n', len - at);
        size_t n = nl ? (size_t)(nl - (text + at)) : len - at;
        acct_run r;
        char why[200];
        lineno++;
        if (n > 0 && (!nl || acct_parse_line(text + at, n, &r, why, sizeof why) != 0)) {
            if (!nl)
                snprintf(why, sizeof why, "cut short (no end of line)");
            if (log->skipped++ == 0)
                snprintf(log->first_bad, sizeof log->first_bad, "%s: line %ld: %s", what, lineno,
                         why);
        } else if (n > 0 && acct_add(log, &r) != 0) {
            return -1;
        }
        at += n + (nl ? 1 : 0);
        if (nl)
            *whole = at;
    }
    return 0;
}

/* ---- the days kept (accounting.days.jsonl) ---- */

int acct_parse_day(const char *line, size_t len, acct_day *d, char *user, size_t userlen,
                   char *why, size_t whylen)
{
    double uid, runs;
    cJSON *o = len <= ACCT_LINE_MAX ? cJSON_ParseWithLength(line, len) : NULL;
    int rc = -1;
    memset(d, 0, sizeof *d);
    if (!cJSON_IsObject(o))
        snprintf(why, whylen, len > ACCT_LINE_MAX ? "too long" : "not a JSON object");
    else if (num_field(o, "uid", 0, 4294967294.0, &uid, why, whylen) == 0 &&
             text_field(o, "user", user, userlen, why, whylen) == 0 &&
             num_field(o, "day", 0, 1e11, &d->day, why, whylen) == 0 &&
             num_field(o, "runs", 1, 1e12, &runs, why, whylen) == 0 &&
             num_field(o, "device_seconds", 0, ACCT_DEVICE_S_MAX * 1e6, &d->device_seconds,
                       why, whylen) == 0) {
        if (uid != floor(uid) || runs != floor(runs) || fmod(d->day, 86400) != 0)
            snprintf(why, whylen, "uid, runs: must be whole; day: the start of a UTC day");
        else
            rc = 0;
        d->uid = (unsigned)uid;
        d->runs = (long)runs;
    }
    cJSON_Delete(o);
    return rc;
}

/* The slot of (uid, day) in log->days, added if need be; NULL when out of
 * memory. The days are few (owners x days kept): looked through, newest
 * first. */
static acct_day *day_slot(acct_log *log, unsigned uid, double day)
{
    for (size_t k = log->ndays; k-- > 0;)
        if (log->days[k].uid == uid && log->days[k].day == day)
            return &log->days[k];
    if (log->ndays == log->capdays) {
        size_t cap = log->capdays ? 2 * log->capdays : 64;
        acct_day *d = realloc(log->days, cap * sizeof *d);
        if (!d)
            return NULL;
        log->days = d;
        log->capdays = cap;
    }
    log->days[log->ndays] = (acct_day){.uid = uid, .day = day};
    return &log->days[log->ndays++];
}

int acct_fold(acct_log *log, size_t upto, double now)
{
    if (log->ndays + upto > log->capdays) { /* room for the worst first: no failure midway */
        acct_day *d = realloc(log->days, (log->ndays + upto) * sizeof *d);
        if (!d)
            return -1;
        log->days = d;
        log->capdays = log->ndays + upto;
    }
    for (size_t i = 0; i < upto; i++) {
        const acct_entry *e = &log->e[i];
        acct_day *d = day_slot(log, e->uid, floor(e->ended_at / 86400) * 86400);
        d->runs++;
        d->device_seconds += e->device_seconds;
    }
    memmove(log->e, log->e + upto, (log->n - upto) * sizeof *log->e);
    log->n -= upto;
    size_t kept = 0;
    for (size_t k = 0; k < log->ndays; k++)
        if (log->days[k].day + 86400.0 * ACCT_KEEP_DAYS > now)
            log->days[kept++] = log->days[k];
    log->ndays = kept;
    return 0;
}

/* log->days into days_path, atomically: 0, or -1 with err. */
static int write_days(const acct_log *log, char *err, size_t errlen)
{
    size_t cap = log->ndays * 160 + 1, len = 0;
    char *text = malloc(cap);
    if (!text) {
        snprintf(err, errlen, "%s: out of memory", log->days_path);
        return -1;
    }
    text[0] = '\0';
    for (size_t k = 0; k < log->ndays; k++) {
        const acct_day *d = &log->days[k];
        const acct_name *name = name_of(log, d->uid);
        char digits[16];
        snprintf(digits, sizeof digits, "%u", d->uid);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "uid", d->uid);
        cJSON_AddStringToObject(o, "user", name ? name->user : digits);
        cJSON_AddNumberToObject(o, "day", d->day);
        cJSON_AddNumberToObject(o, "runs", (double)d->runs);
        cJSON_AddNumberToObject(o, "device_seconds", d->device_seconds);
        char *line = cJSON_PrintUnformatted(o);
        cJSON_Delete(o);
        if (line && len + strlen(line) + 2 > cap) {
            char *t = realloc(text, cap = 2 * cap + strlen(line) + 2);
            if (t)
                text = t;
            else
                cap = 0;
        }
        if (!line || !cap) {
            free(line);
            free(text);
            snprintf(err, errlen, "%s: out of memory", log->days_path);
            return -1;
        }
        len += (size_t)sprintf(text + len, "%s\n", line);
        free(line);
    }
    int rc = atomic_write_file(log->days_path, text, len, err, errlen);
    free(text);
    return rc;
}

/* days_path's lines into log->days (a missing file: none): 0, or -1 with err. */
static int load_days(acct_log *log, char *err, size_t errlen)
{
    size_t len = 0;
    char *text = read_file_text(log->days_path, 4 * (size_t)ACCT_FILE_MAX, &len, err, errlen);
    if (!text)
        return errno == ENOENT ? 0 : -1;
    long lineno = 0;
    for (size_t at = 0; at < len;) {
        const char *nl = memchr(text + at, '\n', len - at);
        const size_t n = nl ? (size_t)(nl - (text + at)) : len - at;
        acct_day d, *slot;
        char user[64], why[200];
        lineno++;
        if (n > 0 && acct_parse_day(text + at, n, &d, user, sizeof user, why, sizeof why) != 0) {
            if (log->skipped++ == 0)
                snprintf(log->first_bad, sizeof log->first_bad, "accounting.days.jsonl: "
                         "line %ld: %.200s", lineno, why);
        } else if (n > 0 && (note_name(log, d.uid, user) != 0 ||
                             !(slot = day_slot(log, d.uid, d.day)))) {
            free(text);
            snprintf(err, errlen, "%s: out of memory", log->days_path);
            return -1;
        } else if (n > 0) {
            slot->runs += d.runs;
            slot->device_seconds += d.device_seconds;
        }
        at += n + (nl ? 1 : 0);
    }
    free(text);
    return 0;
}

/* One file into the log: 0 (a missing file is empty), or -1 with err. */
static int load_file(acct_log *log, const char *path, size_t *size, size_t *whole, char *err,
                     size_t errlen)
{
    size_t len = 0;
    *size = *whole = 0;
    /* A file past twice the bound was not written by parled: read its
     * bound's worth only would split a line, so it is refused whole. */
    char *text = read_file_text(path, 2 * (size_t)ACCT_FILE_MAX, &len, err, errlen);
    if (!text)
        return errno == ENOENT ? 0 : -1;
    *size = len;
    int rc = acct_load_text(log, text, len, path, whole);
    free(text);
    if (rc != 0)
        snprintf(err, errlen, "%s: out of memory", path);
    return rc;
}

int acct_open(acct_log *log, const char *state_dir, char *err, size_t errlen)
{
    snprintf(log->path, sizeof log->path, "%s/accounting.jsonl", state_dir);
    snprintf(log->old_path, sizeof log->old_path, "%s/accounting.1.jsonl", state_dir);
    snprintf(log->days_path, sizeof log->days_path, "%s/accounting.days.jsonl", state_dir);
    size_t size, whole;
    if (load_days(log, err, errlen) != 0 ||
        load_file(log, log->old_path, &size, &whole, err, errlen) != 0)
        return -1;
    log->old_n = log->n;
    if (load_file(log, log->path, &size, &whole, err, errlen) != 0)
        return -1;
    log->bytes = whole;
    /* A torn last line (a crash in the middle of an append) goes, so the
     * next record starts a line of its own. */
    if (whole < size && truncate(log->path, (off_t)whole) != 0) {
        snprintf(err, errlen, "%s: cannot cut its torn last line: %s", log->path,
                 strerror(errno));
        return -1;
    }
    return 0;
}

/* The current file becomes the old one; its runs are the old ones now.
 * The old file's runs go into the days kept first (as of `now`), and their
 * file is written before the old one is replaced (a rename that fails then
 * leaves them counted twice until the next rotation: never lost). */
static int rotate(acct_log *log, double now, char *err, size_t errlen)
{
    const size_t ndays = log->ndays, old_n = log->old_n;
    acct_day *days = malloc((ndays ? ndays : 1) * sizeof *days);
    acct_entry *old = malloc((old_n ? old_n : 1) * sizeof *old);
    int rc = -1;
    if (days && old) { /* what the fold changes, put back should a write fail */
        if (ndays) /* (log->days is NULL before the first day is kept) */
            memcpy(days, log->days, ndays * sizeof *days);
        if (old_n)
            memcpy(old, log->e, old_n * sizeof *old);
    }
    if (!days || !old || acct_fold(log, old_n, now) != 0) {
        snprintf(err, errlen, "%s: out of memory", log->days_path);
        goto out;
    }
    if (write_days(log, err, errlen) != 0 || rename(log->path, log->old_path) != 0) {
        if (!strstr(err, log->days_path))
            snprintf(err, errlen, "%s: cannot rename to %s: %s", log->path, log->old_path,
                     strerror(errno));
        if (ndays)
            memcpy(log->days, days, ndays * sizeof *days);
        log->ndays = ndays;
        if (log->n)
            memmove(log->e + old_n, log->e, log->n * sizeof *log->e);
        if (old_n)
            memcpy(log->e, old, old_n * sizeof *old);
        log->n += old_n;
        goto out;
    }
    log->old_n = log->n;
    log->bytes = 0;
    rc = 0;
out:
    free(days);
    free(old);
    return rc;
}

/* The directory holding path, fsync'd (a new file's name is durable). */
static void sync_parent(const char *path)
{
    char dir[1040];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = '\0';
    int fd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        fsync(fd);
        close(fd);
    }
}

int acct_append(acct_log *log, const acct_run *r, char *err, size_t errlen)
{
    cJSON *o = acct_run_json(r);
    char *text = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    int rc = -1;
    size_t n = text ? strlen(text) : 0;
    if (text && log->bytes + n + 1 > ACCT_FILE_MAX && log->bytes > 0 &&
        rotate(log, r->ended_at, err, errlen) != 0) {
        acct_add(log, r);
        goto out;
    }
    if (acct_add(log, r) != 0 || !text) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    text[n++] = '\n'; /* over the NUL: the line is written with its length */
    int fd = open(log->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        snprintf(err, errlen, "%s: %s", log->path, strerror(errno));
        goto out;
    }
    ssize_t w = write(fd, text, n);
    int synced = fdatasync(fd) == 0;
    close(fd);
    if (w != (ssize_t)n || !synced) {
        snprintf(err, errlen, "%s: %s", log->path, w < 0 || !synced ? strerror(errno)
                                                                    : "short write");
        /* What was written of it is a torn line: cut it off. */
        if (w > 0 && truncate(log->path, (off_t)log->bytes) != 0)
            log->bytes += (size_t)w;
        goto out;
    }
    if (log->bytes == 0)
        sync_parent(log->path);
    log->bytes += n;
    rc = 0;
out:
    free(text);
    return rc;
}

void acct_close(acct_log *log)
{
    free(log->days);
    log->days = NULL;
    log->ndays = log->capdays = 0;
    free(log->e);
    free(log->names);
    log->e = NULL;
    log->names = NULL;
    log->n = log->cap = 0;
    log->nnames = log->capnames = 0;
}

typedef struct owner_sum {
    unsigned uid;
    long runs;
    double device_s;
} owner_sum;

static int by_use(const void *a, const void *b)
{
    const owner_sum *x = a, *y = b;
    if (x->device_s != y->device_s)
        return x->device_s > y->device_s ? -1 : 1;
    return x->uid < y->uid ? -1 : x->uid > y->uid;
}

/* Whether `user` names uid: its name in the log, or the uid in digits. */
static int names_owner(const acct_log *log, unsigned uid, const char *user)
{
    const acct_name *name = name_of(log, uid);
    char digits[16];
    snprintf(digits, sizeof digits, "%u", uid);
    return strcmp(user, digits) == 0 || (name && strcmp(user, name->user) == 0);
}

cJSON *acct_history_json(const acct_log *log, const char *user, double since)
{
    owner_sum *sums = calloc((size_t)log->nnames + 1, sizeof *sums);
    if (!sums)
        return NULL;
    int nsums = 0;
    double total = 0;
    for (size_t i = 0; i < log->n; i++) {
        const acct_entry *e = &log->e[i];
        if (e->ended_at < since || (user && !names_owner(log, e->uid, user)))
            continue;
        int k = 0;
        while (k < nsums && sums[k].uid != e->uid)
            k++;
        if (k == nsums) {
            if (nsums == log->nnames + 1) /* owners past ACCT_OWNERS_MAX: one summed */
                continue;
            sums[nsums++] = (owner_sum){e->uid, 0, 0};
        }
        sums[k].runs++;
        sums[k].device_s += e->device_seconds;
        total += e->device_seconds;
    }
    for (size_t i = 0; i < log->ndays; i++) { /* a day that ends after since: whole */
        const acct_day *d = &log->days[i];
        if (d->day + 86400 <= since || (user && !names_owner(log, d->uid, user)))
            continue;
        int k = 0;
        while (k < nsums && sums[k].uid != d->uid)
            k++;
        if (k == nsums) {
            if (nsums == log->nnames + 1)
                continue;
            sums[nsums++] = (owner_sum){d->uid, 0, 0};
        }
        sums[k].runs += d->runs;
        sums[k].device_s += d->device_seconds;
        total += d->device_seconds;
    }
    qsort(sums, (size_t)nsums, sizeof *sums, by_use);
    cJSON *o = cJSON_CreateObject(), *owners = cJSON_CreateArray();
    cJSON_AddNumberToObject(o, "since", since);
    cJSON_AddItemToObject(o, "owners", owners);
    for (int k = 0; k < nsums; k++) {
        cJSON *w = cJSON_CreateObject();
        const acct_name *name = name_of(log, sums[k].uid);
        char digits[16];
        snprintf(digits, sizeof digits, "%u", sums[k].uid);
        cJSON_AddNumberToObject(w, "uid", sums[k].uid);
        cJSON_AddStringToObject(w, "user", name ? name->user : digits);
        cJSON_AddNumberToObject(w, "runs", (double)sums[k].runs);
        cJSON_AddNumberToObject(w, "device_hours", sums[k].device_s / 3600);
        cJSON_AddItemToArray(owners, w);
    }
    cJSON_AddNumberToObject(o, "total_device_hours", total / 3600);
    cJSON_AddNumberToObject(o, "skipped_lines", (double)log->skipped);
    free(sums);
    return o;
}
