/* The queue's jobs by id (jobs_impl.h): the list in submission order, linked
 * both ways so that `list` pages from the newest, and a hash of the ids so
 * that a lookup (a request's job, a dependency, a preemptor) does not walk
 * every job ever kept; and the lists of the jobs the scheduler looks at
 * (queued or running) and of those running, so that a scheduling pass
 * walks neither the ended jobs nor, for what only running jobs do, the
 * queued ones. Calls nothing of the queue's other files. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "jobs_impl.h"

static size_t id_hash(const char *id)
{
    size_t h = 2166136261u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)id; *p; p++)
        h = (h ^ *p) * 16777619u;
    return h;
}

/* Twice as many buckets once there are as many jobs as buckets; out of
 * memory, the chains just grow longer. */
static void grow(jobs *js)
{
    if (js->njobs < js->nbuckets)
        return;
    const size_t n = js->nbuckets ? js->nbuckets * 2 : 256;
    job **b = calloc(n, sizeof *b);
    if (!b)
        return;
    for (size_t k = 0; k < js->nbuckets; k++)
        for (job *j = js->buckets[k], *next; j; j = next) {
            next = j->hnext;
            const size_t at = id_hash(j->id) & (n - 1);
            j->hnext = b[at];
            b[at] = j;
        }
    free(js->buckets);
    js->buckets = b;
    js->nbuckets = n;
}

/* j in or out (`in`) of the list from *first to *last whose links are
 * j's member at offset `off`. */
static void track_set(job **first, job **last, size_t *count, job *j, size_t off, int in)
{
#define LINK(x) ((job_link *)((char *)(x) + off))
    job_link *l = LINK(j);
    if (in == l->on)
        return;
    if (in) {
        l->next = NULL;
        l->prev = *last;
        if (*last)
            LINK(*last)->next = j;
        else
            *first = j;
        *last = j;
    } else {
        if (l->prev)
            LINK(l->prev)->next = l->next;
        else
            *first = l->next;
        if (l->next)
            LINK(l->next)->prev = l->prev;
        else
            *last = l->prev;
        l->next = l->prev = NULL;
    }
    l->on = in;
    *count += in ? 1 : (size_t)-1;
#undef LINK
}

/* uid's count moved by `by`. */
static void owner_count_add(jobs *js, unsigned uid, int by)
{
    int k = 0;
    while (k < js->nowner_counts && js->owner_counts[k].uid != uid)
        k++;
    if (k == js->nowner_counts) {
        if (k == js->capowner_counts) {
            const int cap = k ? 2 * k : 16;
            struct owner_count *c = realloc(js->owner_counts, (size_t)cap * sizeof *c);
            if (!c) {
                js->owner_counts_lost = 1;
                return;
            }
            js->owner_counts = c;
            js->capowner_counts = cap;
        }
        js->owner_counts[js->nowner_counts++] = (struct owner_count){.uid = uid};
    }
    js->owner_counts[k].n += by;
}

int jobs_owner_active(const jobs *js, unsigned uid)
{
    if (js->owner_counts_lost)
        return -1;
    for (int k = 0; k < js->nowner_counts; k++)
        if (js->owner_counts[k].uid == uid)
            return js->owner_counts[k].n;
    return 0;
}

void jobs_track(jobs *js, job *j)
{
    const int linked = j->prev || js->first == j;
    const int counted = linked && !job_state_final(j->state);
    if (counted != j->counted) {
        owner_count_add(js, j->owner.uid, counted ? 1 : -1);
        j->counted = counted;
    }
    track_set(&js->active_first, &js->active_last, &js->nactive, j, offsetof(job, active),
              linked && (j->thread_running || !job_state_final(j->state)));
    track_set(&js->running_first, &js->running_last, &js->nrunning, j, offsetof(job, running),
              linked && j->thread_running);
}

void jobs_link(jobs *js, job *j)
{
    j->next = NULL;
    j->prev = js->last;
    if (js->last)
        js->last->next = j;
    else
        js->first = j;
    js->last = j;
    js->njobs++;
    grow(js);
    if (js->nbuckets) {
        const size_t at = id_hash(j->id) & (js->nbuckets - 1);
        j->hnext = js->buckets[at];
        js->buckets[at] = j;
    }
    j->seq = ++js->linked;
    jobs_track(js, j);
}

void jobs_unlink(jobs *js, job *j)
{
    if (js->nbuckets) {
        job **at = &js->buckets[id_hash(j->id) & (js->nbuckets - 1)];
        while (*at && *at != j)
            at = &(*at)->hnext;
        if (*at)
            *at = j->hnext;
    }
    if (j->prev)
        j->prev->next = j->next;
    else
        js->first = j->next;
    if (j->next)
        j->next->prev = j->prev;
    else
        js->last = j->prev;
    j->next = j->prev = j->hnext = NULL;
    js->njobs--;
    jobs_track(js, j); /* out of the scheduler's lists: no longer linked */
    js->after_epoch++;    /* a job after it is cancelled */
}

job *jobs_next(const jobs *js, const job *j) { return j ? j->next : js->first; }

job *jobs_active_next(const jobs *js, const job *j)
{
    return j ? j->active.next : js->active_first;
}

job *jobs_running_next(const jobs *js, const job *j)
{
    return j ? j->running.next : js->running_first;
}

void jobs_dependencies_changed(jobs *js) { js->after_epoch++; }

job *jobs_index_find(const jobs *js, const char *id)
{
    if (!js->nbuckets) /* none linked yet, or the first buckets could not be had */
        for (job *j = js->first; j; j = j->next)
            if (!strcmp(j->id, id))
                return j;
    for (job *j = js->nbuckets ? js->buckets[id_hash(id) & (js->nbuckets - 1)] : NULL; j;
         j = j->hnext)
        if (!strcmp(j->id, id))
            return j;
    return NULL;
}

void jobs_index_free(jobs *js)
{
    free(js->owner_counts);
    js->owner_counts = NULL;
    free(js->buckets);
    js->buckets = NULL;
    js->nbuckets = js->njobs = 0;
}
