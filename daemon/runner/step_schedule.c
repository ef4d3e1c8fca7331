/* McNaughton's wrap-around schedule of floating replicas' steps (step_schedule.h). */
#include "step_schedule.h"

#include <stdlib.h>

int step_schedule_wanted(int n, int cores, int steps)
{
    if (cores < 1 || n <= cores || steps < 1)
        return 0;
    long total = (long)n * steps, longest = (total + cores - 1) / cores;
    /* longest / (total / cores) <= 21 / 20 */
    return 20 * longest * cores <= 21 * total;
}

int step_schedule_init(step_schedule *s, int n, int cores, int steps, long first_k)
{
    *s = (step_schedule){.n = n, .cores = cores, .steps = steps, .first_k = first_k};
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->turned, NULL);
    s->parts = calloc((size_t)n, sizeof(*s->parts));
    s->nsegs = calloc((size_t)cores, sizeof(int));
    s->done = calloc((size_t)cores, sizeof(long));
    if (!s->parts || !s->nsegs || !s->done) {
        step_schedule_free(s);
        return -1;
    }
    /* Slot j runs steps bound(j) .. bound(j+1) - 1 of the sequence replica
     * 0's S steps, replica 1's, ...; every slot is at least S long (n > c),
     * so a replica spans at most two. Walking the sequence in order visits
     * each slot's turns in their order in time: a replica cut at a bound
     * ends one slot (its last steps) and starts the next (its first). */
    const long total = (long)n * steps;
    for (int r = 0, j = 0; r < n; r++) {
        long start = (long)r * steps, end = start + steps;
        while ((long)(j + 1) * total / cores <= start)
            j++;
        long bound = (long)(j + 1) * total / cores;
        if (end <= bound) {
            s->parts[r][0] = (step_segment){j, s->nsegs[j]++, 1, steps};
            continue;
        }
        int head = (int)(end - bound); /* its first steps, at slot j+1's start */
        s->parts[r][1] = (step_segment){j, s->nsegs[j]++, head + 1, steps};
        s->parts[r][0] = (step_segment){j + 1, s->nsegs[j + 1]++, 1, head};
    }
    return 0;
}

void step_schedule_free(step_schedule *s)
{
    pthread_cond_destroy(&s->turned);
    pthread_mutex_destroy(&s->lock);
    free(s->parts);
    free(s->nsegs);
    free(s->done);
    *s = (step_schedule){0};
}

static const step_segment *segment_of(const step_schedule *s, int r, int l)
{
    const step_segment *p = &s->parts[r][0];
    return l >= p->first && l <= p->last ? p : &s->parts[r][1];
}

int step_schedule_wait(step_schedule *s, int r, long k, int l)
{
    const step_segment *p = segment_of(s, r, l);
    if (l != p->first)
        return p->slot;
    const long turn = (k - s->first_k) * s->nsegs[p->slot] + p->seg;
    pthread_mutex_lock(&s->lock);
    while (s->done[p->slot] != turn && !s->aborted)
        pthread_cond_wait(&s->turned, &s->lock);
    int rc = s->aborted ? -1 : p->slot;
    pthread_mutex_unlock(&s->lock);
    return rc;
}

void step_schedule_abort(step_schedule *s)
{
    pthread_mutex_lock(&s->lock);
    s->aborted = 1;
    pthread_cond_broadcast(&s->turned);
    pthread_mutex_unlock(&s->lock);
}

void step_schedule_done(step_schedule *s, int r, int l)
{
    const step_segment *p = segment_of(s, r, l);
    if (l != p->last)
        return;
    pthread_mutex_lock(&s->lock);
    s->done[p->slot]++;
    pthread_cond_broadcast(&s->turned);
    pthread_mutex_unlock(&s->lock);
}
