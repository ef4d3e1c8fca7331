/* Internal to the MPI node (mpi_node.c, mpi_net.c; docs/mpi.md): one job's
 * ranks and communicators, and the comm_net over them that its replica 0
 * calls (cross-rank sums, arrival notes, failure notices). mpi_node.c hands
 * jobs off and serves them; this part runs them across ranks. Only built
 * when meson finds MPI. */
#ifndef PARLE_MPI_NET_H
#define PARLE_MPI_NET_H

#include <mpi.h>
#include <stddef.h>

#include "comm.h"
#include "mpi_node.h"

/* Message tags, in one place so that those on MPI_COMM_WORLD stay apart:
 * the hand-off's (mpi_node.c) and the tags that create a job's communicators
 * (TAG_GROUP + 2 * (job number % 10000), + 1). FAIL and ARRIVE go on a job's
 * notice communicator. */
enum { TAG_FAIL = 1, TAG_ARRIVE = 2, TAG_JOB = 3, TAG_ACK = 4, TAG_TEXT = 5, TAG_GROUP = 1000 };

struct mpi_job {
    MPI_Comm coll, notice;   /* the job's collectives; notices (MPI_COMM_NULL: rank 0 alone) */
    int broken;              /* a collective may be left pending: abandon the comms */
    int failed_sent;
    int nranks, me;          /* the job's ranks, and this one's place among them */
    int *world;              /* each job rank's rank in MPI_COMM_WORLD */
    int replicas;
    long entered;            /* cross-rank sums this rank began */
    long *arrived;           /* per job rank: the sums it said it began */
    long nsums, ngathers, nagree; /* what the syncs cost, logged at the end */
    double floats, in_sums_s, t_ready;
    comm_net net;
};

/* Every rank of a job: its communicators over its ranks (world ranks
 * `world`, n of them, taken over, freed on failure too), after its
 * description arrived. NULL with a message. mpi_job_end frees it. */
mpi_job *mpi_net_job_new(int *world, int n, long seq, char *err, size_t errlen);

/* "parled[rank R]: ..." on stderr. */
void mpi_net_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Sleep ns nanoseconds (< 1 s): lets the core go between MPI_Tests. */
void mpi_net_nap(long ns);

/* Wait for n requests until `deadline` (comm_now_s). Finished ones become
 * MPI_REQUEST_NULL, so those left name the ranks that did not answer.
 * 0: all done; 1: the deadline passed; -1: an MPI error. */
int mpi_net_wait_until(int n, MPI_Request *reqs, double deadline);

#endif
