/* Fault injection for tests: PARLE_FAULT_REPLICA=RANK:PHASE:K[:STEP] makes
 * replica RANK fail (or hang) at one chosen point of outer iteration K:
 *   start       its thread is never started (K is ignored)
 *   step        at inner step STEP (from 1) of outer iteration K
 *   sync        in the rule's sync closing outer iteration K
 *   eval        in the evaluation after outer iteration K (an epoch's end)
 *   checkpoint  in the checkpoint after outer iteration K
 *   hang        it stops at inner step STEP of K until the job is aborted
 *               (a stuck replica: the watchdog, a cancel or a failure elsewhere
 *               must end the job)
 *   device      at inner step STEP of K its backend context fails with an
 *               error that leaves the device unusable for the process
 *               (backend_fail_device, as a CUDA illegal address would): the
 *               job fails and parled re-executes itself (docs/gpu.md
 *               "Sticky device faults"); on the CPU backend too, so that
 *               path runs without a GPU
 *   oom         at inner step STEP of K it asks its backend for 1 PiB
 *               (backend_alloc: cudaMalloc on a GPU, the host allocator on
 *               the CPU), a real out-of-memory in the middle of a job: the
 *               job fails naming the device and the bytes, the device stays
 *               usable, the next job runs
 *   load        the K-th job to load its data in this process (from 1)
 *               hangs there (sleeping in short steps) until its stop flag
 *               is set (a cancel, a shutdown), then stops as a slow load
 *               would; RANK is ignored. Only loads with a stop flag count
 *               (not parle-train's, nor those of MPI ranks other than 0)
 *   nan         at inner step STEP of K its weights (the iterate its gradient
 *               is taken at) turn NaN before the step, as a diverged
 *               replica's would: the step's loss is NaN, and with
 *               algorithm.on_replica_failure "reseed" the replica is
 *               re-seeded (docs/architecture.md "Failure model")
 *   park        the K-th job this process runs for parled (from 1; jobs
 *               with a stop flag) stops at the first outer-iteration
 *               boundary after replica RANK's step STEP, once that step's
 *               progress is reported, logs "parked after step N", and
 *               waits there until the job is stopped (a cancel, a shutdown,
 *               which then checkpoints as usual), the file that
 *               PARLE_FAULT_RELEASE names exists (the test releases it: the
 *               job goes on) or parled dies: tests hold a job mid-run with
 *               it instead of racing to catch one
 *   stopping    the K-th job this process runs for parled (counted as for
 *               park), once its replicas agreed to stop for a checkpoint (a
 *               preemption, a hold, a time limit, a shutdown), logs "holds
 *               its stop" and waits before that checkpoint until the file
 *               PARLE_FAULT_RELEASE names exists or the job is aborted: tests
 *               act while a job is stopping (a withdrawn preemption)
 * The job must then end cleanly, whatever the other replicas are doing. */
#ifndef PARLE_FAULT_H
#define PARLE_FAULT_H

#include <stddef.h>

enum fault_phase { FAULT_NONE, FAULT_START, FAULT_STEP, FAULT_SYNC, FAULT_EVAL,
                   FAULT_CHECKPOINT, FAULT_HANG, FAULT_DEVICE, FAULT_OOM, FAULT_LOAD,
                   FAULT_NAN, FAULT_PARK, FAULT_STOPPING };

typedef struct fault_point {
    enum fault_phase phase;   /* FAULT_NONE: no fault */
    int rank;
    long k;
    int step;
} fault_point;

/* Parse a spec (NULL or "" = no fault). Returns 0, or -1 with a message. */
int fault_parse(const char *spec, fault_point *fp, char *err, size_t errlen);

/* Does the fault strike replica `rank` in `phase` at (k, step)? step is
 * ignored for phases that have none, rank for FAULT_LOAD (k counts loads);
 * for FAULT_PARK and FAULT_STOPPING k is the job's number in the process,
 * step ignored (park's caller compares its steps with fp->step). */
int fault_strikes(const fault_point *fp, int rank, enum fault_phase phase, long k, int step);

const char *fault_phase_name(enum fault_phase phase);

#endif
