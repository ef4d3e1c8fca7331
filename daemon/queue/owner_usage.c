/* Fair share's table (owner_usage.h): each owner's device use, decayed by
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

#include "fair_share.h"
#include "fsutil.h"
#include "jobs_store.h"
#include "owner_usage.h"
#include "log.h"

/* An owner's decayed use below this many device-seconds (a nanosecond:
 * about thirty half-lives after a second's use), with no job in the queue,
 * is forgotten: the table holds the owners of recent jobs only. Not more:
 * a preemption asked and withdrawn within one turn of the loop is charged
 * microseconds, and asking and cancelling must never come out free. */
#define USAGE_FORGET_S 1e-9

double job_device_units(const jobs *js, const job *j)
{
    return acct_device_units(__builtin_popcountll(job_device_mask(j) & ~DEV_CPU),
                             job_config_of(j)->gpu_share, job_cores_wanted(js, j), jobs_ncores(js));
}

double owner_usage_of(const jobs *js, unsigned uid)
{
    return fair_share_of(&fair_state(js)->share, uid);
}

void jobs_usage_update(jobs *js)
{
    struct jobs_fair *fs = fair_state(js);
    const double half = jobs_limits_of(js)->usage_half_life_s;
    fair_share_table *t = &fs->share;
    const double dt = fair_share_decay(t, jobs_mono_s(), jobs_now_s(), half);
    for (job *j = jobs_active_next(js, NULL); j; j = jobs_active_next(js, j)) {
        const job_owner *owner = job_owner_of(j);
        owner_usage *u = NULL;
        if (!job_state_final(job_state_of(j)))
            u = fair_share_entry(t, owner->uid, owner->user);
        if (u && job_thread_running(j)) {
            const double used = job_device_units(js, j) * dt;
            fair_share_add(u, dt, half, used);
            fair_of(j)->run_device_s += used;
        }
    }
    for (int i = 0; i < fs->share.n; i++) {
        int queued = 0;
        for (job *j = jobs_active_next(js, NULL); j && !queued; j = jobs_active_next(js, j))
            queued = !job_state_final(job_state_of(j)) &&
                     job_owner_of(j)->uid == fs->share.owners[i].uid;
        if (!queued && fs->share.owners[i].usage < USAGE_FORGET_S)
            fair_share_drop(&fs->share, i--);
    }
}

void owner_usage_charge(jobs *js, const job_owner *owner, double device_seconds)
{
    fair_share_charge(&fair_state(js)->share, owner->uid, owner->user, device_seconds);
}

/* Job j's current run (begun at began_mono, jobs_mono_s) as the accounting
 * record holds it, ended `end` as of the last update: its start is the
 * wall clock's end less the run's monotonic length, so that a step of the
 * wall clock meanwhile changes neither its length nor its order. */
static acct_run run_record(const jobs *js, const job *j, const char *end, double began_mono)
{
    const struct jobs_fair *fs = fair_state(js);
    const double at = fs->share.usage_at;
    acct_run r = {.uid = job_owner_of(j)->uid, .ended_at = at > 0 ? at : jobs_now_s()};
    const double held = began_mono > 0 && fs->share.usage_mono > began_mono
                            ? fs->share.usage_mono - began_mono : 0;
    snprintf(r.id, sizeof r.id, "%s", job_id(j));
    snprintf(r.user, sizeof r.user, "%s", job_owner_of(j)->user);
    snprintf(r.end, sizeof r.end, "%s", end);
    devices_text(job_device_mask(j), r.devices, sizeof r.devices);
    if ((job_device_mask(j) & DEV_CPU) && job_config_of(j)->device_spec.cores)
        snprintf(r.devices, sizeof r.devices, "cpu:%d", job_config_of(j)->device_spec.cores);
    r.started_at = r.ended_at - held > 0 ? r.ended_at - held : r.ended_at;
    r.device_seconds = fmin(fair_of(j)->run_device_s, ACCT_DEVICE_S_MAX);
    return r;
}

void jobs_usage_run_ended(jobs *js, job *j, const char *end, double began_mono)
{
    const acct_run r = run_record(js, j, end, began_mono);
    char err[1200];
    fair_of(j)->run_device_s = 0;
    jobs_usage_save(js); /* first: a crash between never records the run twice */
    if (acct_append(&fair_state(js)->acct, &r, err, sizeof err) != 0)
        server_log(LOG_WARN, "job %s: its run is not in the accounting record: %s", job_id(j), err);
}

