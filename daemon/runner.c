/* The job runner: one pthread per replica, pinned to its share of the cores,
 * each running  begin ; (batch, gradient, step) x S ; sync  per outer
 * iteration of its coupling rule, and the master evaluated at every epoch end. */
#include "runner.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "augment.h"
#include "checkpoint.h"
#include "coupling.h"
#include "replica.h"
#include "sampler.h"

typedef struct job_run {
    const job_config *cfg;
    const dataset *train, *test;
    const run_hooks *hooks;
    const coupling_rule *rule;
    comm comm;
    int n;
    const int *cores;
    int ncores;
    long outer_per_epoch;     /* nb: batches per pass over a replica's data */
    long total_outer;
    double t_start;
    model eval_model;         /* the master, evaluated on rank 0's thread */
    checkpoint_info resume;   /* resume.k > 0: continue from this checkpoint */
    pthread_mutex_t lock;     /* guards failed / err */
    int failed;
    char err[512];
    run_result result;
} job_run;

void run_openmp_defaults(void)
{
    setenv("OMP_WAIT_POLICY", "passive", 0);
}

int run_cpu_cores(int **cores, char *err, size_t errlen)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    *cores = NULL;
    if (sched_getaffinity(0, sizeof set, &set) != 0 || CPU_COUNT(&set) == 0) {
        snprintf(err, errlen, "sched_getaffinity: %s", strerror(errno));
        return -1;
    }
    if (!(*cores = calloc((size_t)CPU_COUNT(&set), sizeof(int)))) {
        snprintf(err, errlen, "out of memory listing cores");
        return -1;
    }
    int n = 0;
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &set))
            (*cores)[n++] = c;
    return n;
}

