/* A job: every field of a job file (docs/config.md lists them), its
 * defaults and its devices. Reading and validating a file is jobfile.h's,
 * in daemon/jobfile/, above the rules and datasets it checks against. */
#ifndef PARLE_JOBCONFIG_H
#define PARLE_JOBCONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include "model.h"

#define JOB_MAX_SCHEDULE 16
#define JOB_PATH_MAX 1024
#define JOB_MAX_CORES 4096 /* K of devices "cpu:K" */
/* A job's priority (`priority`, `parlectl priority`). */
#define JOB_PRIORITY_MIN (-1000)
#define JOB_PRIORITY_MAX 1000

/* A `devices` string: "cpu", "auto" (the GPUs if there are any, else the
 * CPU), "gpu" (every GPU), "gpu:N" (any N free GPUs, all at once) or
 * distinct GPU ids "0,1" / "cuda:0,1" (bit i of ids for GPU i, ids 0..62),
 * or the MPI ranks form below (ranks). */
enum job_devices { DEVICES_CPU, DEVICES_AUTO, DEVICES_GPU, DEVICES_IDS };
typedef struct job_device_spec {
    enum job_devices kind;          /* ranks named: DEVICES_CPU or DEVICES_GPU */
    uint64_t ids;                   /* DEVICES_IDS: bit i for GPU i */
    uint64_t ranks;                 /* bit r for MPI rank r; 0: every rank */
    int cores;                      /* DEVICES_CPU: K of "cpu:K", cores of the daemon's the job
                                       takes (jobs whose shares fit run at once); 0: all */
    int count;                      /* DEVICES_GPU: N of "gpu:N", any N of the daemon's GPUs
                                       the scheduler picks as the job starts; 0: all */
} job_device_spec;

typedef struct job_config {
    char name[128];
    model_spec model;               /* arch, depth, width, dropout, classes */
    struct {
        char dataset[16];           /* mnist, fashion-mnist, cifar10, cifar100, synthetic */
        char root[JOB_PATH_MAX];
        int train_limit, test_limit;/* 0 = all */
        char normalize[16];         /* none, channel, zca */
        bool augment;
        char sampling[16];          /* shuffle, replacement */
        bool split;                 /* equal disjoint shard per replica */
    } data;
    struct {
        char name[16];              /* a rule's (daemon/coupling/coupling.c's table) */
        int replicas;
        int L;
        double gamma, rho, gamma_max, rho_max, growth, alpha;
        double inner_lr;            /* <= 0: the schedule's first lr */
        char init[16];              /* same, independent */
        /* The synchronous graph and leader rules (docs/algorithms.md). */
        char graph[24];             /* dpsgd: ring, bipartite-exponential */
        bool mix_after_step;        /* dpsgd */
        int peers, synch_freq;      /* sgp, osgp */
        int group_size, tau, tau_global, avg_size; /* lsgd (tau: easgd too) */
        double c1, c2, p1, p2;      /* lsgd */
        /* The asynchronous rules (docs/algorithms.md). */
        double beta;                /* easgd: the centre's rate (given, or n lr rho) */
        char variant[8];            /* easgd: sync, async */
        double fetch_probability, value, divergence_threshold; /* gossip */
        char interpolation[16];     /* gossip: constant, clock, loss */
        int timeout_ms;             /* gossip */
        double p;                   /* gosgd: push probability */
        /* A replica whose step fails or whose loss or weights turn non-finite:
         * "fail" ends the job, "reseed" restores it from the rule's consensus
         * (docs/architecture.md "Failure model"), at most max_reseeds times. */
        char on_replica_failure[8];
        int max_reseeds;
    } algorithm;
    struct {
        double lr;
        int nschedule;
        double schedule[JOB_MAX_SCHEDULE][2]; /* [epoch bound, lr] */
        double momentum;
        bool nesterov;
        double weight_decay;
        int batch;
    } optim;
    int epochs;
    uint64_t seed;
    char devices[64];               /* auto, cpu, or GPU ids "0,1", as written */
    job_device_spec device_spec;    /* devices, read once by the validator */
    char precision[8];              /* fp32, tf32, bf16 (the CPU runs tf32 as fp32, bf16 with AVX512-BF16) */
    bool deterministic;             /* GPU: deterministic algorithms only */
    char conv_algorithms[12];       /* GPU: "auto" (by precision), "timed" (cuDNN's find calls) or "heuristic" */
    char gpu_batchnorm[8];          /* GPU: "classic" (one block a channel) or "split" (kernels/bn_split.h) */
    int priority;                   /* higher runs first; above 0 only for admins (docs/architecture.md) */
    double gpu_share;               /* [0.01, 1] of each of its GPUs (whole thousandths) */
    double time_limit;              /* seconds a run may last (then it ends "timeout"); 0: parled's default */
    char after[256];                /* ids of jobs or sweeps it starts after, "j0001,s0002"; "" none */
    bool after_any;                 /* after they end however; else only once all ended done */
    struct { double timeout_s; } comm; /* a collective's deadline */
    struct { int every_epochs, keep; } checkpoint;
    struct {
        char bn[16];                /* recompute, average, replica0 */
        double every_passes;        /* passes between evaluations; 0: a quarter of an epoch */
    } eval;
    int log_every;                  /* steps between progress events */
} job_config;

