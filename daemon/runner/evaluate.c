/* The master, evaluated at every epoch end and every eval.every_passes: the
 * mean of the replicas (or the rule's own master), copied into rank 0's
 * evaluation model with the BN statistics cfg->eval.bn names (read from the
 * replicas, never written), then its test error and loss reported
 * (RUN_EV_EVAL) and handed to hooks->on_master. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "parle.h"
#include "runner_impl.h"

/* The default cadence spaces the evaluations within an epoch at least this
 * many times an evaluation's cost apart: a tenth of the training time. */
enum { EVAL_SPACING = 10 };

/* An evaluation's forward passes (the training set's for eval.bn
 * "recompute", then the test set's), counted in gradient steps of replica 0:
 * a forward pass taken as half a training step per image (forward and
 * backward; about 0.4 where measured, bench/README.md "Evaluation cost"). */
static double eval_cost_steps(const job_run *run)
{
    double images = run->test->n;
    if (strcmp(run->cfg->eval.bn, "recompute") == 0)
        images += run->train->n;
    return images / (2.0 * run->cfg->optim.batch);
}

long run_eval_steps(const job_run *run, long epoch_steps)
{
    long every;
    if (run->cfg->eval.every_passes > 0) {
        every = llround(run->cfg->eval.every_passes * (double)run->batches_per_pass);
    } else {
        /* Four an epoch, but the ones within an epoch at most a tenth of the
         * training time: at least ten evaluations' cost of steps apart. */
        every = epoch_steps / 4;
        long bound = (long)ceil(EVAL_SPACING * eval_cost_steps(run));
        if (every < bound)
            every = bound;
        /* Spaced an epoch or more: at epoch ends alone. */
        if (every > epoch_steps)
            every = epoch_steps;
    }
    return every < 1 ? 1 : every;
}

int run_evaluate_master(job_run *run, replica *r, double epochs_done, long step,
                        double train_loss)
{
    const job_config *cfg = run->cfg;
    double t_begin = comm_now_s();
    model *em = &run->eval_model;
    size_t np = r->model.nparams;
    /* The mean of the replicas, unless the rule names its own master. */
    const float *master = run->rule->master ? run->rule->master(r)
                          : comm_allreduce_mean(r->comm, r->rank, &r->ctx, run->rule->weights(r), np);
    if (!master)
        return -1;
    double dist = vec_dist2(&r->ctx, np, run->rule->weights(r), master);
    if (is_master(run, r))
        backend_copy(&r->ctx, em->params, master, np * sizeof(float));
    if (strcmp(cfg->eval.bn, "average") == 0) {
        const float *stats = comm_allreduce_mean(r->comm, r->rank, &r->ctx, r->model.stats,
                                                 r->model.nstats);
        if (!stats)
            return -1;
        if (is_master(run, r))
            backend_copy(&r->ctx, em->stats, stats, em->nstats * sizeof(float));
    }
    /* Each rank's distance to the master, averaged over ranks. */
    double mean_dist;
    if (comm_mean_double(r->comm, r->rank, sqrt(dist), &mean_dist) != 0)
        return -1;
    if (fault_strikes(&run->fault, r->rank, FAULT_EVAL, r->k, 0)) {
        run_fail(run, "replica %d: injected failure in the evaluation after outer iteration %ld "
                 "(step %ld)", r->rank, r->k, step);
        return -1;
    }
    if (!is_master(run, r))
        return 0;
    double t0 = comm_now_s();
    if (strcmp(cfg->eval.bn, "recompute") == 0)
        model_recompute_bn(em, &r->ctx, run->train->images, run->train->n);
    else if (strcmp(cfg->eval.bn, "replica0") == 0)
        backend_copy(&r->ctx, em->stats, r->model.stats, em->nstats * sizeof(float));
    run_event ev = {.kind = RUN_EV_EVAL, .epoch = epochs_done, .epochs = cfg->epochs,
                    .step = step, .data_passes = (double)step / (double)run->batches_per_pass,
                    .lr = r->lr, .train_loss = train_loss, .dist_to_master = mean_dist};
    parle_report(cfg, run->rule, run->n, r->gamma, r->rho, &ev.gamma, &ev.rho);
    if (run->rule->describe)
        run->rule->describe(r, ev.rule, sizeof ev.rule);
    model_evaluate(em, &r->ctx, run->test->images, run->test->labels, run->test->n,
                   &ev.test_loss, &ev.test_error);
    if (backend_failed(&r->ctx)) {
        run_fail(run, "replica 0: the evaluation after outer iteration %ld (step %ld): %s",
                 r->k, step, r->ctx.err);
        return -1;
    }
    run->result.test_error = ev.test_error;
    run->result.test_loss = ev.test_loss;
    run->result.epochs_done = (int)epochs_done;
    ev.elapsed_s = comm_now_s() - run->t_start;
    ev.compute_s = r->step_s;
    ev.sync_s = r->sync_s;
    ev.wait_s = r->wait_s;
    ev.eval_s = r->eval_s + (comm_now_s() - t_begin);
    snprintf(ev.message, sizeof ev.message, "eval took %.2f s", comm_now_s() - t0);
    run_emit(run, &ev);
    if (run->hooks && run->hooks->on_master) {
        /* The hook gets the master on the host, wherever it was evaluated. */
        backend_download(&r->ctx, run->master_params, em->params, np * sizeof(float));
        backend_download(&r->ctx, run->master_stats, em->stats, em->nstats * sizeof(float));
        run->hooks->on_master(run->hooks->user, em, run->master_params, run->master_stats,
                              epochs_done, r->k == run->total_outer);
    }
    r->eval_s += comm_now_s() - t_begin;
    return 0;
}