model_spec run_model_spec(const job_config *cfg, const dataset *train)
{
    model_spec spec = cfg->model;
    spec.in_c = train->c, spec.in_h = train->h, spec.in_w = train->w;
    if (spec.classes <= 0)
        spec.classes = train->classes;
    return spec;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void run_fail(job_run *run, const char *msg)
{
    pthread_mutex_lock(&run->lock);
    if (!run->failed) {
        run->failed = 1;
        snprintf(run->err, sizeof run->err, "%s", msg);
    }
    pthread_mutex_unlock(&run->lock);
}

static int run_has_failed(job_run *run)
{
    pthread_mutex_lock(&run->lock);
    int f = run->failed;
    pthread_mutex_unlock(&run->lock);
    return f;
}

static void emit(job_run *run, const run_event *ev)
{
    if (run->hooks && run->hooks->on_event)
        run->hooks->on_event(run->hooks->user, ev);
}

/* gamma_k and rho_k grow by (1 + growth/nb) per outer iteration, capped. */
static float schedule_growth(double start, double cap, double growth, long nb, long k)
{
    double v = start * pow(1.0 + growth / (double)nb, (double)k);
    return (float)(v < cap ? v : cap);
}

/* Replica a's cores: a set of max(1, ncores / n). When replicas outnumber the
 * cores and do not divide them evenly, round-robin pinning would leave some
 * cores with more replicas than others, and synchronous rules run at the pace
 * of the busiest core: there each replica may run on any core, one thread
 * each, and the kernel balances them. */
static int pin_replica(const job_run *run, int rank)
{
    int share = run->ncores / run->n > 1 ? run->ncores / run->n : 1;
    int floating = run->n > run->ncores && run->n % run->ncores != 0;
    cpu_set_t set;
    CPU_ZERO(&set);
    for (int i = 0; i < (floating ? run->ncores : share); i++)
        CPU_SET(run->cores[floating ? i : (rank * share + i) % run->ncores], &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    return share;
}

/* Every replica takes part (collectives); rank 0 evaluates the master. */
static void evaluate_master(job_run *run, replica *r, int epochs_done, long step, double train_loss)
{
    const job_config *cfg = run->cfg;
    model *em = &run->eval_model;
    size_t np = r->model.nparams;
    const float *master = comm_allreduce_mean(r->comm, r->rank, &r->ctx, run->rule->weights(r), np);
    double dist = 0.0;
    for (size_t i = 0; i < np; i++) {
        double d = (double)run->rule->weights(r)[i] - master[i];
        dist += d * d;
    }
    if (r->rank == 0)
        memcpy(em->params, master, np * sizeof(float));
    if (strcmp(cfg->eval.bn, "average") == 0) {
        const float *stats = comm_allreduce_mean(r->comm, r->rank, &r->ctx, r->model.stats,
                                                 r->model.nstats);
        if (r->rank == 0)
            memcpy(em->stats, stats, em->nstats * sizeof(float));
    }
    /* Each rank's distance to the master, averaged over ranks. */
    float dist_f = (float)sqrt(dist);
    const float *mean_dist = comm_allreduce_mean(r->comm, r->rank, &r->ctx, &dist_f, 1);
    if (r->rank != 0)
        return;
    double t0 = now_s();
    if (strcmp(cfg->eval.bn, "recompute") == 0)
        model_recompute_bn(em, &r->ctx, run->train->images, run->train->n);
    else if (strcmp(cfg->eval.bn, "replica0") == 0)
        memcpy(em->stats, r->model.stats, em->nstats * sizeof(float));
    run_event ev = {.kind = RUN_EV_EVAL, .epoch = epochs_done, .epochs = cfg->epochs,
                    .step = step, .data_passes = (double)step / (double)run->outer_per_epoch,
                    .lr = r->lr, .gamma = cfg->algorithm.L > 0 ? r->gamma : 0,
                    .rho = run->n > 1 ? r->rho : 0,
                    .train_loss = train_loss, .dist_to_master = mean_dist[0]};
    model_evaluate(em, &r->ctx, run->test->images, run->test->labels, run->test->n,
                   &ev.test_loss, &ev.test_error);
    run->result.test_error = ev.test_error;
    run->result.test_loss = ev.test_loss;
    run->result.epochs_done = epochs_done;
    ev.elapsed_s = now_s() - run->t_start;
    ev.sync_s = r->sync_s;
    snprintf(ev.message, sizeof ev.message, "eval took %.2f s", now_s() - t0);
    emit(run, &ev);
}

static void emit_log(job_run *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void emit_log(job_run *run, const char *fmt, ...)
{
    run_event ev = {.kind = RUN_EV_LOG, .epochs = run->cfg->epochs};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ev.message, sizeof ev.message, fmt, ap);
    va_end(ap);
    emit(run, &ev);
}

/* The replica's checkpointed tensors: the rule's state vectors and the BN
 * statistics, as 1-D tensors. Returns how many. */
static int replica_tensors(job_run *run, replica *r, tensor_info *ts, float **data)
{
    const char *names[RULE_MAX_STATE];
    int n = run->rule->state(r, names, data);
    for (int i = 0; i <= n; i++) {
        memset(&ts[i], 0, sizeof ts[i]);
        snprintf(ts[i].name, sizeof ts[i].name, "%s", i < n ? names[i] : "bn_stats");
        ts[i].count = i < n ? r->model.nparams : r->model.nstats;
        ts[i].ndim = 1;
        ts[i].shape[0] = (int)ts[i].count;
    }
    data[n] = r->model.stats;
    return n + 1;
}

/* Every rank writes its file; if all did, rank 0 completes the checkpoint. */
static void take_checkpoint(job_run *run, replica *r, const batch_loader *loader, long step)
{
    tensor_info ts[RULE_MAX_STATE + 1];
    float *data[RULE_MAX_STATE + 1];
    int n = replica_tensors(run, r, ts, data);
    char pass[32], pos[32], draws[32], sync_s[32], err[512];
    long at_pass;
    int at_pos;
    uint64_t at_draws;
    /* Where the replica is, not where the prefetching loader already got to. */
    batch_loader_position(loader, &at_pass, &at_pos, &at_draws);
    snprintf(pass, sizeof pass, "%ld", at_pass);
    snprintf(pos, sizeof pos, "%d", at_pos);
    snprintf(draws, sizeof draws, "%llu", (unsigned long long)at_draws);
    snprintf(sync_s, sizeof sync_s, "%.17g", r->sync_s);
    st_meta meta[] = {{"sampler_pass", pass}, {"sampler_pos", pos}, {"sampler_draws", draws},
                      {"sync_s", sync_s}};
    int bad = checkpoint_write_replica(run->hooks->checkpoint_dir, r->k, r->rank, ts,
                                       (const float *const *)data, n, meta, 4, err,
                                       sizeof err) != 0;
    if (bad)
        emit_log(run, "checkpoint at outer iteration %ld failed (the previous one stays): %s",
                 r->k, err);
    if (comm_any(r->comm, r->rank, bad) || r->rank != 0)
        return;
    checkpoint_info info = {.k = r->k, .step = step, .replicas = run->n,
                            .epochs_done = run->result.epochs_done,
                            .test_error = run->result.test_error,
                            .test_loss = run->result.test_loss,
                            .elapsed_s = now_s() - run->t_start};
    if (checkpoint_commit(run->hooks->checkpoint_dir, &info, run->cfg->checkpoint.keep, err,
                          sizeof err) != 0)
        emit_log(run, "checkpoint at outer iteration %ld failed (the previous one stays): %s",
                 r->k, err);
    else
        emit_log(run, "checkpoint at outer iteration %ld (step %ld) written", r->k, step);
}

static int meta_long(const char *json, const char *key, long long *out)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":\"", key);
    const char *at = json ? strstr(json, pat) : NULL;
    if (!at)
        return -1;
    char *end;
    *out = strtoll(at + strlen(pat), &end, 10);
    return *end == '"' ? 0 : -1;
}

