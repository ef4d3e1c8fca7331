/* What a job gets for every field its file leaves out (docs/config.md lists
 * them); the job validator starts from these. */
#include <string.h>

#include "jobconfig.h"

void job_config_defaults(job_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->model.depth = 16;
    cfg->model.width = 4;
    cfg->model.dropout = -1;
    strcpy(cfg->data.normalize, "none");
    strcpy(cfg->data.sampling, "shuffle");
    cfg->algorithm.replicas = 1;
    cfg->algorithm.L = 25;
    cfg->algorithm.gamma = 0.01;
    cfg->algorithm.rho = 1;
    cfg->algorithm.gamma_max = 1;
    cfg->algorithm.rho_max = 10;
    cfg->algorithm.growth = 0.5;
    cfg->algorithm.alpha = 0.75;
    strcpy(cfg->algorithm.init, "same");
    strcpy(cfg->algorithm.graph, "ring");
    cfg->algorithm.peers = 1;
    cfg->algorithm.tau = 10;
    cfg->algorithm.tau_global = 256;
    cfg->algorithm.avg_size = 10;
    cfg->algorithm.c1 = 0.5;
    cfg->algorithm.c2 = 0.5;
    cfg->algorithm.beta = 0.43;
    strcpy(cfg->algorithm.variant, "sync");
    cfg->algorithm.fetch_probability = 1;
    strcpy(cfg->algorithm.interpolation, "constant");
    cfg->algorithm.value = 0.5;
    cfg->algorithm.timeout_ms = 2500;
    cfg->algorithm.p = 0.01;
    strcpy(cfg->algorithm.on_replica_failure, "fail");
    cfg->algorithm.max_reseeds = 3;
    cfg->optim.lr = 0.1;
    cfg->optim.momentum = 0.9;
    cfg->optim.nesterov = true;
    cfg->optim.batch = 128;
    cfg->epochs = 10;
    cfg->seed = 42;
    strcpy(cfg->devices, "cpu");
    cfg->device_spec = (job_device_spec){.kind = DEVICES_CPU};
    strcpy(cfg->precision, "tf32");
    strcpy(cfg->conv_algorithms, "auto");
    strcpy(cfg->gpu_batchnorm, "classic");
    cfg->gpu_share = 1.0;
    cfg->comm.timeout_s = 1800;
    cfg->checkpoint.every_epochs = 1;
    cfg->checkpoint.keep = 2;
    strcpy(cfg->eval.bn, "recompute");
    cfg->log_every = 20;
}
