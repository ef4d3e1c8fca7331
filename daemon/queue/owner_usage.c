/* Fair share's table (jobs_impl.h): each owner's device use, decayed by
 * --usage-half-life, kept in <state dir>/usage.json as of each run's end
 * and every --usage-save-interval while jobs run, so that a restarted
 * parled (or one killed) remembers who used what; and each run's use
 * appended to the accounting record (accounting.h) as it ends. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fsutil.h"
#include "jobs_impl.h"
#include "log.h"
#include "schedule.h"

/* An owner's decayed use below this many device-seconds (a millisecond:
 * about ten half-lives after a second's use), with no job in the queue, is
 * forgotten: the table holds the owners of recent jobs only. */
#define USAGE_FORGET_S 1e-3
/* usage.json holds one short entry per owner of recent jobs and one per
 * running job. */
#define USAGE_FILE_MAX (1 << 20)
#define USAGE_OWNERS_MAX 65536
#define USAGE_RUNS_MAX 4096
#define USAGE_MAX_S ACCT_DEVICE_S_MAX

double job_device_units(const jobs *js, const job *j)
{
    return acct_device_units(__builtin_popcountll(j->devices & ~DEV_CPU), j->cfg.gpu_share,
                             job_cores_wanted(js, j), js->ncores);
}

/* uid's entry (made if need be), its name set when `user` is given. */
static owner_usage *usage_entry(jobs *js, unsigned uid, const char *user)
{
    for (int i = 0; i < js->nusage; i++)
        if (js->usage[i].uid == uid) {
            if (user && strcmp(js->usage[i].user, user) != 0) /* (each pass asks: mostly same) */
                snprintf(js->usage[i].user, sizeof js->usage[i].user, "%s", user);
            return &js->usage[i];
        }
    if (js->nusage == js->capusage) {
        int cap = js->capusage ? 2 * js->capusage : 16;
        owner_usage *u = realloc(js->usage, (size_t)cap * sizeof *u);
        if (!u)
            return NULL;
        js->usage = u;
        js->capusage = cap;
    }
    owner_usage *u = &js->usage[js->nusage++];
    *u = (owner_usage){.uid = uid};
    snprintf(u->user, sizeof u->user, "%s", user ? user : "");
    return u;
}

void jobs_usage_update(jobs *js)
{
    const double now = jobs_mono_s(), wall = jobs_now_s(), half = js->limits.usage_half_life_s;
    /* Use and charges count the monotonic clock's seconds since the last
     * update; the first update since parled started decays the use by the
     * time it was stopped, the one duration that no monotonic clock spans,
     * read off the wall clock (none if that is behind usage_at). */
    const double dt = js->usage_mono > 0 && now > js->usage_mono ? now - js->usage_mono : 0;
    const double down = js->usage_mono > 0 || js->usage_at <= 0 ? 0 : fmax(0, wall - js->usage_at);
    js->usage_mono = now;
    js->usage_at = wall;
    for (int i = 0; i < js->nusage; i++)
        js->usage[i].usage = sched_usage_decay(js->usage[i].usage, dt + down, half, 0);
    for (job *j = js->active_first; j; j = j->active.next) {
        owner_usage *u = job_state_final(j->state) ? NULL
                                                   : usage_entry(js, j->owner.uid, j->owner.user);
        if (u && j->thread_running) {
            const double used = job_device_units(js, j) * dt;
            u->usage += sched_usage_decay(0, dt, half, used);
            j->run_device_s += used;
        }
    }
    for (int i = 0; i < js->nusage; i++) {
        int queued = 0;
        for (job *j = js->active_first; j && !queued; j = j->active.next)
            queued = !job_state_final(j->state) && j->owner.uid == js->usage[i].uid;
        if (!queued && js->usage[i].usage < USAGE_FORGET_S)
            js->usage[i--] = js->usage[--js->nusage];
    }
}

void owner_usage_charge(jobs *js, const job_owner *owner, double device_seconds)
{
    owner_usage *u = usage_entry(js, owner->uid, owner->user);
    if (u && device_seconds > 0)
        u->usage = fmin(u->usage + device_seconds, USAGE_MAX_S);
}

/* Job j's current run (begun at began_mono, jobs_mono_s) as the accounting
 * record holds it, ended `end` as of the last update: its start is the
 * wall clock's end less the run's monotonic length, so that a step of the
 * wall clock meanwhile changes neither its length nor its order. */
static acct_run run_record(const jobs *js, const job *j, const char *end, double began_mono)
{
    acct_run r = {.uid = j->owner.uid, .ended_at = js->usage_at > 0 ? js->usage_at : jobs_now_s()};
    const double held = began_mono > 0 && js->usage_mono > began_mono
                            ? js->usage_mono - began_mono : 0;
    snprintf(r.id, sizeof r.id, "%s", j->id);
    snprintf(r.user, sizeof r.user, "%s", j->owner.user);
    snprintf(r.end, sizeof r.end, "%s", end);
    devices_text(j->devices, r.devices, sizeof r.devices);
    if ((j->devices & DEV_CPU) && j->cfg.device_spec.cores)
        snprintf(r.devices, sizeof r.devices, "cpu:%d", j->cfg.device_spec.cores);
    r.started_at = r.ended_at - held > 0 ? r.ended_at - held : r.ended_at;
    r.device_seconds = fmin(j->run_device_s, ACCT_DEVICE_S_MAX);
    return r;
}

