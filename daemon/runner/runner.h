/* Runs one job: n replica threads, each pinned to its share of the cores,
 * coupled by the job's rule. Blocks until the job ends. */
#ifndef PARLE_RUNNER_H
#define PARLE_RUNNER_H

#include <stddef.h>
#include "dataset.h"
#include "load.h"
#include "jobconfig.h"
#include "model.h"

/* The master is evaluated in batches of this many test images (the memory
 * estimate plans that model too). */
enum { EVAL_BATCH = 256 };

/* RUN_EV_RESUME comes first when a run continues from a checkpoint: `step`
 * and `epoch` say where (metrics after that step are superseded).
 * RUN_EV_SAVE: a checkpoint or the master (`saved`) could not be written
 * (`message` says why, and which checkpoint stays), or "" when one was. */
enum run_event_kind { RUN_EV_PROGRESS, RUN_EV_EVAL, RUN_EV_LOG, RUN_EV_RESUME, RUN_EV_SAVE };

/* What a RUN_EV_SAVE is about. */
enum run_saved { RUN_SAVED_CHECKPOINT, RUN_SAVED_MASTER };

typedef struct run_event {
    enum run_event_kind kind;
    /* The epoch in progress (from 0); after an eval, the epochs done: a
     * fraction for one within an epoch (eval.every_passes). */
    double epoch;
    int epochs;
    long step;                  /* gradient steps taken by replica 0 (minimum for async rules) */
    double data_passes;         /* gradient evaluations per replica / batches per pass */
    double train_loss;          /* mean mini-batch loss since the last event */
    double images_per_sec;      /* all replicas together, training alone: the time in
                                   evaluations and checkpoints left out */
    double lr, gamma, rho;
    double test_error, test_loss; /* RUN_EV_EVAL: the master's */
    double elapsed_s, eta_s;
    /* Replica 0's seconds so far: in gradient steps and the rule's per-step
     * update, in the rule's sync (waiting for peers included), and waiting
     * for the loader; the rest of elapsed_s is evaluation (eval_s), checkpoints and
     * start-up (bench/parle_job.py --breakdown reads them). */
    double compute_s, sync_s, wait_s;
    double eval_s;              /* replica 0's seconds evaluating the master, so far */
    double dist_to_master;      /* mean over replicas of |x_a - master| (RUN_EV_EVAL) */
    /* RUN_EV_PROGRESS, RUN_EV_RESUME: the job's re-seeded replicas so far
     * (algorithm.on_replica_failure), checkpointed with it. */
    long reseeds;
    enum run_saved saved;       /* RUN_EV_SAVE */
    char message[512];          /* RUN_EV_LOG, RUN_EV_SAVE */
    char rule[1024];            /* the coupling rule's own quantities, a JSON object or "" */
    char memory[512];           /* RUN_EV_PROGRESS: peak bytes per device, a JSON object
                                   ({"cpu":N}, {"cuda:0":N,...}; runner.c note_memory) or "" */
} run_event;

/* Stop requests (hooks->stop). RUN_STOP (a cancel) and RUN_STOP_NOW (a
 * shutdown whose grace ran out) end the job at once, wherever its replicas
 * are, without a checkpoint; RUN_STOP_CHECKPOINT (a shutdown, a preemption)
 * stops at the next outer-iteration boundary with a checkpoint. The run
 * adds RUN_STOPPING (compare-and-swap) as a replica takes a
 * RUN_STOP_CHECKPOINT up: whoever asked may call the request off only by
 * swapping RUN_STOP_CHECKPOINT alone for 0, which then fails once the run
 * is stopping for it. */
enum { RUN_STOP = 1, RUN_STOP_CHECKPOINT = 2, RUN_STOP_NOW = 4, RUN_STOPPING = 8 };

typedef struct run_hooks {
    /* Called from a replica thread; must be quick and thread-safe. */
    void (*on_event)(void *user, const run_event *ev);
    void *user;
    /* Set by any thread, written with __atomic_store_n (read atomically);
     * the run only adds RUN_STOPPING. */
    volatile int *stop;
    /* Checkpoints go here (cfg->checkpoint.every_epochs, .keep); NULL: none.
     * If it holds a complete checkpoint, the run resumes from the newest. */
    const char *checkpoint_dir;
    /* If set, called on replica 0's thread after every evaluation with the
     * master (its tensor list; its weights and the BN statistics it was
     * evaluated with, on the host) and the epochs done (a fraction within an
     * epoch), e.g. to save it for export; `last` is 1 after the job's final
     * evaluation. */
    void (*on_master)(void *user, const model *master, const float *params, const float *stats,
                      double epochs_done, int last);
} run_hooks;

typedef struct run_result {
    double test_error, test_loss;  /* the master's last evaluation */
    int epochs_done;
    int stopped;                   /* ended early because *stop was set */
    int cancelled;                 /* ... and the request was RUN_STOP */
    long resumed_k, resumed_step;  /* where a resumed run started (0: from scratch) */
    /* Non-empty when a replica's backend context hit an error that leaves
     * its device unusable for this process (backend_ctx.device_fault), even
     * if the job failed for another reason first: "cpu: <error>" or
     * "cuda:G: <error>" of the first such replica. */
    char device_fault[512];
} run_result;

/* Where a job's replicas run: replica r on GPU gpus[r % ngpus]
 * (topology_device) when ngpus > 0, else on the CPU; either way its thread
 * is pinned among `cores` (the CPU core ids the job may use, ncores >= 1). */
typedef struct run_devices {
    const int *cores;
    int ncores;
    const int *gpus;
    int ngpus;
    /* Several processes (MPI, docs/mpi.md): this one runs replicas first ..
     * first + count - 1 of the job's and net reaches the others' (rules
     * whose only collectives are all-reduces and agreements). Zeroes:
     * all replicas here. */
    int first, count;
    const struct comm_net *net;
} run_devices;

/* The GPUs a job's `devices` (cfg->device_spec, as its validator read it)
 * names among those this machine has (job_devices_resolve), in gpus[64]:
 * how many (0: the CPU), or -1 with a message when it names a GPU that is
 * not here. */
int run_job_gpus(const job_config *cfg, int *gpus, char *err, size_t errlen);

/* Returns 0, or -1 with a message (bad data, NaN loss, a replica's error, a
 * collective past its deadline) in err. */
int run_job(const job_config *cfg, const dataset *train, const dataset *test,
            const run_devices *where, const run_hooks *hooks, run_result *result, char *err,
            size_t errlen);

/* The CPU cores this process may run on, as a malloc'd list in *cores;
 * returns how many, or -1 with a message. */
int run_cpu_cores(int **cores, char *err, size_t errlen);

/* The job's model for this data: input shape and, unless model.classes is
 * set, the number of classes from the dataset. */
model_spec run_model_spec(const job_config *cfg, const dataset *train);

#endif
