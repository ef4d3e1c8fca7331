/* The runner's helpers, as runner.c calls them (not an API: runner.h is).
 * runner.c is the orchestrator (run_job, the replica threads' loop) and
 * their one caller; they reach the job through run_state.h. The parts:
 *   placement.c       the cores and GPUs a job's replicas run on, pinning
 *   evaluate.c        the master, evaluated on replica 0's thread
 *   run_checkpoint.c  a run's checkpoints: taking one, finding one, restoring
 *   supervise.c       the job thread's watch over the replica threads
 *   reseed.c          a failed replica: the job fails, or it is re-seeded
 * Parle's gamma/rho schedule is the coupling's (coupling/parle.h). */
#ifndef PARLE_RUNNER_IMPL_H
#define PARLE_RUNNER_IMPL_H

#include "run_state.h"

/* placement.c */

/* Pins the calling thread to replica `rank`'s cores; returns its share of
 * the cores (its CPU backend's threads). */
int run_pin_replica(const job_run *run, int rank);
/* Pins the calling thread to one core (a floating replica's turn). */
void run_pin_to_core(int core);
/* Do the CPU replicas float over all the job's cores (placement.c)? */
int run_replicas_float(const job_run *run);

/* evaluate.c */

/* The steps between evaluations of the master (eval.every_passes, whose
 * default 0 is a quarter of an epoch of epoch_steps, spaced so that the
 * evaluations within an epoch take at most a tenth of the training time);
 * an evaluation also ends every epoch. */
long run_eval_steps(const job_run *run, long epoch_steps);
/* Every replica takes part (collectives); rank 0 evaluates the master.
 * Nothing of a replica's state changes, so an evaluation more or less leaves
 * the training as it was. Returns 0, or -1 when the comm was aborted or this
 * replica failed. */
int run_evaluate_master(job_run *run, replica *r, double epochs_done, long step,
                        double train_loss);

/* run_checkpoint.c */

/* Looks for the newest complete checkpoint under hooks->checkpoint_dir
 * (logging each one skipped); if the job is not past it, sets run->resume
 * and the result's resume fields and emits RUN_EV_RESUME. */
void run_checkpoint_find(job_run *run);
/* Every rank writes its file; if all did, rank 0 completes the checkpoint.
 * A failed write keeps the previous checkpoint and the job goes on; -1 only
 * when the comm was aborted or this replica failed. */
int run_checkpoint_take(job_run *run, replica *r, const batch_loader *loader, long step);
/* The replica's state, sampler position and rule scalars from run->resume:
 * 0, or -1 with a message naming the file and what is wrong. */
int run_checkpoint_restore(job_run *run, replica *r, sampler *smp, char *err, size_t errlen);

/* reseed.c */

/* Replica r failed (fmt: the message naming it, the step and why): with
 * on_replica_failure "fail", or after a device fault, the job fails with
 * it (run_fail); with "reseed" the replica is marked failing (the first
 * cause kept, its context's error forgotten) and goes on to the next
 * meeting point. */
void run_replica_failed(job_run *run, replica *r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A meeting point, every replica at once, just before and just after each
 * sync (a no-op unless "reseed"): a replica whose model.params (the
 * iterate its gradients are taken at) are not finite
 * fails too; if any failed, all take part in the rule's re-seed and the
 * failed ones are logged and counted (r->reseeds), or the job fails past
 * max_reseeds. 0, or -1 once the comm is aborted. */
int run_reseed_point(job_run *run, replica *r, long step);

/* supervise.c */

/* The job thread's watch while the replicas run. Returns when every replica
 * thread has ended. */
void run_supervise(job_run *run);

#endif
