/* Operations a job gave up on while MPI still holds them (docs/mpi.md,
 * "Operations a failed job leaves pending"). A non-blocking collective or
 * message that a failing job stops waiting for is not finished for MPI: it
 * can complete later (the stalled rank comes back, the network recovers) and
 * then reads or writes its buffer. So whoever gives up on one hands its
 * requests and the one heap buffer they use to the node, which keeps both
 * until MPI completes every request, then frees the buffer. The job's
 * communicators are abandoned as before (never freed), so nothing the next
 * job sends can match these. */
#ifndef PARLE_MPI_PENDING_H
#define PARLE_MPI_PENDING_H

#include <mpi.h>

/* Takes the n requests (each set to MPI_REQUEST_NULL in reqs) and buf (may
 * be NULL: the requests use static memory), freed once all n complete. Any
 * thread; makes no MPI call. Out of memory, both are left to MPI for the
 * process's life, which is safe. */
void mpi_pending_keep(MPI_Request *reqs, int n, void *buf);

/* Test every kept request (which also lets MPI progress them) and free the
 * buffers of those whose requests all completed. The number still pending.
 * Called where the thread may call MPI: a job's start and end, a rank > 0's
 * wait for the next job. */
int mpi_pending_drain(void);

/* Drain until nothing is pending or `seconds` have passed: the number still
 * pending (before MPI_Finalize). */
int mpi_pending_settle(double seconds);

/* After MPI_Finalize (MPI touches nothing any more): free every kept buffer. */
void mpi_pending_release(void);

#endif
