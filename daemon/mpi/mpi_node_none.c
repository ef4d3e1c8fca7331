/* mpi_node.h without MPI: one process, and --mpi says why it cannot be. */
#include "mpi_node.h"

#include <stdio.h>

int mpi_node_init(int *argc, char ***argv, char *err, size_t errlen)
{
    snprintf(err, errlen, "--mpi: this parled was built without MPI (install libopenmpi-dev "
             "and reconfigure with -Dmpi=enabled)");
    return -1;
}

int mpi_node_rank(void) { return 0; }
int mpi_node_size(void) { return 1; }
int mpi_node_describe(int rank, mpi_rank_info *out) { return -1; }
int mpi_node_serve(void) { return 1; }
void mpi_node_finalize(void) {}

int mpi_job_begin(mpi_job **out, const job_config *cfg, const char *job_json_path,
                  const char *ckpt_dir, char *err, size_t errlen)
{
    *out = NULL;
    snprintf(err, errlen, "this parled was built without MPI");
    return -1;
}

int mpi_job_ready(mpi_job *mj, int failed, const char *why, const job_config *cfg,
                  run_devices *where, char *err, size_t errlen)
{
    snprintf(err, errlen, "this parled was built without MPI");
    return -1;
}

void mpi_job_end(mpi_job *mj) {}
int mpi_job_nranks(const mpi_job *mj) { return 1; }
int mpi_job_rank_of(const mpi_job *mj, int replica) { return 0; }
