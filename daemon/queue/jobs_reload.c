/* Reloading the state dir at start (jobs_impl.h; docs/architecture.md):
 * every job directory read back, ended jobs with their results, queued ones
 * in their order, a job that was running queued first to resume. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "file_tree.h"
#include "fsutil.h"
#include "jobs_impl.h"
#include "log.h"
#include "jobfile.h"

double status_number(const cJSON *st, const char *key, double missing)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(st, key);
    return cJSON_IsNumber(v) && isfinite(v->valuedouble) ? v->valuedouble : missing;
}

/* A count of status.json (epoch, step): 0 if absent, -1 if out of range. */
static long status_count(const cJSON *st, const char *key)
{
    double v = status_number(st, key, 0);
    return v >= 0 && v < 1e15 ? (long)v : -1;
}

/* The owner a status.json or sweep.json names; a job from before owners
 * were recorded, or one whose record is damaged, is root's: only root and
 * the admin group may then act on it. */
void owner_from_json(job_owner *owner, const cJSON *o)
{
    const double uid = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, "uid"));
    const double gid = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(o, "gid"));
    const char *user = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, "user"));
    int ok = uid >= 0 && uid <= UINT32_MAX && uid == (unsigned)uid && gid >= 0 &&
             gid <= UINT32_MAX && gid == (unsigned)gid && user && *user &&
             strlen(user) < sizeof owner->user;
    for (const char *c = user; ok && *c; c++)
        ok = *c > 0x20 && *c < 0x7f;
    if (ok) {
        owner->uid = (unsigned)uid;
        owner->gid = (unsigned)gid;
        snprintf(owner->user, sizeof owner->user, "%s", user);
    } else {
        *owner = (job_owner){.uid = 0, .gid = 0, .user = "root"};
    }
}

/* Fill j from its status.json: state, error, times and last values. */
static int restore_status(job *j, const char *text, size_t len, char *err, size_t errlen)
{
    cJSON *st = cJSON_ParseWithLength(text, len);
    const char *state = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(st, "state"));
    /* A queued job may be shown under another word ("held", "preempted":
     * job_shown_state). */
    int s = 0;
    if (state && j->js->hooks.queued_word(state))
        s = JOB_QUEUED;
    else
        while (state && s < JOB_STATES && strcmp(state, job_state_name((enum job_state)s)) != 0)
            s++;
    long epoch = status_count(st, "epoch"), step = status_count(st, "step");
    if (!cJSON_IsObject(st) || !state || s >= JOB_STATES || epoch < 0 || epoch > INT32_MAX ||
        step < 0) {
        snprintf(err, errlen, "status.json: %s", !st ? "not valid JSON"
                 : !state || s >= JOB_STATES ? "no valid \"state\"" : "bad epoch or step");
        cJSON_Delete(st);
        return -1;
    }
    j->state = (enum job_state)s;
    owner_from_json(&j->owner, cJSON_GetObjectItemCaseSensitive(st, "owner"));
    j->js->hooks.restore(j, st, state); /* the modules' fields: scheduling */
    j->js->client.restore(j->js->client.self, j, st); /* a sweep's tag */
    const char *error = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(st, "error"));
    snprintf(j->error, sizeof(j->error), "%s", error ? error : "");
    j->submitted_at = status_number(st, "submitted_at", 0);
    j->started_at = status_number(st, "started_at", 0);
    j->ended_at = status_number(st, "ended_at", 0);
    /* Its age so far (--keep-ended) read off the wall clock, the one clock
     * that spans a restart (none if the clock is behind ended_at). */
    j->ended_mono = jobs_mono_s() - fmax(0, jobs_now_s() - j->ended_at);
    /* Its age for --oldest-first-after, in seconds (a duration, not a time);
     * if it was eligible as of that write (eligible_as_of), the time since
     * then, read off the wall clock like ended_mono's. */
    const double as_of = status_number(st, "eligible_as_of", 0);
    const double eligible = status_number(st, "eligible_s", 0) +
                            (as_of > 0 ? fmax(0, jobs_now_s() - as_of) : 0);
    j->eligible_s = eligible > 0 && eligible < 1e10 ? eligible : 0; /* NAN: 0 */
    j->elapsed_base = status_number(st, "elapsed_s", 0);
    j->test_error = status_number(st, "test_error", NAN);
    j->test_loss = status_number(st, "test_loss", NAN);
    j->last.epoch = (int)epoch;
    j->last.epochs = j->cfg.epochs;
    j->last.step = step;
    j->last.data_passes = status_number(st, "data_passes", 0);
    j->last.train_loss = status_number(st, "train_loss", NAN);
    j->last.lr = status_number(st, "lr", NAN);
    j->last.reseeds = (long)status_number(st, "reseeds", 0);
    const cJSON *mem = cJSON_GetObjectItemCaseSensitive(st, "memory_bytes");
    char *mem_text = cJSON_IsObject(mem) ? cJSON_PrintUnformatted(mem) : NULL;
    if (mem_text && strlen(mem_text) < sizeof j->memory)
        strcpy(j->memory, mem_text);
    free(mem_text);
    cJSON_Delete(st);
    return 0;
}