void jobs_usage_save(jobs *js)
{
    struct jobs_fair *fs = fair_state(js);
    cJSON *runs = cJSON_CreateArray();
    /* The runs under way, as the record would hold them had they ended now:
     * a start after a kill records them "interrupted". */
    for (const job *j = jobs_next(js, NULL); runs && j; j = jobs_next(js, j))
        if (job_thread_running(j) && fair_of(j)->run_device_s > 0) {
            const acct_run r = run_record(js, j, "interrupted", job_run_began_mono(j));
            cJSON_AddItemToArray(runs, acct_run_json(&r));
        }
    cJSON *root = fair_share_json(&fs->share, runs);
    char err[256];
    char *text = root ? cJSON_PrintUnformatted(root) : NULL;
    if (!text)
        server_log(LOG_WARN, "%s: out of memory; fair share not saved", fs->usage_path);
    else if (atomic_write_file(fs->usage_path, text, strlen(text), err,
                               sizeof err) != 0)
        server_log(LOG_WARN, "fair share not saved: %s", err);
    free(text);
    cJSON_Delete(root);
}

void jobs_usage_load(jobs *js, const char *state_dir)
{
    struct jobs_fair *fs = fair_state(js);
    snprintf(fs->usage_path, sizeof fs->usage_path, "%s/usage.json",
             state_dir);
    char err[1200];
    if (acct_open(&fs->acct, state_dir, err, sizeof err) != 0)
        server_log(LOG_WARN, "the accounting record: %s", err);
    if (fs->acct.skipped)
        server_log(LOG_WARN, "the accounting record: %ld bad line(s) skipped (the first: %s)",
                   fs->acct.skipped, fs->acct.first_bad);
    size_t len;
    char *text = read_file_text(fs->usage_path, USAGE_FILE_MAX, &len, err, sizeof err);
    if (!text) {
        if (errno != ENOENT)
            server_log(LOG_WARN, "fair share starts from nothing: %s", err);
        return;
    }
    cJSON *root = cJSON_ParseWithLength(text, len);
    char why[240] = "not JSON";
    acct_run *runs = NULL;
    int nruns = 0;
    if (!cJSON_IsObject(root) ||
        fair_share_read(&fs->share, root, why, sizeof why) != 0 ||
        fair_share_runs_read(root, &runs, &nruns, why, sizeof why) != 0) {
        server_log(LOG_WARN, "fair share starts from nothing: %s: %s", fs->usage_path,
                   why);
        fs->share.n = 0;
        nruns = 0;
    }
    for (int k = 0; k < nruns; k++)
        if (acct_append(&fs->acct, &runs[k], err, sizeof err) != 0)
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
    if (jobs_running(js) == 0)
        return;
    jobs_usage_update(js);
    jobs_usage_save(js);
}

void jobs_usage_init(jobs *js)
{
    uv_timer_init(jobs_loop(js), &fair_state(js)->usage_save);
    fair_state(js)->usage_save.data = js;
}

void jobs_usage_start(jobs *js)
{
    const double s = jobs_limits_of(js)->usage_save_s > 0 ? jobs_limits_of(js)->usage_save_s : 60;
    const uint64_t ms = (uint64_t)(s * 1000);
    uv_timer_start(&fair_state(js)->usage_save, on_usage_save, ms, ms);
}

cJSON *jobs_usage_json(jobs *js)
{
    struct jobs_fair *fs = fair_state(js);
    jobs_usage_update(js);
    fair_share_rank(&fs->share);
    double total = 0;
    for (int i = 0; i < fs->share.n; i++)
        total += fs->share.owners[i].usage;
    cJSON *o = cJSON_CreateObject(), *owners = cJSON_CreateArray();
    cJSON_AddNumberToObject(o, "half_life_s", jobs_limits_of(js)->usage_half_life_s);
    cJSON_AddNumberToObject(o, "usage_at", fs->share.usage_at);
    cJSON_AddItemToObject(o, "owners", owners);
    for (int i = 0; i < fs->share.n; i++) {
        const owner_usage *u = &fs->share.owners[i];
        int running = 0, queued = 0;
        for (const job *j = jobs_next(js, NULL); j; j = jobs_next(js, j))
            if (job_owner_of(j)->uid == u->uid && !job_state_final(job_state_of(j))) {
                running += job_thread_running(j);
                queued += !job_thread_running(j);
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
    return acct_history_json(&fair_state(js)->acct, user, since);
}
