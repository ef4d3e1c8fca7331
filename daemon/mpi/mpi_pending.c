/* mpi_pending.h: the node's list of operations given up on by a job, kept
 * with their buffers until MPI completes them. */
#include "mpi_pending.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "comm.h"
#include "mpi_world.h"

typedef struct kept {
    struct kept *next;
    int n;
    void *buf;
    MPI_Request reqs[]; /* MPI_REQUEST_NULL once completed */
} kept;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static kept *head;

void mpi_pending_keep(MPI_Request *reqs, int n, void *buf)
{
    kept *k = malloc(sizeof *k + (size_t)n * sizeof *reqs);
    if (!k) {
        mpi_net_log("out of memory keeping %d pending MPI requests: their memory stays "
                    "MPI's", n);
    } else {
        k->n = n;
        k->buf = buf;
        memcpy(k->reqs, reqs, (size_t)n * sizeof *reqs);
        pthread_mutex_lock(&lock);
        k->next = head;
        head = k;
        pthread_mutex_unlock(&lock);
    }
    for (int i = 0; i < n; i++)
        reqs[i] = MPI_REQUEST_NULL;
}

/* 1 once every request of k completed. A request whose test fails stays:
 * MPI may still use its buffer. */
static int finished(kept *k)
{
    int left = 0;
    for (int i = 0; i < k->n; i++) {
        int done = 0;
        if (k->reqs[i] != MPI_REQUEST_NULL &&
            (MPI_Test(&k->reqs[i], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || !done))
            left++;
    }
    return left == 0;
}

int mpi_pending_drain(void)
{
    int left = 0;
    pthread_mutex_lock(&lock);
    for (kept **at = &head; *at;) {
        kept *k = *at;
        if (finished(k)) {
            *at = k->next;
            free(k->buf);
            free(k);
        } else {
            at = &k->next;
            left++;
        }
    }
    pthread_mutex_unlock(&lock);
    return left;
}

int mpi_pending_settle(double seconds)
{
    double until = comm_now_s() + seconds;
    int left;
    while ((left = mpi_pending_drain()) > 0 && comm_now_s() < until)
        mpi_net_nap(1000000);
    return left;
}

void mpi_pending_release(void)
{
    pthread_mutex_lock(&lock);
    while (head) {
        kept *k = head;
        head = k->next;
        free(k->buf);
        free(k);
    }
    pthread_mutex_unlock(&lock);
}
