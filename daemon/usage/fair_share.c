/* Fair share's table (fair_share.h): owners' decayed device use, and what
 * usage.json holds of it. */
#include "fair_share.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule.h"

owner_usage *fair_share_entry(fair_share_table *t, unsigned uid, const char *user)
{
    for (int i = 0; i < t->n; i++)
        if (t->owners[i].uid == uid) {
            if (user && strcmp(t->owners[i].user, user) != 0) /* (each pass asks: mostly same) */
                snprintf(t->owners[i].user, sizeof t->owners[i].user, "%s", user);
            return &t->owners[i];
        }
    if (t->n == t->cap) {
        int cap = t->cap ? 2 * t->cap : 16;
        owner_usage *u = realloc(t->owners, (size_t)cap * sizeof *u);
        if (!u)
            return NULL;
        t->owners = u;
        t->cap = cap;
    }
    owner_usage *u = &t->owners[t->n++];
    *u = (owner_usage){.uid = uid};
    snprintf(u->user, sizeof u->user, "%s", user ? user : "");
    return u;
}

double fair_share_of(const fair_share_table *t, unsigned uid)
{
    for (int i = 0; i < t->n; i++)
        if (t->owners[i].uid == uid)
            return t->owners[i].usage;
    return 0;
}

double fair_share_decay(fair_share_table *t, double now, double wall, double half)
{
    /* Use and charges count the monotonic clock's seconds since the last
     * update; the first update since parled started decays the use by the
     * time it was stopped, the one duration that no monotonic clock spans,
     * read off the wall clock (none if that is behind usage_at). */
    const double dt = t->usage_mono > 0 && now > t->usage_mono ? now - t->usage_mono : 0;
    const double down = t->usage_mono > 0 || t->usage_at <= 0 ? 0 : fmax(0, wall - t->usage_at);
    t->usage_mono = now;
    t->usage_at = wall;
    for (int i = 0; i < t->n; i++)
        t->owners[i].usage = sched_usage_decay(t->owners[i].usage, dt + down, half, 0);
    return dt;
}

void fair_share_add(owner_usage *u, double dt, double half, double used)
{
    u->usage += sched_usage_decay(0, dt, half, used);
}

void fair_share_charge(fair_share_table *t, unsigned uid, const char *user, double device_seconds)
{
    owner_usage *u = fair_share_entry(t, uid, user);
    if (u && device_seconds > 0)
        u->usage = fmin(u->usage + device_seconds, USAGE_MAX_S);
}

void fair_share_drop(fair_share_table *t, int i)
{
    t->owners[i] = t->owners[--t->n];
}

static int by_usage(const void *a, const void *b)
{
    const owner_usage *x = a, *y = b;
    if (x->usage != y->usage)
        return x->usage > y->usage ? -1 : 1;
    return x->uid < y->uid ? -1 : x->uid > y->uid;
}

void fair_share_rank(fair_share_table *t)
{
    qsort(t->owners, (size_t)t->n, sizeof *t->owners, by_usage);
}

cJSON *fair_share_json(const fair_share_table *t, cJSON *runs)
{
    cJSON *root = cJSON_CreateObject(), *owners = cJSON_AddArrayToObject(root, "owners");
    if (!owners || !runs) {
        cJSON_Delete(runs);
        cJSON_Delete(root);
        return NULL;
    }
    cJSON_AddItemToObject(root, "runs", runs);
    cJSON_AddNumberToObject(root, "usage_at", t->usage_at);
    for (int i = 0; i < t->n; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "uid", t->owners[i].uid);
        cJSON_AddStringToObject(o, "user", t->owners[i].user);
        cJSON_AddNumberToObject(o, "device_seconds", t->owners[i].usage);
        cJSON_AddItemToArray(owners, o);
    }
    return root;
}

int fair_share_runs_read(const cJSON *root, acct_run **runs, int *nruns, char *why, size_t whylen)
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

int fair_share_read(fair_share_table *t, const cJSON *root, char *why, size_t whylen)
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
        if (user &&
            (!cJSON_IsString(user) || strlen(user->valuestring) >= sizeof t->owners->user)) {
            snprintf(why, whylen, "owners[%d].user: must be a name of at most %zu bytes", k,
                     sizeof t->owners->user - 1);
            return -1;
        }
        owner_usage *u = fair_share_entry(t, (unsigned)uid->valuedouble,
                                          user ? user->valuestring : NULL);
        if (!u) {
            snprintf(why, whylen, "out of memory");
            return -1;
        }
        u->usage = s->valuedouble;
    }
    t->usage_at = at->valuedouble;
    t->usage_mono = 0; /* the next update is the first since the start */
    return 0;
}

void fair_share_free(fair_share_table *t)
{
    free(t->owners);
    *t = (fair_share_table){0};
}