/* Fill every field with its default (before parsing). */
void job_config_defaults(job_config *cfg);

/* A duration: seconds ("3600", "90.5") or Slurm's [D-]HH:MM:SS ("1-12:00:00",
 * "02:30:00"), into *seconds: 0, or -1 when malformed or past 10 years. */
int job_duration_read(const char *s, double *seconds);
/* The ids of `after` ("j0001,s0002": jobs j, sweeps s, at most JOB_MAX_AFTER)
 * into ids[]: their count, or -1 with `why` when malformed. */
#define JOB_MAX_AFTER 16
int job_after_ids(const char *after, char ids[][16], char *why, size_t whylen);

/* Under `parled --mpi` (docs/mpi.md), a `devices` of the form
 * "rank0:cpu,rank2:cpu" names the MPI ranks that run the job, each on its CPU
 * cores, or "rank0:gpu,rank2:gpu", each on all its GPUs (ranks 0..63,
 * distinct, rank0 among them, all on CPUs or all on GPUs); job_devices_read
 * calls it a CPU or a GPU ("gpu") job, which each rank resolves on its own
 * machine. Returns 1 with *ranks (bit r for rank r), 0 if `s` does not
 * name ranks (*ranks = 0: every rank), -1 with `why` (without `s`) if it is
 * malformed. */
int job_devices_ranks(const char *s, uint64_t *ranks, char *why, size_t whylen);

/* A `devices` string into *d: 0; -1 with `why` (without `s`) for malformed
 * ranks (above); -2 (`why` empty) when it is none of the forms. The job's
 * validator reads cfg->devices so into cfg->device_spec, once. */
int job_devices_read(const char *s, job_device_spec *d, char *why, size_t whylen);

/* Devices as a bit set: bit i = GPU i, the top bit = the CPU cores. */
#define JOB_DEVICES_CPU (1ull << 63)
#define JOB_DEVICES_MAX_GPUS 63
/* The CPU and GPUs 0..ngpus-1, as a set. */
uint64_t job_devices_present(int ngpus);

/* The one resolver: the devices `d` (its text `text`, for messages) names
 * within `allowed` (the daemon's --devices set, or job_devices_present of
 * the GPUs this machine has), as a set in *out: "auto" is the GPUs allowed
 * if there are any, else the CPU; "gpu" every GPU allowed. 0, or -1 with a
 * message worded for `of`: the daemon's (the queue, a restart: without a
 * "devices: " prefix) or this machine's (an MPI rank, parle-train). */
enum job_devices_of { DEVICES_OF_DAEMON, DEVICES_OF_MACHINE };
int job_devices_resolve(const job_device_spec *d, const char *text, uint64_t allowed,
                        enum job_devices_of of, uint64_t *out, char *err, size_t errlen);
/* The GPU ids in `set`, ascending, into gpus[JOB_DEVICES_MAX_GPUS]: how many. */
int job_devices_gpus(uint64_t set, int *gpus);

/* The backend precision the job's `precision` names. */
enum backend_precision job_precision(const job_config *cfg);
/* Whether the job's GPU contexts time their convolution algorithms: its
 * `conv_algorithms`, "auto" resolved against its precision
 * (backend_times_algorithms_by_default); never when `deterministic`. */
int job_times_conv_algorithms(const job_config *cfg);

/* The lr for epoch e (counted from 0) under optim.lr and optim.lr_schedule
 * (the runner's schedule, and the rules' checks as the job file is read). */
static inline double job_lr_at_epoch(const job_config *cfg, int epoch)
{
    int n = cfg->optim.nschedule;
    if (n <= 0)
        return cfg->optim.lr;
    for (int i = 0; i < n; i++)
        if (epoch < cfg->optim.schedule[i][0])
            return cfg->optim.schedule[i][1];
    return cfg->optim.schedule[n - 1][1];
}

#endif
