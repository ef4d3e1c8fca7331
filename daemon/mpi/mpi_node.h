/* Several parled processes as one, over MPI (docs/mpi.md). Rank 0 is the
 * daemon users talk to; ranks > 0 serve it: rank 0's job thread sends each
 * job to them, every rank loads the data and runs its share of the replicas
 * with run_job, and the processes' comms meet through a comm_net.
 *
 * mpi_node.c (with mpi_net.c, a job's communicators and cross-rank sums)
 * implements this when meson finds MPI; mpi_node_none.c otherwise
 * (one process: mpi_node_size() is 1 and --mpi is refused), so no caller
 * needs mpi.h or an #ifdef. */
#ifndef PARLE_MPI_NODE_H
#define PARLE_MPI_NODE_H

#include <stddef.h>
#include "runner.h"

/* MPI_Init_thread; before any other thread starts. 0, or -1 with a message
 * (no MPI in this build; MPI could not start; it lacks thread support). */
int mpi_node_init(int *argc, char ***argv, char *err, size_t errlen);
int mpi_node_rank(void);   /* 0 without MPI */
int mpi_node_size(void);   /* 1 without MPI */

/* Rank 0, for `devices`: what rank r told it at start (its pid, cores and
 * GPUs), and whether it was left out since (1) or still serves (0). Any
 * thread. -1 for a rank there is not. */
typedef struct mpi_rank_info {
    long pid;
    int cores, gpus;
} mpi_rank_info;
int mpi_node_describe(int rank, mpi_rank_info *out);

/* Ranks > 0: serve rank 0's jobs until it says stop. The process's exit status. */
int mpi_node_serve(void);

/* Rank 0, once its jobs have ended: let the other ranks go, MPI_Finalize. */
void mpi_node_finalize(void);

/* One job across every rank, on rank 0's job thread:
 *   begin  sends the job (job.json's text and the checkpoint dir) to the ranks
 *          cfg's devices names (cfg: the job, as the queue parsed it);
 *   ready  once this rank's data is loaded (failed != 0: it could not, `why`
 *          says why): every rank's outcome is agreed, and on success `where`
 *          gets this rank's replicas and the net; -1 with the first failing
 *          rank's message otherwise;
 *   end    after run_job (or instead of it), frees the job's communicators. */
typedef struct mpi_job mpi_job;
int mpi_job_begin(mpi_job **out, const job_config *cfg, const char *job_json_path,
                  const char *ckpt_dir, char *err, size_t errlen);
int mpi_job_ready(mpi_job *mj, int failed, const char *why, const job_config *cfg,
                  run_devices *where, char *err, size_t errlen);
void mpi_job_end(mpi_job *mj);
/* The ranks the job runs on (its `devices` may name fewer than all). */
int mpi_job_nranks(const mpi_job *mj);
/* After a successful ready: the MPI rank that runs replica `replica`. */
int mpi_job_rank_of(const mpi_job *mj, int replica);

#endif
