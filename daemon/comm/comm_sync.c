/* A comm's clock, barrier and abort (comm.h), and the count of replicas in
 * a net operation (comm_impl.h): what every path of the comm waits and
 * fails with. comm.c, its GPU path (comm_gpu.c) and the peer operations
 * call these; they call nothing of the comm. */
#include "comm.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "comm_impl.h"

double comm_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void comm_abort(comm *c, const char *fmt, ...)
{
    pthread_mutex_lock(&c->lock);
    if (!c->aborted) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->reason, sizeof c->reason, fmt, ap);
        va_end(ap);
        c->aborted = 1;
        pthread_cond_broadcast(&c->wake);
    }
    pthread_mutex_unlock(&c->lock);
}

int comm_aborted(comm *c)
{
    pthread_mutex_lock(&c->lock);
    int a = c->aborted;
    pthread_mutex_unlock(&c->lock);
    return a;
}

const char *comm_abort_reason(comm *c) { return c->reason; }

int comm_barrier(comm *c, int rank, const char *what)
{
    pthread_mutex_lock(&c->lock);
    if (c->aborted) {
        pthread_mutex_unlock(&c->lock);
        return -1;
    }
    if (++c->arrived == c->n) {
        c->arrived = 0;
        c->generation++;
        memset(c->waiting, 0, (size_t)c->n);
        pthread_cond_broadcast(&c->wake);
        pthread_mutex_unlock(&c->lock);
        return 0;
    }
    if (c->arrived == 1)
        c->first_arrival = comm_now_s();
    c->waiting[rank] = 1;
    c->what = what;
    unsigned long gen = c->generation;
    while (gen == c->generation && !c->aborted)
        pthread_cond_wait(&c->wake, &c->lock);
    /* A barrier that completed before the abort still counts as passed. */
    int rc = gen == c->generation ? -1 : 0;
    pthread_mutex_unlock(&c->lock);
    return rc;
}

void comm_net_enter(comm *c, int busy)
{
    pthread_mutex_lock(&c->lock);
    c->net_busy += busy ? 1 : -1;
    pthread_mutex_unlock(&c->lock);
}