/* Rebuild job `name` from <jobs_dir>/<name>/{job.json,status.json}. */
static job *load_job(jobs *js, const char *name, char *err, size_t errlen)
{
    job *j = job_new(js);
    if (!j) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    snprintf(j->id, sizeof(j->id), "%s", name);
    snprintf(j->dir, sizeof(j->dir), "%s/%s", js->jobs_dir, name);
    char path[1200], why[JOB_ERR_MAX];
    size_t len;
    job_file_path(j, "job.json", path, sizeof(path));
    char *text = read_file_text(path, JOB_FILE_MAX, &len, err, errlen);
    if (!text)
        goto fail;
    int rc = job_config_parse(text, len, &j->cfg, why, sizeof(why));
    free(text);
    if (rc != 0) {
        snprintf(err, errlen, "job.json: %.2000s", why);
        goto fail;
    }
    /* As submitted; requeue() checks it against the daemon's devices now. */
    const job_device_spec *spec = &j->cfg.device_spec;
    if (job_devices_resolve(spec, j->cfg.devices, j->js->devices, DEVICES_OF_DAEMON, &j->devices,
                            why, sizeof(why)) != 0 &&
        job_devices_resolve(spec, j->cfg.devices, ~0ull, DEVICES_OF_DAEMON, &j->devices, why,
                            sizeof(why)) != 0) {
        snprintf(err, errlen, "job.json: devices: %.2000s", why);
        goto fail;
    }
    job_file_path(j, "status.json", path, sizeof(path));
    if (!(text = read_file_text(path, JOB_FILE_MAX, &len, err, errlen)))
        goto fail;
    rc = restore_status(j, text, len, err, errlen);
    free(text);
    if (rc != 0)
        goto fail;
    return j;
fail:
    free(j);
    return NULL;
}

/* A reloaded job that has not ended: reopen its log and queue it again. One
 * that ever started was interrupted by a daemon stop: it goes first and
 * resumes. One whose devices the daemon no longer has fails. */
static void requeue(jobs *js, job *j)
{
    char why[1400];
    if (job_log_start(j, why, sizeof why) != 0)
        server_log(LOG_WARN, "job %s: its log: %s", j->id, why);
    const int was_running = j->state == JOB_RUNNING;
    j->state = JOB_QUEUED;
    j->interrupted = j->started_at > 0;
    js->hooks.requeued_at_reload(j, was_running);
    if (was_running)
        job_log(j, "parled restarted while the job ran: it resumes from its newest complete "
                "checkpoint");
    if (job_devices_now(js, j, j->error, sizeof j->error) == 0) {
        write_status(j);
        return;
    }
    job_log(j, "failed: %s", j->error);
    set_state(j, JOB_FAILED);
    job_log_stop(j);
}

/* Reload every job under jobs/, in submission (id) order. A directory that
 * cannot be read is reported and skipped; its id is still never reused. */
/* A job folder without status.json is one parled died making (job_commit
 * writes it last, before anyone is told of the job; a sweep queues its
 * missing jobs again at reload): removed, so that no restart trips on it. */
static int half_made(jobs *js, const char *name)
{
    char path[1200], why[1400];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s/status.json", js->jobs_dir, name);
    if (lstat(path, &st) == 0 || errno != ENOENT)
        return 0;
    snprintf(path, sizeof path, "%s/%s", js->jobs_dir, name);
    if (remove_tree(path, why, sizeof why) == 0)
        server_log(LOG_WARN, "removed %s: parled stopped while it queued that job (no "
                   "status.json)", path);
    else
        server_log(LOG_WARN, "could not remove the half-made job folder %s", why);
    return 1;
}

int jobs_reload(jobs *js, char *err, size_t errlen)
{
    char **names;
    size_t n;
    if (numbered_dirs(js->jobs_dir, 'j', &names, &n, &js->next_id, err, errlen) != 0)
        return -1;
    int counts[JOB_STATES] = {0}, skipped = 0, interrupted = 0;
    for (size_t i = 0; i < n; i++) {
        char why[JOB_ERR_MAX];
        if (half_made(js, names[i]))
            continue;
        job *j = load_job(js, names[i], why, sizeof(why));
        if (!j) {
            server_log(LOG_WARN, "skipping job %s: %s", names[i], why);
            skipped++;
            continue;
        }
        jobs_link(js, j);
        if (!job_state_final(j->state))
            requeue(js, j);
        counts[j->state]++;
        interrupted += j->interrupted;
    }
    numbered_dirs_free(names, n);
    if (n > 0)
        server_log(LOG_INFO, "reloaded %zu job(s): %d queued (%d of them interrupted, to resume), "
                   "%d done, %d failed, %d cancelled, %d timeout, %d unreadable and skipped",
                   n - (size_t)skipped, counts[JOB_QUEUED], interrupted, counts[JOB_DONE],
                   counts[JOB_FAILED], counts[JOB_CANCELLED], counts[JOB_TIMEOUT], skipped);
    return 0;
}
