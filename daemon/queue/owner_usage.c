/* Fair share's table (jobs_impl.h): each owner's device use, decayed by
 * --usage-half-life, kept in <state dir>/usage.json as of each job's end so
 * that a restarted parled (or one killed) remembers who used what. */
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
/* usage.json holds one short entry per owner of recent jobs. */
#define USAGE_FILE_MAX (1 << 20)
#define USAGE_OWNERS_MAX 65536
/* Device-seconds: a century of 64 devices bounds any real figure. */
#define USAGE_MAX_S 2e11

/* The whole CPU counts as one device, as a GPU does. */
static double device_units(const job *j)
{
    return __builtin_popcountll(j->devices & ~DEV_CPU) + ((j->devices & DEV_CPU) ? 1 : 0);
}

static owner_usage *usage_entry(jobs *js, unsigned uid)
{
    for (int i = 0; i < js->nusage; i++)
        if (js->usage[i].uid == uid)
            return &js->usage[i];
    if (js->nusage == js->capusage) {
        int cap = js->capusage ? 2 * js->capusage : 16;
        owner_usage *u = realloc(js->usage, (size_t)cap * sizeof *u);
        if (!u)
            return NULL;
        js->usage = u;
        js->capusage = cap;
    }
    js->usage[js->nusage] = (owner_usage){uid, 0.0};
    return &js->usage[js->nusage++];
}

double owner_usage_of(const jobs *js, unsigned uid)
{
    for (int i = 0; i < js->nusage; i++)
        if (js->usage[i].uid == uid)
            return js->usage[i].usage;
    return 0.0;
}

void jobs_usage_update(jobs *js)
{
    const double now = jobs_now_s(), half = js->limits.usage_half_life_s;
    const double dt = js->usage_at > 0 && now > js->usage_at ? now - js->usage_at : 0;
    js->usage_at = now;
    for (int i = 0; i < js->nusage; i++)
        js->usage[i].usage = sched_usage_decay(js->usage[i].usage, dt, half, 0);
    for (job *j = js->first; j; j = j->next) {
        owner_usage *u = job_state_final(j->state) ? NULL : usage_entry(js, j->owner.uid);
        if (u && j->thread_running)
            u->usage += sched_usage_decay(0, dt, half, device_units(j) * dt);
    }
    for (int i = 0; i < js->nusage; i++) {
        int queued = 0;
        for (job *j = js->first; j && !queued; j = j->next)
            queued = !job_state_final(j->state) && j->owner.uid == js->usage[i].uid;
        if (!queued && js->usage[i].usage < USAGE_FORGET_S)
            js->usage[i--] = js->usage[--js->nusage];
    }
}

void jobs_usage_save(jobs *js)
{
    cJSON *root = cJSON_CreateObject(), *owners = cJSON_AddArrayToObject(root, "owners");
    cJSON_AddNumberToObject(root, "usage_at", js->usage_at);
    for (int i = 0; owners && i < js->nusage; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "uid", js->usage[i].uid);
        cJSON_AddNumberToObject(o, "device_seconds", js->usage[i].usage);
        cJSON_AddItemToArray(owners, o);
    }
    char err[256];
    char *text = owners ? cJSON_PrintUnformatted(root) : NULL;
    if (!text)
        server_log(LOG_WARN, "%s: out of memory; fair share not saved", js->usage_path);
    else if (atomic_write_file(js->usage_path, text, strlen(text), err, sizeof err) != 0)
        server_log(LOG_WARN, "fair share not saved: %s", err);
    free(text);
    cJSON_Delete(root);
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
        owner_usage *u = usage_entry(js, (unsigned)uid->valuedouble);
        if (!u) {
            snprintf(why, whylen, "out of memory");
            return -1;
        }
        u->usage = s->valuedouble;
    }
    js->usage_at = at->valuedouble;
    return 0;
}

void jobs_usage_load(jobs *js, const char *state_dir)
{
    snprintf(js->usage_path, sizeof js->usage_path, "%s/usage.json", state_dir);
    char err[1200];
    size_t len;
    char *text = read_file_text(js->usage_path, USAGE_FILE_MAX, &len, err, sizeof err);
    if (!text) {
        if (errno != ENOENT)
            server_log(LOG_WARN, "fair share starts from nothing: %s", err);
        return;
    }
    cJSON *root = cJSON_ParseWithLength(text, len);
    char why[160] = "not JSON";
    if (!cJSON_IsObject(root) || usage_read(js, root, why, sizeof why) != 0) {
        server_log(LOG_WARN, "fair share starts from nothing: %s: %s", js->usage_path, why);
        js->nusage = 0;
    }
    cJSON_Delete(root);
    free(text);
}
