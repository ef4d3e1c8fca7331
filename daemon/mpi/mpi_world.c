/* mpi_world.h: this process in MPI_COMM_WORLD (its rank and size, as
 * mpi_node_init found them), its log line and its waits. The other files
 * of daemon/mpi call these; they call none of them. */
#include "mpi_world.h"

#include <stdarg.h>
#include <stdio.h>
#include <time.h>

#include "comm.h"
#include "mpi_node.h"

int mpi_net_thread_multiple;

static int world_rank, world_size = 1;

void mpi_world_set(int rank, int size)
{
    world_rank = rank;
    world_size = size;
}

int mpi_node_rank(void) { return world_rank; }
int mpi_node_size(void) { return world_size; }

void mpi_net_log(const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "parled[rank %d]: %s\n", mpi_node_rank(), buf);
}

void mpi_net_nap(long ns) { nanosleep(&(struct timespec){.tv_nsec = ns}, NULL); }

int mpi_net_wait_until(int n, MPI_Request *reqs, double deadline)
{
    for (long spins = 0;; spins++) {
        int left = 0;
        for (int i = 0; i < n; i++) {
            int done = 0;
            if (reqs[i] == MPI_REQUEST_NULL)
                continue;
            if (MPI_Test(&reqs[i], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
                return -1;
            left += !done;
        }
        if (!left)
            return 0;
        if (comm_now_s() > deadline)
            return 1;
        if (spins > 2000)
            mpi_net_nap(1000000);
    }
}
