/* This process in MPI_COMM_WORLD (mpi_world.c), below every other file of
 * daemon/mpi: its rank and size once mpi_node_init has set them
 * (mpi_node_rank and mpi_node_size of mpi_node.h read them), the thread
 * level MPI gave, its log line and its waits. Only built with MPI. */
#ifndef PARLE_MPI_WORLD_H
#define PARLE_MPI_WORLD_H

#include <mpi.h>

/* MPI_Init_thread gave MPI_THREAD_MULTIPLE (peer requests need it). */
extern int mpi_net_thread_multiple;

/* mpi_node_init, once MPI has started: this process's rank and the world's
 * size. */
void mpi_world_set(int rank, int size);

/* "parled[rank R]: ..." on stderr. */
void mpi_net_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Sleep ns nanoseconds (< 1 s): lets the core go between MPI_Tests. */
void mpi_net_nap(long ns);

/* Wait for n requests until `deadline` (comm_now_s). Finished ones become
 * MPI_REQUEST_NULL, so those left name the ranks that did not answer.
 * 0: all done; 1: the deadline passed; -1: an MPI error. */
int mpi_net_wait_until(int n, MPI_Request *reqs, double deadline);

#endif