static int restore_replica(job_run *run, replica *r, sampler *smp, char *err, size_t errlen)
{
    tensor_info ts[RULE_MAX_STATE + 1];
    float *data[RULE_MAX_STATE + 1];
    int n = replica_tensors(run, r, ts, data);
    char *meta = NULL;
    if (checkpoint_read_replica(&run->resume, r->rank, ts, data, n, &meta, err, errlen) != 0)
        return -1;
    long long pass = -1, pos = -1, draws = 0;
    int rc = meta_long(meta, "sampler_pass", &pass) | meta_long(meta, "sampler_pos", &pos) |
             meta_long(meta, "sampler_draws", &draws);
    const char *sync_at = meta ? strstr(meta, "\"sync_s\":\"") : NULL;
    r->sync_s = sync_at ? strtod(sync_at + 10, NULL) : 0.0;
    free(meta);
    if (rc != 0 || pos < 0 || pos > smp->count || pass < 0) {
        snprintf(err, errlen, "checkpoint at outer iteration %ld: replica %d: bad sampler "
                 "position in its metadata", run->resume.k, r->rank);
        return -1;
    }
    sampler_restore(smp, (long)pass, (int)pos, (uint64_t)draws);
    return 0;
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
    replica r = {.rank = arg->rank, .n = run->n, .cfg = cfg, .comm = &run->comm};
    char err[512] = "";
    int threads = pin_replica(run, r.rank);
    backend_ctx_init_cpu(&r.ctx, threads);

    int batch = cfg->optim.batch;
    sampler smp = {0};
    batch_loader loader = {0};
    model_spec spec = run_model_spec(cfg, train);
    int setup = -1;
    if (model_build(&r.model, &spec, batch, err, sizeof err) == 0) {
        int independent = strcmp(cfg->algorithm.init, "independent") == 0;
        model_init_params(&r.model, cfg->seed, independent ? (uint32_t)r.rank : 0);
        if (sampler_init(&smp, cfg, train->n, r.rank, run->n) != 0)
            snprintf(err, sizeof err, "replica %d: out of memory for the sampler", r.rank);
        else
            setup = run->rule->init(&r, err, sizeof err);
    }
    if (setup != 0)
        run_fail(run, err);
    /* Nobody starts unless everyone could. */
    if (comm_any(&run->comm, r.rank, setup != 0))
        goto out;

    long k0 = 0, step = 0;
    if (run->resume.k > 0) {
        int bad = restore_replica(run, &r, &smp, err, sizeof err) != 0;
        if (bad)
            run_fail(run, err);
        if (comm_any(&run->comm, r.rank, bad))
            goto out;
        k0 = run->resume.k;
        step = run->resume.step;
    }
    /* Batches are gathered (and augmented) by a loader thread one step ahead. */
    int bad_loader = batch_loader_start(&loader, &smp, train,
                                        cfg->data.augment ? &augment_cifar : NULL, smp.key,
                                        (uint64_t)step, err, sizeof err) != 0;
    if (bad_loader)
        run_fail(run, err);
    if (comm_any(&run->comm, r.rank, bad_loader))
        goto out;

    const int S = run->rule->steps_per_sync(cfg);
    const long nb = run->outer_per_epoch;
    const philox_key dkey = philox_make_key(cfg->seed, (uint32_t)r.rank, RNG_STREAM_DROPOUT);
    double inner_lr = cfg->algorithm.inner_lr > 0 ? cfg->algorithm.inner_lr
                                                  : job_lr_at_epoch(cfg, 0);
    r.inner_lr = (float)inner_lr;
    long window_steps = 0;
    double window_loss = 0.0, window_t0 = now_s(), epoch_loss = 0.0;
    long epoch_steps = 0;
    const int every = cfg->checkpoint.every_epochs;
    const int checkpoints = run->hooks && run->hooks->checkpoint_dir;
    for (long k = k0 + 1; k <= run->total_outer; k++) {
        int epoch = (int)((k - 1) / nb);
        r.k = k;
        r.lr = (float)job_lr_at_epoch(cfg, epoch);
        r.gamma = schedule_growth(cfg->algorithm.gamma, cfg->algorithm.gamma_max,
                                  cfg->algorithm.growth, nb, k);
        r.rho = schedule_growth(cfg->algorithm.rho, cfg->algorithm.rho_max,
                                cfg->algorithm.growth, nb, k);
        run->rule->begin(&r);
        int bad = 0;
        for (int l = 0; l < S; l++) {
            float *xb;
            int32_t *yb;
            int n;
            batch_loader_next(&loader, &xb, &yb, &n);
            r.model.dropout_key = dkey;
            r.model.dropout_counter = (uint64_t)step << 32;
            float loss = model_train_grads(&r.model, &r.ctx, xb, yb, n, NULL);
            step++;
            if (!isfinite(loss)) {
                snprintf(err, sizeof err,
                         "replica %d: loss is %s at step %ld (epoch %d): the learning rate may be too high",
                         r.rank, isnan(loss) ? "NaN" : "infinite", step, epoch);
                run_fail(run, err);
                bad = 1;
                break;
            }
            run->rule->step(&r);
            window_loss += loss;
            window_steps++;
            epoch_loss += loss;
            epoch_steps++;
        }
        if (!bad)
            run->rule->sync(&r);
        if (r.rank == 0 && (window_steps >= cfg->log_every || k % nb == 0)) {
            double t = now_s(), elapsed = t - run->t_start;
            double done = (double)k / (double)run->total_outer;
            run_event ev = {
                .kind = RUN_EV_PROGRESS, .epoch = epoch, .epochs = cfg->epochs, .step = step,
                .data_passes = (double)step / (double)nb,
                .train_loss = window_steps ? window_loss / (double)window_steps : 0.0,
                .images_per_sec = (double)window_steps * batch * run->n / (t - window_t0),
                .lr = r.lr, .gamma = cfg->algorithm.L > 0 ? r.gamma : 0,
                .rho = run->n > 1 ? r.rho : 0,
                .elapsed_s = elapsed, .eta_s = elapsed / done * (1.0 - done),
                .compute_s = elapsed - r.sync_s, .sync_s = r.sync_s,
            };
            emit(run, &ev);
            window_steps = 0;
            window_loss = 0.0;
            window_t0 = t;
        }
        int checkpointed = 0;
        if (!bad && k % nb == 0) {
            evaluate_master(run, &r, epoch + 1, step, epoch_loss / (double)(epoch_steps ? epoch_steps : 1));
            if (r.rank == 0 && run->hooks && run->hooks->on_master)
                run->hooks->on_master(run->hooks->user, &run->eval_model, epoch + 1,
                                      k == run->total_outer);
            epoch_loss = 0.0;
            epoch_steps = 0;
            /* The last boundary needs none: the job is over. */
            if (checkpoints && every > 0 && (k / nb) % every == 0 && k < run->total_outer) {
                take_checkpoint(run, &r, &loader, step);
                checkpointed = 1;
            }
        }
        /* Everyone agrees whether to go on: a failure anywhere, or a stop. */
        int asked = run->hooks && run->hooks->stop
                        ? __atomic_load_n(run->hooks->stop, __ATOMIC_RELAXED) : 0;
        int want = bad || run_has_failed(run) ? 4 : asked;
        int agreed = comm_any(&run->comm, r.rank, want);
        if (agreed) {
            if (!(agreed & 4) && (agreed & RUN_STOP_CHECKPOINT) && checkpoints && !checkpointed &&
                k < run->total_outer)
                take_checkpoint(run, &r, &loader, step);
            if (r.rank == 0)
                run->result.stopped = !(agreed & 4) && k < run->total_outer;
            break;
        }
    }
out:
    if (r.rule_state)
        run->rule->free(&r);
    batch_loader_stop(&loader);
    sampler_free(&smp);
    model_free(&r.model);
    backend_ctx_free(&r.ctx);
    return NULL;
}

