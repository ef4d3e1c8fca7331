/* The job runner, the orchestrator of the runner's files (runner_impl.h):
 * run_job checks the job, finds a checkpoint to resume from, starts one
 * pthread per replica and supervises them; each replica thread sets itself
 * up (pinned to its share of the cores or on its GPU) and runs
 *   begin ; (batch, gradient, step) x S ; sync
 * per outer iteration of its coupling rule, the master evaluated at every
 * epoch end and every eval.every_passes, a checkpoint taken where the job asks. Placement, the
 * evaluation, checkpoints and the watchdog live in their own files. */
#include "runner.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "parle.h"
#include "runner_impl.h"
#include "topology.h"

model_spec run_model_spec(const job_config *cfg, const dataset *train)
{
    model_spec spec = cfg->model;
    spec.in_c = train->c, spec.in_h = train->h, spec.in_w = train->w;
    if (spec.classes <= 0)
        spec.classes = train->classes;
    return spec;
}

/* The device is gone for the whole process, whatever failed the job first:
 * the daemon must not run anything more on it (run_result.device_fault). */
static void note_device_fault(job_run *run, const backend_ctx *ctx)
{
    char dev[16] = "cpu";
    if (ctx->device >= 0)
        snprintf(dev, sizeof dev, "cuda:%d", ctx->device);
    pthread_mutex_lock(&run->lock);
    if (!run->result.device_fault[0])
        snprintf(run->result.device_fault, sizeof run->result.device_fault, "%s: %s", dev,
                 ctx->err);
    pthread_mutex_unlock(&run->lock);
}

/* What a replica holds in its context's memory, as far as the runner can
 * count it without asking the allocator: the model (params, grads, BN
 * statistics, activation arena), the rule's state vectors that are not the
 * model's own, the backend workspace and, on rank 0, the evaluated master.
 * Comm buffers and the loader's batches are not counted. Kept as a maximum,
 * since the workspace grows on demand. */
static void note_memory(job_run *run, replica *r)
{
    const char *names[RULE_MAX_STATE];
    float *bufs[RULE_MAX_STATE];
    int n = run->rule->state(r, names, bufs);
    size_t bytes = r->model.bytes + r->ctx.workspace_floats * sizeof(float);
    for (int i = 0; i < n; i++)
        if (bufs[i] != r->model.params && bufs[i] != r->model.grads)
            bytes += r->model.nparams * sizeof(float);
    if (r->rank == 0)
        bytes += run->eval_model.bytes;
    if (bytes > __atomic_load_n(&run->mem_bytes[r->rank], __ATOMIC_RELAXED))
        __atomic_store_n(&run->mem_bytes[r->rank], bytes, __ATOMIC_RELAXED);
}

/* The replicas' memory summed per device, as a JSON object's text:
 * {"cpu":N} or {"cuda:0":N,"cuda:1":M}. */
static void memory_json(job_run *run, char *out, size_t len)
{
    int ndev = run->where.ngpus > 0 ? run->where.ngpus : 1;
    size_t at = 0;
    out[0] = '\0';
    for (int d = 0; d < ndev && at < len; d++) {
        size_t sum = 0;
        int device = run->where.ngpus > 0 ? run->where.gpus[d] : -1;
        for (int r = 0; r < run->n; r++)
            if (topology_device(r, run->where.gpus, run->where.ngpus) == device)
                sum += __atomic_load_n(&run->mem_bytes[r], __ATOMIC_RELAXED);
        char dev[16] = "cpu";
        if (device >= 0)
            snprintf(dev, sizeof dev, "cuda:%d", device);
        at += (size_t)snprintf(out + at, len - at, "%s\"%s\":%zu", d ? "," : "{", dev, sum);
    }
    if (at + 2 > len)
        out[0] = '\0'; /* too many devices for the field: say nothing rather than half */
    else
        memcpy(out + at, "}", 2);
}

/* A stuck replica (fault injection): it comes back only once the job ends. */
static void hang_until_aborted(job_run *run)
{
    while (!comm_aborted(&run->comm))
        nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
}

/* Jobs with a stop flag (parled's) run so far in this process: the park
 * fault picks one. */
static long jobs_numbered;

/* PARLE_FAULT_REPLICA's park (fault.h): once replica 0 has reported a step
 * at or past the fault's, the chosen replica waits until the job is stopped
 * (a checkpointing stop goes on to its checkpoint), aborted, or released
 * (PARLE_FAULT_RELEASE's file exists). Returns 1 when it parked (it parks
 * once). */
