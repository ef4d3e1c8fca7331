/* The tests' helpers for jobs through the runner and for coupling rules on
 * replica threads (in testutil.c); apart from testutil.h so that tests of
 * the kernels alone need not see the daemon's names. */
#ifndef PARLE_TESTJOB_H
#define PARLE_TESTJOB_H

#include "coupling.h"
#include "runner.h"
#include "testutil.h"

/* ---- coupling rules on replica threads ---- */

/* Replica `rank` of n in a job cfg, talking through c, its model a flat
 * vector of dim params (set from x0) and grads, its backend one CPU thread. */
void test_replica_init(replica *r, int rank, int n, const job_config *cfg, comm *c,
                       float *params, float *grads, int dim, const double *x0);

/* Frees what rule->init and test_replica_init made. */
void test_replica_free(replica *r, const coupling_rule *rule);

/* The job config a rule sees: n replicas, L gradient steps per outer
 * iteration, SGD with momentum mu (Nesterov or heavy-ball) and weight
 * decay wd; tests set the rule's own fields. */
void test_rule_config(job_config *cfg, const char *rule, int n, int L, double mu, double wd,
                      bool nesterov);

/* Runs fn(ctx, rank) for ranks 0 to n - 1 on their own threads, coupled
 * through c, a fresh comm for dim floats, and waits for them all. */
void test_run_replicas(comm *c, int n, size_t dim, void (*fn)(void *ctx, int rank), void *ctx);

/* ---- jobs through the runner ---- */

/* A job on the synthetic set: `replicas` Parle replicas of arch, 512
 * training and 256 test images, L 3, lr 0.05, batch 32; tests change the
 * rest. */
void test_synthetic_job(job_config *cfg, const char *arch, int replicas, int epochs,
                        uint64_t seed);

/* What a job's hooks saw: the master's weights after its last evaluation
 * (malloc'd; final stays NULL for a job that stopped early), the events
 * counted, the first TEST_MAX_EVALS evaluations' epochs, steps and test
 * errors, and the rule's quantities at the last evaluation. Setting
 * stop_after_eval > 0 asks for a stop with a checkpoint after the
 * evaluation at that many epochs (a fraction: within an epoch);
 * print_evals prints each evaluation; reseeds: the job's re-seeded
 * replicas at its last progress event. Events come from replica 0's thread
 * alone. */
enum { TEST_MAX_EVALS = 64 };
typedef struct test_watch {
    float *final;
    size_t n;
    double stop_after_eval;
    int print_evals;
    volatile int stop;
    int evals, resumes, failures_logged;
    char first_failure[512]; /* the first message that said something failed */
    long reseeds;
    double eval_epoch[TEST_MAX_EVALS], eval_error[TEST_MAX_EVALS];
    long eval_step[TEST_MAX_EVALS];
    char rule_json[1024];
    /* Progress events: the steps each one covers over its images_per_sec,
     * summed (times the images a step takes, the seconds the reported rates
     * account for), the last one's step and replica 0's compute_s + sync_s +
     * wait_s; the last evaluation's eval_s and elapsed_s. */
    double steps_over_rate, busy_s, eval_s, eval_elapsed_s;
    long progress_step;
} test_watch;

/* Runs cfg with w's hooks, checkpoints in checkpoint_dir (NULL: none), on
 * `where` (NULL: cores 0 and 1). Returns run_job's result; err says why. */
int test_run_job(const job_config *cfg, const run_devices *where, const char *checkpoint_dir,
                 test_watch *w, run_result *res, char *err, size_t errlen);

#endif