int run_job(const job_config *cfg, const dataset *train, const dataset *test, const int *cores,
            int ncores, const run_hooks *hooks, run_result *result, char *err, size_t errlen)
{
    job_run run = {.cfg = cfg, .train = train, .test = test, .hooks = hooks, .cores = cores,
                   .ncores = ncores, .n = cfg->algorithm.replicas};
    memset(result, 0, sizeof(*result));
    run.rule = coupling_find(cfg->algorithm.name);
    if (!run.rule) {
        snprintf(err, errlen, "algorithm.name: no coupling rule \"%s\"", cfg->algorithm.name);
        return -1;
    }
    if (ncores < 1 || run.n < 1) {
        snprintf(err, errlen, "run: no cores (%d) or replicas (%d)", ncores, run.n);
        return -1;
    }
    if (train->n < cfg->optim.batch || test->n < 1) {
        snprintf(err, errlen, "data: %d training examples are fewer than one batch of %d",
                 train->n, cfg->optim.batch);
        return -1;
    }
    long shard = cfg->data.split ? train->n / run.n : train->n;
    run.outer_per_epoch = (shard + cfg->optim.batch - 1) / cfg->optim.batch;
    run.total_outer = run.outer_per_epoch * cfg->epochs;
    model_spec spec = run_model_spec(cfg, train);
    if (model_build(&run.eval_model, &spec, 256, err, errlen) != 0)
        return -1;
    if (comm_init(&run.comm, run.n, run.eval_model.nparams, err, errlen) != 0) {
        model_free(&run.eval_model);
        return -1;
    }
    pthread_mutex_init(&run.lock, NULL);
    run.t_start = now_s();
    if (hooks && hooks->checkpoint_dir) {
        char log[2048];
        int found = checkpoint_find_latest(hooks->checkpoint_dir, run.n, &run.resume, log, sizeof log);
        for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n"))
            emit_log(&run, "%s", line);
        if (found == 1 && run.resume.k < run.total_outer) {
            run.t_start -= run.resume.elapsed_s;
            run.result.epochs_done = run.resume.epochs_done;
            run.result.test_error = run.resume.test_error;
            run.result.test_loss = run.resume.test_loss;
            run.result.resumed_k = run.resume.k;
            run.result.resumed_step = run.resume.step;
            run_event ev = {.kind = RUN_EV_RESUME, .epochs = cfg->epochs,
                            .epoch = (int)(run.resume.k / run.outer_per_epoch),
                            .step = run.resume.step,
                            .data_passes = (double)run.resume.step / (double)run.outer_per_epoch,
                            .test_error = run.resume.test_error,
                            .test_loss = run.resume.test_loss,
                            .elapsed_s = run.resume.elapsed_s};
            snprintf(ev.message, sizeof ev.message,
                     "resuming from checkpoint at outer iteration %ld (step %ld)", run.resume.k,
                     run.resume.step);
            emit(&run, &ev);
        } else {
            memset(&run.resume, 0, sizeof run.resume);
        }
    }
    pthread_t *tids = calloc((size_t)run.n, sizeof(pthread_t));
    replica_arg *args = calloc((size_t)run.n, sizeof(replica_arg));
    int started = 0;
    if (tids && args) {
        for (; started < run.n; started++) {
            args[started] = (replica_arg){.run = &run, .rank = started};
            if (pthread_create(&tids[started], NULL, replica_main, &args[started]) != 0)
                break;
        }
    }
    if (started < run.n) {
        /* Threads already started wait at a barrier sized for n: we cannot
         * free them; refuse to go on rather than deadlock. */
        snprintf(err, errlen, "run: could not start replica thread %d of %d", started, run.n);
        if (started == 0) {
            free(tids);
            free(args);
            comm_free(&run.comm);
            model_free(&run.eval_model);
            pthread_mutex_destroy(&run.lock);
            return -1;
        }
        run_fail(&run, err);
    }
    for (int i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    free(tids);
    free(args);
    comm_free(&run.comm);
    model_free(&run.eval_model);
    pthread_mutex_destroy(&run.lock);
    *result = run.result;
    if (run.failed) {
        snprintf(err, errlen, "%s", run.err);
        return -1;
    }
    return 0;
}