static int park_if_asked(job_run *run, replica *r)
{
    if (!fault_strikes(&run->fault, r->rank, FAULT_PARK, run->number, 0) ||
        __atomic_load_n(&run->reported_step, __ATOMIC_RELAXED) < run->fault.step)
        return 0;
    run_emit_log(run, "replica %d parked after step %ld (PARLE_FAULT_REPLICA park): it waits "
                 "until the job is stopped or released", r->rank, r->step);
    while (!comm_aborted(&run->comm) &&
           !(__atomic_load_n(run->hooks->stop, __ATOMIC_RELAXED) & RUN_STOP_CHECKPOINT) &&
           !(run->park_release && access(run->park_release, F_OK) == 0))
        nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
    return 1;
}

/* Whether a stop with a checkpoint is asked: 1 once RUN_STOPPING is added
 * (runner.h), so that the request can no longer be called off. */
static int stop_taken_up(volatile int *stop)
{
    int v = __atomic_load_n(stop, __ATOMIC_RELAXED);
    while ((v & RUN_STOP_CHECKPOINT) && !(v & RUN_STOPPING))
        if (__atomic_compare_exchange_n(stop, &v, v | RUN_STOPPING, 0, __ATOMIC_RELAXED,
                                        __ATOMIC_RELAXED))
            return 1;
    return (v & RUN_STOP_CHECKPOINT) != 0;
}

/* PARLE_FAULT_REPLICA's stopping (fault.h): the chosen replica of the
 * chosen job, its replicas agreed to stop, waits before the checkpoint until
 * released or aborted. */
static void hold_stop_if_asked(job_run *run, const replica *r)
{
    if (!fault_strikes(&run->fault, r->rank, FAULT_STOPPING, run->number, 0))
        return;
    run_emit_log(run, "replica %d holds its stop before the checkpoint (PARLE_FAULT_REPLICA "
                 "stopping) until released", r->rank);
    while (!comm_aborted(&run->comm) && !(run->park_release && access(run->park_release, F_OK) == 0))
        nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
}

/* The replica's context (its GPU, or its share of the cores), model, sampler
 * and rule state; rank 0 also builds the master it evaluates. */
static int replica_setup(job_run *run, replica *r, sampler *smp, char *err, size_t errlen)
{
    const job_config *cfg = run->cfg;
    int threads = run_pin_replica(run, r->rank);
    int gpu = topology_device(r->rank, run->where.gpus, run->where.ngpus);
    if (gpu >= 0) {
        if (backend_ctx_init_cuda(&r->ctx, gpu, job_precision(cfg), cfg->deterministic, err,
                                  errlen) != 0)
            return -1;
        r->ctx.time_algorithms = job_times_conv_algorithms(cfg);
        r->ctx.batchnorm_split = strcmp(cfg->gpu_batchnorm, "split") == 0;
    } else {
        backend_ctx_init_cpu(&r->ctx, threads);
        if (backend_ctx_set_precision_cpu(&r->ctx, job_precision(cfg), err, errlen) != 0)
            return -1;
    }
    model_spec spec = run_model_spec(cfg, run->train);
    if (model_build(&r->model, &r->ctx, &spec, cfg->optim.batch, 1, err, errlen) != 0)
        return -1;
    int independent = strcmp(cfg->algorithm.init, "independent") == 0;
    model_init_params(&r->model, &r->ctx, cfg->seed, independent ? (uint32_t)replica_id(run, r) : 0);
    if (is_master(run, r)) {
        if (model_build(&run->eval_model, &r->ctx, &spec, EVAL_BATCH, 0, err, errlen) != 0)
            return -1;
        run->master_params = malloc(r->model.nparams * sizeof(float));
        run->master_stats = malloc((r->model.nstats ? r->model.nstats : 1) * sizeof(float));
        if (!run->master_params || !run->master_stats) {
            snprintf(err, errlen, "replica 0: out of memory for the master's host copy");
            return -1;
        }
    }
    if (sampler_init(smp, cfg, run->train->n, replica_id(run, r), run->n) != 0) {
        snprintf(err, errlen, "replica %d: out of memory for the sampler", r->rank);
        return -1;
    }
    return run->rule->init(r, err, errlen);
}

typedef struct replica_arg {
    job_run *run;
    int rank;
} replica_arg;

