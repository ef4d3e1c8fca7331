/* A replica that fails (algorithm.on_replica_failure; docs/architecture.md
 * "Failure model"). With "fail" the job fails, as any failure does. With
 * "reseed" the replica is marked failing where it failed (its step, its
 * loss, its sync), leaves its rule's updates alone, and at the next meeting
 * point, one just before each sync and one just after, every replica
 * agrees on how many failed (a collective mean, so across MPI ranks too);
 * then all take part in the rule's re-seed (coupling_rule.reseed), which
 * restores the failed ones from the rule's consensus. The count is the
 * job's, the same on every replica; past algorithm.max_reseeds the job
 * fails at that meeting point, on every replica at once. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>

#include "runner_impl.h"

void run_replica_failed(job_run *run, replica *r, const char *fmt, ...)
{
    char msg[sizeof run->err];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* A device fault leaves nothing to re-seed on. */
    if (!run->reseeding || backend_recover(&r->ctx) != 0) {
        run_fail(run, "%s", msg);
        return;
    }
    if (!r->failing)
        snprintf(run->cause[r->rank], sizeof run->cause[r->rank], "%s", msg);
    r->failing = 1;
}

/* Past max_reseeds: the job fails with the cause of this process's first
 * failed replica, or says that the failures were elsewhere. */
static void fail_past_limit(job_run *run, replica *r, long failed)
{
    const char *cause = NULL;
    for (int j = 0; j < run->nlocal && !cause; j++)
        if (run->cause[j][0])
            cause = run->cause[j];
    long would = r->reseeds + failed;
    int max = run->cfg->algorithm.max_reseeds;
    if (cause)
        run_fail(run, "%s; re-seeding it would make %ld re-seeds, past algorithm.max_reseeds = "
                 "%d", cause, would, max);
    else
        run_fail(run, "%ld replica(s) of other processes failed in outer iteration %ld; "
                 "re-seeding would make %ld re-seeds, past algorithm.max_reseeds = %d", failed,
                 r->k, would, max);
}

int run_reseed_point(job_run *run, replica *r, long step)
{
    if (!run->reseeding)
        return 0;
    /* model.params, which only its owner writes (an asynchronous rule's
     * shared weights may be a peer's to change until everyone is here); a
     * rule's other weights (Parle's x) reach it by the next step. */
    const float *w = r->model.params;
    /* |w - w|^2 is 0 for finite weights and NaN once any is not: the
     * backend's one reduction serves as the finiteness check. */
    if (!r->failing && !isfinite(vec_dist2(&r->ctx, r->model.nparams, w, w)))
        run_replica_failed(run, r, "replica %d: its weights are not finite at step %ld (outer "
                           "iteration %ld)", replica_id(run, r), step, r->k);
    double share;
    if (comm_mean_double(r->comm, r->rank, r->failing ? 1.0 : 0.0, &share) != 0)
        return -1;
    long failed = lround(share * run->n);
    if (failed == 0)
        return 0;
    if (r->reseeds + failed > run->cfg->algorithm.max_reseeds) {
        fail_past_limit(run, r, failed);
        return -1;
    }
    if (run->rule->reseed(r, r->failing) != 0)
        return -1;
    r->reseeds += failed;
    if (r->failing) {
        /* A sync that applies the gradient (Elastic-SGD, allreduce, D-PSGD)
         * applies none of the failed one's. */
        backend_zero(&r->ctx, r->model.grads, r->model.nparams * sizeof(float));
        run_emit_log(run, "replica %d re-seeded from %s's consensus at step %ld (outer iteration "
                     "%ld; the job's re-seeds: %ld of at most %d): %s", replica_id(run, r),
                     run->rule->name, step, r->k, r->reseeds, run->cfg->algorithm.max_reseeds,
                     run->cause[r->rank]);
        run->cause[r->rank][0] = '\0';
        r->failing = 0;
    }
    return 0;
}