void jobs_usage_run_ended(jobs *js, job *j, const char *end, double began_mono)
{
    const acct_run r = run_record(js, j, end, began_mono);
    char err[1200];
    j->run_device_s = 0;
    jobs_usage_save(js); /* first: a crash between never records the run twice */
    if (acct_append(&js->acct, &r, err, sizeof err) != 0)
        server_log(LOG_WARN, "job %s: its run is not in the accounting record: %s", j->id, err);
}

void jobs_usage_save(jobs *js)
{
    cJSON *root = cJSON_CreateObject(), *owners = cJSON_AddArrayToObject(root, "owners");
    cJSON *runs = cJSON_AddArrayToObject(root, "runs");
    cJSON_AddNumberToObject(root, "usage_at", js->usage_at);
    for (int i = 0; owners && i < js->nusage; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "uid", js->usage[i].uid);
        cJSON_AddStringToObject(o, "user", js->usage[i].user);
        cJSON_AddNumberToObject(o, "device_seconds", js->usage[i].usage);
        cJSON_AddItemToArray(owners, o);
    }
    /* The runs under way, as the record would hold them had they ended now:
     * a start after a kill records them "interrupted". */
    for (const job *j = js->first; runs && j; j = j->next)
        if (j->thread_running && j->run_device_s > 0) {
            const acct_run r = run_record(js, j, "interrupted", j->run_began_mono);
            cJSON_AddItemToArray(runs, acct_run_json(&r));
        }
    char err[256];
    char *text = owners && runs ? cJSON_PrintUnformatted(root) : NULL;
    if (!text)
        server_log(LOG_WARN, "%s: out of memory; fair share not saved", js->usage_path);
    else if (atomic_write_file(js->usage_path, text, strlen(text), err, sizeof err) != 0)
        server_log(LOG_WARN, "fair share not saved: %s", err);
    free(text);
    cJSON_Delete(root);
}

/* The runs under way when usage.json was written (a kill of parled ended
 * them): each validated into *runs (malloc'd, *nruns). 0, or -1 with why. */
static int runs_read(const cJSON *root, acct_run **runs, int *nruns, char *why, size_t whylen)
{
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(root, "runs");
    *runs = NULL;
    *nruns = 0;
    if (!list)
        return 0; /* written before runs were kept */
    if (!cJSON_IsArray(list) || cJSON_GetArraySize(list) > USAGE_RUNS_MAX) {
        snprintf(why, whylen, "runs: must be an array of at most %d runs", USAGE_RUNS_MAX);
        return -1;
    }
    const int n = cJSON_GetArraySize(list);
    if (n == 0)
        return 0;
    if (!(*runs = calloc((size_t)n, sizeof **runs))) {
        snprintf(why, whylen, "out of memory");
        return -1;
    }
    for (const cJSON *o = list->child; o; o = o->next, (*nruns)++) {
        char what[200];
        if (acct_run_from_json(o, &(*runs)[*nruns], what, sizeof what) != 0) {
            snprintf(why, whylen, "runs[%d].%s", *nruns, what);
            return -1;
        }
    }
    return 0;
}

/* The table as usage.json holds it: 0, or -1 with what is wrong in `why`. */
static int usage_read(jobs *js, const cJSON *root, char *why, size_t whylen)
{
    const cJSON *at = cJSON_GetObjectItemCaseSensitive(root, "usage_at");
    const cJSON *owners = cJSON_GetObjectItemCaseSensitive(root, "owners");
    if (!cJSON_IsNumber(at) || !isfinite(at->valuedouble) || at->valuedouble < 0) {
        snprintf(why, whylen, "usage_at: must be a time (unix seconds)");
        return -1;
    }
    if (!cJSON_IsArray(owners) || cJSON_GetArraySize(owners) > USAGE_OWNERS_MAX) {
        snprintf(why, whylen, "owners: must be an array of at most %d owners", USAGE_OWNERS_MAX);
        return -1;
    }
    int k = 0;
    for (const cJSON *o = owners->child; o; o = o->next, k++) {
        const cJSON *uid = cJSON_GetObjectItemCaseSensitive(o, "uid");
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(o, "device_seconds");
        if (!cJSON_IsNumber(uid) || uid->valuedouble < 0 || uid->valuedouble >= 4294967295.0 ||
            uid->valuedouble != floor(uid->valuedouble)) {
            snprintf(why, whylen, "owners[%d].uid: must be a user id", k);
            return -1;
        }
        if (!cJSON_IsNumber(s) || !(s->valuedouble >= 0 && s->valuedouble <= USAGE_MAX_S)) {
            snprintf(why, whylen, "owners[%d].device_seconds: must be in 0..%g", k, USAGE_MAX_S);
            return -1;
        }
        const cJSON *user = cJSON_GetObjectItemCaseSensitive(o, "user");
        if (user && (!cJSON_IsString(user) || strlen(user->valuestring) >= sizeof js->usage->user)) {
            snprintf(why, whylen, "owners[%d].user: must be a name of at most %zu bytes", k,
                     sizeof js->usage->user - 1);
            return -1;
        }
        owner_usage *u = usage_entry(js, (unsigned)uid->valuedouble,
                                     user ? user->valuestring : NULL);
        if (!u) {
            snprintf(why, whylen, "out of memory");
            return -1;
        }
        u->usage = s->valuedouble;
    }
    js->usage_at = at->valuedouble;
    js->usage_mono = 0; /* the next update is the first since the start */
    return 0;
}