static void *replica_main(void *p)
{
    replica_arg *arg = p;
    job_run *run = arg->run;
    const job_config *cfg = run->cfg;
    const dataset *train = run->train;
    replica r = {.rank = arg->rank, .n = run->n, .id = run->first + arg->rank, .cfg = cfg,
                 .comm = &run->comm, .reseeds = run->resume.reseeds};
    char err[512] = "";
    sampler smp = {0};
    batch_loader loader = {0};
    /* The batch staged for the next step, and its slot (model_stage_batch). */
    loader_batch next = {0};
    int slot = 0;
    if (replica_setup(run, &r, &smp, err, sizeof err) != 0)
        run_fail(run, "%s", err);
    /* Nobody starts unless everyone could. */
    if (comm_attach(&run->comm, r.rank, &r.ctx, r.model.nparams > r.model.nstats
                    ? r.model.nparams : r.model.nstats, err, sizeof err) != 0) {
        run_fail(run, "%s", err);
        goto out;
    }

    long k0 = 0, step = 0;
    if (run->resume.k > 0) {
        if (run_checkpoint_restore(run, &r, &smp, err, sizeof err) != 0)
            run_fail(run, "%s", err);
        if (comm_barrier(&run->comm, r.rank, "resume") != 0)
            goto out;
        k0 = run->resume.k;
        step = run->resume.step;
    }
    /* Batches are gathered (and augmented) by a loader thread two steps
     * ahead and staged one step ahead: step k+1's batch uploads on the copy
     * stream while step k computes, and while an outer iteration's sync
     * averages (docs/gpu.md "Batches"). */
    if (batch_loader_start(&loader, &r.ctx, &smp, train, cfg->data.augment ? &augment_cifar : NULL,
                           smp.key, (uint64_t)step, err, sizeof err) != 0)
        run_fail(run, "%s", err);
    else if (batch_loader_take(&loader, &next) == 0)
        model_stage_batch(&r.model, &r.ctx, slot, next.x, next.y, next.n);
    if (comm_barrier(&run->comm, r.rank, "start") != 0)
        goto out;

    const int S = coupling_sync_steps(run->rule, cfg, run->batches_per_pass);
    const long nb = run->outer_per_epoch;
    const philox_key dkey = philox_make_key(cfg->seed, (uint32_t)replica_id(run, &r), RNG_STREAM_DROPOUT);
    double inner_lr = cfg->algorithm.inner_lr > 0 ? cfg->algorithm.inner_lr
                                                  : job_lr_at_epoch(cfg, 0);
    r.inner_lr = (float)inner_lr;
    int turn_slot = -1; /* the turns' slot (core) this replica last ran on */
    int parked = 0;     /* PARLE_FAULT_REPLICA's park is behind it */
    long window_steps = 0;
    /* window_paused: the window's seconds in evaluations and checkpoints,
     * left out of its images_per_sec (the training rate). */
    double window_loss = 0.0, window_t0 = comm_now_s(), window_paused = 0.0, epoch_loss = 0.0;
    long epoch_steps = 0;
    const int every = cfg->checkpoint.every_epochs;
    const int checkpoints = run->hooks && run->hooks->checkpoint_dir;
    for (long k = k0 + 1; k <= run->total_outer; k++) {
        int epoch = (int)((k - 1) / nb);
        r.k = k;
        r.lr = (float)job_lr_at_epoch(cfg, epoch);
        parle_schedule(cfg, nb, k, &r.gamma, &r.rho);
        run->rule->begin(&r);
        for (int l = 1; l <= S; l++) {
            const loader_batch cur = next;
            const int cur_slot = slot;
            slot = (slot + 1) % BACKEND_STAGE_SLOTS;
            if (run->scheduled) {
                /* Waiting for a core is waiting for peers: it counts as sync. */
                double tw = comm_now_s();
                int on = step_schedule_wait(&run->sched, r.rank, k, l);
                if (on < 0)
                    goto out;
                r.sync_s += comm_now_s() - tw;
                /* On its slot's core the kernel moves it no more: 3% faster. */
                if (on != turn_slot)
                    run_pin_to_core(run->where.cores[on]);
                turn_slot = on;
            }
            /* At most two held (cur and next): take cannot fail here. */
            double t0 = comm_now_s();
            (void)batch_loader_take(&loader, &next);
            double t1 = comm_now_s();
            r.wait_s += t1 - t0;
            model_stage_batch(&r.model, &r.ctx, slot, next.x, next.y, next.n);
            model_set_dropout_step(&r.model, dkey, (uint64_t)step);
            if (fault_strikes(&run->fault, r.rank, FAULT_NAN, k, l))
                vec_scale(&r.ctx, r.model.nparams, NAN, r.model.params);
            float loss = model_train_slot(&r.model, &r.ctx, cur_slot, cur.n, NULL);
            /* model_train_slot saw cur's copy finish (backend_stage_done). */
            (void)batch_loader_release(&loader, &cur);
            step++;
            __atomic_store_n(&run->at_step[r.rank], step, __ATOMIC_RELAXED);
            if (fault_strikes(&run->fault, r.rank, FAULT_HANG, k, l))
                hang_until_aborted(run);
            if (fault_strikes(&run->fault, r.rank, FAULT_DEVICE, k, l))
                backend_fail_device(&r.ctx, "%s:%d: injected device fault (PARLE_FAULT_REPLICA): "
                                    "the device is unusable for this process", __FILE__, __LINE__);
            if (fault_strikes(&run->fault, r.rank, FAULT_OOM, k, l))
                backend_free(&r.ctx, backend_alloc(&r.ctx, (size_t)1 << 50));
            if (fault_strikes(&run->fault, r.rank, FAULT_STEP, k, l))
                run_replica_failed(run, &r, "replica %d: injected failure at step %ld (outer "
                                   "iteration %ld, inner step %d)", r.rank, step, k, l);
            else if (backend_failed(&r.ctx))
                run_replica_failed(run, &r, "replica %d: step %ld: %s", r.rank, step, r.ctx.err);
            else if (!isfinite(loss) && !r.failing)
                run_replica_failed(run, &r, "replica %d: loss is %s at step %ld (epoch %d, "
                                   "outer iteration %ld): the learning rate may be too high",
                                   r.rank, isnan(loss) ? "NaN" : "infinite", step, epoch, k);
            /* A failure anywhere ends every replica here or at its next collective. */
            if (comm_aborted(&run->comm))
                goto out;
            r.step = step;
            r.last_loss = loss;
            /* A failing replica's updates wait for its re-seed (reseed.c). */
            if (!r.failing || run->rule->step_meets)
                run->rule->step(&r);
            r.step_s += comm_now_s() - t1;
            if (run->scheduled)
                step_schedule_done(&run->sched, r.rank, l);
            if (r.failing)
                continue;
            window_loss += loss;
            window_steps++;
            epoch_loss += loss;
            epoch_steps++;
        }
        if (run_reseed_point(run, &r, step) != 0)
            goto out;
        if (fault_strikes(&run->fault, r.rank, FAULT_SYNC, k, 0))
            run_replica_failed(run, &r, "replica %d: injected failure in the sync of outer "
                               "iteration %ld (step %ld)", r.rank, k, step);
        int synced = run->rule->sync(&r);
        /* A rank that left a collective half-way cannot be re-seeded. */
        if (synced != 0 && !comm_aborted(&run->comm))
            run_fail(run, "replica %d: the sync of outer iteration %ld (step %ld): %s", r.rank, k,
                     step, r.ctx.err);
        else if (synced == 0 && backend_failed(&r.ctx))
            run_replica_failed(run, &r, "replica %d: the sync of outer iteration %ld (step %ld): "
                               "%s", r.rank, k, step, r.ctx.err);
        note_memory(run, &r);
        if (comm_aborted(&run->comm) || run_reseed_point(run, &r, step) != 0)
            goto out;
        if (is_master(run, &r) && (window_steps >= cfg->log_every || k % nb == 0)) {
            double t = comm_now_s(), elapsed = t - run->t_start;
            double done = (double)k / (double)run->total_outer;
            run_event ev = {
                .kind = RUN_EV_PROGRESS, .epoch = epoch, .epochs = cfg->epochs, .step = step,
                .data_passes = (double)step / (double)run->batches_per_pass,
                .train_loss = window_steps ? window_loss / (double)window_steps : 0.0,
                .images_per_sec = (double)window_steps * cfg->optim.batch * run->n /
                                  (t - window_t0 - window_paused),
                .lr = r.lr, .elapsed_s = elapsed, .eta_s = elapsed / done * (1.0 - done),
                .compute_s = r.step_s, .sync_s = r.sync_s, .wait_s = r.wait_s,
                .eval_s = r.eval_s, .reseeds = r.reseeds,
            };
            parle_report(cfg, run->rule, run->n, r.gamma, r.rho, &ev.gamma, &ev.rho);
            if (run->rule->describe)
                run->rule->describe(&r, ev.rule, sizeof ev.rule);
            memory_json(run, ev.memory, sizeof ev.memory);
            run_emit(run, &ev);
            __atomic_store_n(&run->reported_step, step, __ATOMIC_RELAXED);
            window_steps = 0;
            window_loss = 0.0;
            window_t0 = t;
            window_paused = 0.0;
        }
        parked = parked || park_if_asked(run, &r);
        int checkpointed = 0;
        double paused_t0 = comm_now_s();
        /* Where step crossed a multiple of eval_steps: a function of the step
         * alone, so a resumed run evaluates where an uninterrupted one does. */
        if ((k % nb == 0 || step / run->eval_steps > (step - S) / run->eval_steps) &&
            run_evaluate_master(run, &r, (double)k / (double)nb, step,
                                epoch_loss / (double)(epoch_steps ? epoch_steps : 1)) != 0)
            goto out;
        if (k % nb == 0) {
            epoch_loss = 0.0;
            epoch_steps = 0;
            /* The last boundary needs none: the job is over. */
            if (checkpoints && every > 0 && (k / nb) % every == 0 && k < run->total_outer) {
                if (run_checkpoint_take(run, &r, &loader, step) != 0)
                    goto out;
                checkpointed = 1;
            }
        }
        window_paused += comm_now_s() - paused_t0;
        /* Everyone agrees whether to stop here (a daemon shutdown; a cancel
         * aborts the comm instead, and failures abort it where they happen). */
        int asked = run->hooks && run->hooks->stop ? stop_taken_up(run->hooks->stop) : 0;
        int agreed = comm_any(&run->comm, r.rank, asked);
        if (agreed < 0)
            goto out;
        if (agreed) {
            hold_stop_if_asked(run, &r);
            if (checkpoints && !checkpointed &&
                k < run->total_outer && run_checkpoint_take(run, &r, &loader, step) != 0)
                goto out;
            if (is_master(run, &r))
                run->result.stopped = k < run->total_outer;
            break;
        }
    }
out:
    comm_detach(&run->comm, r.rank);
    if (r.rule_state)
        run->rule->free(&r);
    batch_loader_stop(&loader);
    sampler_free(&smp);
    if (is_master(run, &r)) {
        model_free(&run->eval_model, &r.ctx);
        free(run->master_params);
        free(run->master_stats);
    }
    model_free(&r.model, &r.ctx);
    if (r.ctx.device_fault)
        note_device_fault(run, &r.ctx);
    backend_ctx_free(&r.ctx);
    pthread_mutex_lock(&run->lock);
    run->live--;
    pthread_cond_signal(&run->ended);
    pthread_mutex_unlock(&run->lock);
    return NULL;
}

int run_job(const job_config *cfg, const dataset *train, const dataset *test,
            const run_devices *where, const run_hooks *hooks, run_result *result, char *err,
            size_t errlen)
{
    job_run run = {.cfg = cfg, .train = train, .test = test, .hooks = hooks, .where = *where,
                   .n = cfg->algorithm.replicas};
    memset(result, 0, sizeof(*result));
    run.rule = coupling_find(cfg->algorithm.name);
    if (!run.rule) {
        snprintf(err, errlen, "algorithm.name: no coupling rule \"%s\"", cfg->algorithm.name);
        return -1;
    }
    if (where->ncores < 1 || run.n < 1) {
        snprintf(err, errlen, "run: no cores (%d) or replicas (%d)", where->ncores, run.n);
        return -1;
    }
    run.nlocal = where->net ? where->count : run.n;
    run.first = where->net ? where->first : 0;
    if (where->net && (run.nlocal < 1 || run.first < 0 || run.first + run.nlocal > run.n ||
                       !coupling_runs_across_ranks(run.rule, where->ngpus > 0))) {
        char names[256];
        coupling_gpu_net_names(0, names, sizeof names);
        snprintf(err, errlen, "run: across MPI ranks a job runs with a rule that can (%s; "
                 "every rule on CPUs) and at least one replica per rank (docs/mpi.md)", names);
        return -1;
    }
    if (train->n < cfg->optim.batch || test->n < 1) {
        snprintf(err, errlen, "data: %d training examples are fewer than one batch of %d",
                 train->n, cfg->optim.batch);
        return -1;
    }
    if (fault_parse(getenv("PARLE_FAULT_REPLICA"), &run.fault, err, errlen) != 0)
        return -1;
    if (hooks && hooks->stop)
        run.number = __atomic_add_fetch(&jobs_numbered, 1, __ATOMIC_RELAXED);
    run.park_release = getenv("PARLE_FAULT_RELEASE");
    run.reseeding = strcmp(cfg->algorithm.on_replica_failure, "reseed") == 0;
    if (run.reseeding && where->net && where->ngpus > 0) {
        snprintf(err, errlen, "algorithm.on_replica_failure: \"reseed\" across MPI ranks runs on "
                 "CPUs only (a failed replica reads the others' weights, gathered on the host: "
                 "docs/mpi.md)");
        return -1;
    }
    long shard = cfg->data.split ? train->n / run.n : train->n;
    run.outer_per_epoch = run.batches_per_pass = (shard + cfg->optim.batch - 1) / cfg->optim.batch;
    const int S = run.rule->steps_per_sync(cfg);
    if (S == RULE_STEPS_PER_PASS)
        run.outer_per_epoch = 1;
    run.total_outer = run.outer_per_epoch * cfg->epochs;
    run.eval_steps = run_eval_steps(&run, run.outer_per_epoch * coupling_sync_steps(
                                              run.rule, cfg, run.batches_per_pass));
    /* comm_attach sizes the all-reduce buffer once the models are built. */
    if (comm_init(&run.comm, run.nlocal, 0, err, errlen) != 0)
        return -1;
    run.comm.net = where->net;
    run.comm.first = run.first;
    pthread_mutex_init(&run.lock, NULL);
    /* run_supervise's waits count on the monotonic clock: a step of the
     * wall clock neither stalls nor hurries its watch. */
    pthread_condattr_t monotonic;
    pthread_condattr_init(&monotonic);
    pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
    pthread_cond_init(&run.ended, &monotonic);
    pthread_condattr_destroy(&monotonic);
    run.t_start = comm_now_s();
    if (hooks && hooks->checkpoint_dir)
        run_checkpoint_find(&run);
    /* Out of memory for it, the kernel's time slices share the cores. */
    run.scheduled = run_replicas_float(&run) && S != RULE_STEPS_PER_PASS &&
                    step_schedule_wanted(run.nlocal, where->ncores, S) &&
                    step_schedule_init(&run.sched, run.nlocal, where->ncores, S,
                                       run.resume.k + 1) == 0;
    pthread_t *tids = calloc((size_t)run.n, sizeof(pthread_t));
    replica_arg *args = calloc((size_t)run.n, sizeof(replica_arg));
    run.at_step = calloc((size_t)run.n, sizeof(long));
    run.mem_bytes = calloc((size_t)run.n, sizeof(size_t));
    run.cause = calloc((size_t)run.n, sizeof(*run.cause));
    int started = 0;
    if (tids && args && run.at_step && run.mem_bytes && run.cause) {
        for (; started < run.nlocal; started++) {
            args[started] = (replica_arg){.run = &run, .rank = started};
            if (fault_strikes(&run.fault, started, FAULT_START, 0, 0))
                break;
            pthread_mutex_lock(&run.lock);
            run.live++;
            pthread_mutex_unlock(&run.lock);
            if (pthread_create(&tids[started], NULL, replica_main, &args[started]) != 0) {
                pthread_mutex_lock(&run.lock);
                run.live--;
                pthread_mutex_unlock(&run.lock);
                break;
            }
        }
    }
    /* The started replicas meet the missing one at their first collective:
     * the abort sends them home. */
    if (started < run.nlocal)
        run_fail(&run, "run: could not start replica thread %d of %d", run.first + started,
                 run.n);
    run_supervise(&run);
    for (int i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    free(tids);
    free(args);
    free(run.at_step);
    free(run.mem_bytes);
    free(run.cause);
    /* Ended here early (a failure, a cancel): the other processes' replicas
     * would wait for ours until their deadline; tell them now. */
    if (where->net && comm_aborted(&run.comm))
        where->net->fail(where->net, run.failed ? run.err : "the job was stopped");
    comm_free(&run.comm);
    if (run.scheduled)
        step_schedule_free(&run.sched);
    pthread_cond_destroy(&run.ended);
    pthread_mutex_destroy(&run.lock);
    *result = run.result;
    if (run.failed) {
        snprintf(err, errlen, "%s", run.err);
        return -1;
    }
    if (run.stopped_now) {
        result->stopped = 1;
        result->cancelled = (run.stopped_now & RUN_STOP) != 0;
    }
    return 0;
}