void jobs_usage_load(jobs *js, const char *state_dir)
{
    snprintf(js->usage_path, sizeof js->usage_path, "%s/usage.json", state_dir);
    char err[1200];
    if (acct_open(&js->acct, state_dir, err, sizeof err) != 0)
        server_log(LOG_WARN, "the accounting record: %s", err);
    if (js->acct.skipped)
        server_log(LOG_WARN, "the accounting record: %ld bad line(s) skipped (the first: %s)",
                   js->acct.skipped, js->acct.first_bad);
    size_t len;
    char *text = read_file_text(js->usage_path, USAGE_FILE_MAX, &len, err, sizeof err);
    if (!text) {
        if (errno != ENOENT)
            server_log(LOG_WARN, "fair share starts from nothing: %s", err);
        return;
    }
    cJSON *root = cJSON_ParseWithLength(text, len);
    char why[240] = "not JSON";
    acct_run *runs = NULL;
    int nruns = 0;
    if (!cJSON_IsObject(root) || usage_read(js, root, why, sizeof why) != 0 ||
        runs_read(root, &runs, &nruns, why, sizeof why) != 0) {
        server_log(LOG_WARN, "fair share starts from nothing: %s: %s", js->usage_path, why);
        js->nusage = 0;
        nruns = 0;
    }
    for (int k = 0; k < nruns; k++)
        if (acct_append(&js->acct, &runs[k], err, sizeof err) != 0)
            server_log(LOG_WARN, "job %s: its interrupted run is not in the accounting record: "
                       "%s", runs[k].id, err);
    if (nruns > 0)
        jobs_usage_save(js); /* recorded once: the next start finds them no more */
    free(runs);
    cJSON_Delete(root);
    free(text);
}

static void on_usage_save(uv_timer_t *t)
{
    jobs *js = t->data;
    if (js->running == 0)
        return;
    jobs_usage_update(js);
    jobs_usage_save(js);
}

void jobs_usage_init(jobs *js)
{
    uv_timer_init(js->loop, &js->usage_save);
    js->usage_save.data = js;
}

void jobs_usage_start(jobs *js)
{
    const double s = js->limits.usage_save_s > 0 ? js->limits.usage_save_s : 60;
    const uint64_t ms = (uint64_t)(s * 1000);
    uv_timer_start(&js->usage_save, on_usage_save, ms, ms);
}

static int by_usage(const void *a, const void *b)
{
    const owner_usage *x = a, *y = b;
    if (x->usage != y->usage)
        return x->usage > y->usage ? -1 : 1;
    return x->uid < y->uid ? -1 : x->uid > y->uid;
}

cJSON *jobs_usage_json(jobs *js)
{
    jobs_usage_update(js);
    qsort(js->usage, (size_t)js->nusage, sizeof *js->usage, by_usage);
    double total = 0;
    for (int i = 0; i < js->nusage; i++)
        total += js->usage[i].usage;
    cJSON *o = cJSON_CreateObject(), *owners = cJSON_CreateArray();
    cJSON_AddNumberToObject(o, "half_life_s", js->limits.usage_half_life_s);
    cJSON_AddNumberToObject(o, "usage_at", js->usage_at);
    cJSON_AddItemToObject(o, "owners", owners);
    for (int i = 0; i < js->nusage; i++) {
        const owner_usage *u = &js->usage[i];
        int running = 0, queued = 0;
        for (const job *j = js->first; j; j = j->next)
            if (j->owner.uid == u->uid && !job_state_final(j->state)) {
                running += j->thread_running;
                queued += !j->thread_running;
            }
        char digits[16];
        snprintf(digits, sizeof digits, "%u", u->uid);
        cJSON *w = cJSON_CreateObject();
        cJSON_AddNumberToObject(w, "uid", u->uid);
        cJSON_AddStringToObject(w, "user", u->user[0] ? u->user : digits);
        cJSON_AddNumberToObject(w, "device_seconds", u->usage);
        cJSON_AddNumberToObject(w, "share", total > 0 ? u->usage / total : 0);
        cJSON_AddNumberToObject(w, "running", running);
        cJSON_AddNumberToObject(w, "queued", queued);
        cJSON_AddItemToArray(owners, w);
    }
    return o;
}

cJSON *jobs_history_json(const jobs *js, const char *user, double since)
{
    return acct_history_json(&js->acct, user, since);
}
