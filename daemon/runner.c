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
#include "fault.h"
#include "replica.h"
#include "sampler.h"
#include "step_schedule.h"
#include "topology.h"

typedef struct job_run {
    const job_config *cfg;
    const dataset *train, *test;
    const run_hooks *hooks;
    const coupling_rule *rule;
    int parle_family;         /* Parle and its special cases: gamma and rho mean something */
    comm comm;
    int n;                    /* the job's replicas, in all processes */
    int first, nlocal;        /* this process's: first .. first + nlocal - 1 (comm ranks 0..) */
    run_devices where;
    long outer_per_epoch;     /* nb: batches per pass over a replica's data */
    long batches_per_pass;    /* the same, but 1 outer iteration an epoch for
                                 RULE_STEPS_PER_PASS rules, whose S is nb */
    long total_outer;
    double t_start;
    model eval_model;         /* the master, evaluated on rank 0's thread, in its memory */
    float *master_params, *master_stats; /* its host copy for on_master */
    checkpoint_info resume;   /* resume.k > 0: continue from this checkpoint */
    fault_point fault;        /* PARLE_FAULT_REPLICA (tests) */
    long *at_step;            /* each replica's last step, for the watchdog's message */
    size_t *mem_bytes;        /* each replica's peak memory as note_memory counts it */
    step_schedule sched;      /* turns on the cores for floating replicas (step_schedule.h) */
    int scheduled;            /* ... when they take them */
    pthread_mutex_t lock;     /* guards failed, stopped_now, err, live */
    pthread_cond_t ended;     /* a replica thread finished */
    int live;                 /* replica threads not yet finished */
    int failed;
    int stopped_now;          /* the RUN_STOP / RUN_STOP_NOW that ended the job */
    char err[512];
    run_result result;
} job_run;

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

int run_gpus(const char *devices, int *gpus, char *err, size_t errlen)
{
    enum job_devices kind;
    uint64_t ids;
    int present = backend_cuda_devices(), n = 0;
    if (job_devices_parse(devices, &kind, &ids) != 0) {
        snprintf(err, errlen, "devices: \"%s\" is not cpu, auto, gpu or GPU ids", devices);
        return -1;
    }
    if (kind == DEVICES_GPU && present == 0) {
        snprintf(err, errlen, "devices: \"gpu\": this machine has no GPU");
        return -1;
    }
    for (int i = 0; i < 64; i++) {
        int wanted = kind == DEVICES_IDS ? (ids >> i) & 1
                                         : (kind != DEVICES_CPU && i < present);
        if (wanted && i >= present) {
            snprintf(err, errlen, "devices: GPU %d: this machine has %d GPU%s", i, present,
                     present == 1 ? "" : "s");
            return -1;
        }
        if (wanted)
            gpus[n++] = i;
    }
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

#define now_s comm_now_s

/* A replica's number in the job (seeds, data shard, checkpoint files); r->rank
 * is its rank in this process's comm. Replica 0, in the first process, holds
 * the master and reports. */
static int replica_id(const job_run *run, const replica *r) { return run->first + r->rank; }
static int is_master(const job_run *run, const replica *r) { return replica_id(run, r) == 0; }

/* The master is evaluated in batches of this many test images. */
enum { EVAL_BATCH = 256 };

/* The job fails with `msg` (the first failure wins) and every replica leaves
 * at its next collective: the comm is aborted. */
static void run_fail(job_run *run, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void run_fail(job_run *run, const char *fmt, ...)
{
    pthread_mutex_lock(&run->lock);
    if (!run->failed && !run->stopped_now) {
        run->failed = 1;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(run->err, sizeof run->err, fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&run->lock);
    comm_abort(&run->comm, "job failed");
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

static void emit(job_run *run, const run_event *ev)
{
    if (run->hooks && run->hooks->on_event)
        run->hooks->on_event(run->hooks->user, ev);
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
        for (int r = d; r < run->n; r += ndev)
            sum += __atomic_load_n(&run->mem_bytes[r], __ATOMIC_RELAXED);
        char dev[16] = "cpu";
        if (run->where.ngpus > 0)
            snprintf(dev, sizeof dev, "cuda:%d", run->where.gpus[d]);
        at += (size_t)snprintf(out + at, len - at, "%s\"%s\":%zu", d ? "," : "{", dev, sum);
    }
    if (at + 2 > len)
        out[0] = '\0'; /* too many devices for the field: say nothing rather than half */
    else
        memcpy(out + at, "}", 2);
}

/* gamma_k and rho_k grow by (1 + growth/nb) per outer iteration, capped. */
static float schedule_growth(double start, double cap, double growth, long nb, long k)
{
    double v = start * pow(1.0 + growth / (double)nb, (double)k);
    return (float)(v < cap ? v : cap);
}

/* CPU replicas that outnumber the cores and do not divide them evenly: with
 * round-robin pinning some cores would have more replicas than others, and
 * synchronous rules run at the pace of the busiest core. Each of these may
 * run on any of the job's cores, one thread each, and takes its turns on
 * them (step_schedule.h) where its rule meets every S steps, S large enough;
 * elsewhere the kernel's time slices share the cores. */
static int replicas_float(const job_run *run)
{
    return run->where.ngpus == 0 && run->nlocal > run->where.ncores &&
           run->nlocal % run->where.ncores != 0;
}

/* Replica a's cores: a set of max(1, ncores / n), or all of them when the
 * replicas float (above). A replica on a GPU mostly launches work and copies
 * batches to it: it runs on the job's cores nearest its GPU (its NUMA
 * node's, from sysfs), shared with the GPU's other replicas. */
static int pin_replica(const job_run *run, int rank)
{
    int share = run->where.ncores / run->nlocal > 1 ? run->where.ncores / run->nlocal : 1;
    int floating = replicas_float(run);
    cpu_set_t set;
    CPU_ZERO(&set);
    int gpu = topology_device(rank, run->where.gpus, run->where.ngpus);
    if (gpu >= 0) {
        int near[run->where.ncores];
        int nnear = topology_gpu_cpus(gpu, "/sys", run->where.cores, run->where.ncores, near);
        for (int i = 0; i < nnear; i++)
            CPU_SET(near[i], &set);
    } else {
        for (int i = 0; i < (floating ? run->where.ncores : share); i++)
            CPU_SET(run->where.cores[floating ? i : (rank * share + i) % run->where.ncores], &set);
    }
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    return share;
}

static void pin_to_core(int core)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(core, &set);
    pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

/* Every replica takes part (collectives); rank 0 evaluates the master.
 * Returns 0, or -1 when the comm was aborted or this replica failed. */
static int evaluate_master(job_run *run, replica *r, int epochs_done, long step, double train_loss)
{
    const job_config *cfg = run->cfg;
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
    double t0 = now_s();
    if (strcmp(cfg->eval.bn, "recompute") == 0)
        model_recompute_bn(em, &r->ctx, run->train->images, run->train->n);
    else if (strcmp(cfg->eval.bn, "replica0") == 0)
        backend_copy(&r->ctx, em->stats, r->model.stats, em->nstats * sizeof(float));
    run_event ev = {.kind = RUN_EV_EVAL, .epoch = epochs_done, .epochs = cfg->epochs,
                    .step = step, .data_passes = (double)step / (double)run->batches_per_pass,
                    .lr = r->lr, .gamma = run->parle_family && cfg->algorithm.L > 0 ? r->gamma : 0,
                    .rho = run->parle_family && run->n > 1 ? r->rho : 0,
                    .train_loss = train_loss, .dist_to_master = mean_dist};
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
    run->result.epochs_done = epochs_done;
    ev.elapsed_s = now_s() - run->t_start;
    ev.compute_s = r->step_s;
    ev.sync_s = r->sync_s;
    ev.wait_s = r->wait_s;
    snprintf(ev.message, sizeof ev.message, "eval took %.2f s", now_s() - t0);
    emit(run, &ev);
    if (run->hooks && run->hooks->on_master) {
        /* The hook gets the master on the host, wherever it was evaluated. */
        backend_download(&r->ctx, run->master_params, em->params, np * sizeof(float));
        backend_download(&r->ctx, run->master_stats, em->stats, em->nstats * sizeof(float));
        run->hooks->on_master(run->hooks->user, em, run->master_params, run->master_stats,
                              epochs_done, r->k == run->total_outer);
    }
    return 0;
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
 * statistics, as 1-D tensors. Returns how many. The rule's vectors are saved
 * packed (model_pack_params: nparams_logical floats, without the alignment's
 * padding), so files from before the alignment still load. */
static int replica_tensors(job_run *run, replica *r, tensor_info *ts, float **data)
{
    const char *names[RULE_MAX_STATE];
    int n = run->rule->state(r, names, data);
    for (int i = 0; i <= n; i++) {
        memset(&ts[i], 0, sizeof ts[i]);
        snprintf(ts[i].name, sizeof ts[i].name, "%s", i < n ? names[i] : "bn_stats");
        ts[i].is_stat = i == n;
        ts[i].count = i < n ? r->model.nparams_logical : r->model.nstats;
        ts[i].ndim = 1;
        ts[i].shape[0] = (int)ts[i].count;
    }
    data[n] = r->model.stats;
    return n + 1;
}

/* Host copies of the replica's tensors, for files: they may live on a GPU.
 * Each holds its whole buffer; `download` fills them, the rule's vectors
 * packed. NULL entries when out of memory (reported). */
static size_t mirror_floats(const replica *r, const tensor_info *t)
{
    return t->is_stat ? r->model.nstats : r->model.nparams;
}

static int host_mirror(replica *r, const tensor_info *ts, float *const *data, int n,
                       float **host, int download)
{
    int ok = 1;
    for (int i = 0; i < n; i++) {
        host[i] = backend_host_alloc(&r->ctx, mirror_floats(r, &ts[i]) * sizeof(float));
        ok &= host[i] != NULL;
        if (host[i] && download) {
            backend_download(&r->ctx, host[i], data[i],
                             mirror_floats(r, &ts[i]) * sizeof(float));
            if (!ts[i].is_stat && !backend_failed(&r->ctx))
                model_pack_params(&r->model, host[i]);
        }
    }
    return ok && !backend_failed(&r->ctx) ? 0 : -1;
}

static void host_mirror_free(replica *r, float **host, int n)
{
    for (int i = 0; i < n; i++)
        backend_host_free(&r->ctx, host[i]);
}

/* The rule's host scalars as "rule.<name>" metadata, printed exactly; the
 * strings are the calling thread's until its next call. Returns how many. */
static int rule_scalars_meta(job_run *run, replica *r, st_meta *meta)
{
    static _Thread_local char keys[RULE_MAX_SCALARS][64], vals[RULE_MAX_SCALARS][32];
    const char *names[RULE_MAX_SCALARS];
    double *v[RULE_MAX_SCALARS];
    int n = run->rule->scalars ? run->rule->scalars(r, names, v) : 0;
    for (int i = 0; i < n; i++) {
        snprintf(keys[i], sizeof keys[i], "rule.%s", names[i]);
        snprintf(vals[i], sizeof vals[i], "%.17g", *v[i]);
        meta[i] = (st_meta){keys[i], vals[i]};
    }
    return n;
}

/* Every rank writes its file; if all did, rank 0 completes the checkpoint.
 * A failed write keeps the previous checkpoint and the job goes on; -1 only
 * when the comm was aborted or this replica failed. */
static int take_checkpoint(job_run *run, replica *r, const batch_loader *loader, long step)
{
    if (fault_strikes(&run->fault, r->rank, FAULT_CHECKPOINT, r->k, 0)) {
        run_fail(run, "replica %d: injected failure in the checkpoint after outer iteration %ld "
                 "(step %ld)", r->rank, r->k, step);
        return -1;
    }
    tensor_info ts[RULE_MAX_STATE + 1];
    float *data[RULE_MAX_STATE + 1], *host[RULE_MAX_STATE + 1];
    int n = replica_tensors(run, r, ts, data);
    if (host_mirror(r, ts, data, n, host, 1) != 0) {
        host_mirror_free(r, host, n);
        run_fail(run, "replica %d: checkpoint after outer iteration %ld: %s", r->rank, r->k,
                 r->ctx.err);
        return -1;
    }
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
    st_meta meta[4 + RULE_MAX_SCALARS] = {{"sampler_pass", pass}, {"sampler_pos", pos},
                                          {"sampler_draws", draws}, {"sync_s", sync_s}};
    int nmeta = 4 + rule_scalars_meta(run, r, meta + 4);
    int bad = checkpoint_write_replica(run->hooks->checkpoint_dir, r->k, replica_id(run, r), ts,
                                       (const float *const *)host, n, meta, nmeta, err,
                                       sizeof err) != 0;
    host_mirror_free(r, host, n);
    if (bad)
        emit_log(run, "checkpoint at outer iteration %ld failed (the previous one stays): %s",
                 r->k, err);
    int anyone_bad = comm_any(r->comm, r->rank, bad);
    if (anyone_bad < 0)
        return -1;
    if (anyone_bad || !is_master(run, r))
        return 0;
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
    return 0;
}

/* Where the value of "key":"..." starts in a checkpoint's metadata, or NULL. */
static const char *meta_value(const char *json, const char *key)
{
    char pat[80];
    snprintf(pat, sizeof pat, "\"%s\":\"", key);
    const char *at = json ? strstr(json, pat) : NULL;
    return at ? at + strlen(pat) : NULL;
}

static int meta_double(const char *json, const char *key, double *out)
{
    const char *v = meta_value(json, key);
    char *end;
    if (!v)
        return -1;
    *out = strtod(v, &end);
    return *end == '"' ? 0 : -1;
}

static int meta_long(const char *json, const char *key, long long *out)
{
    const char *v = meta_value(json, key);
    char *end;
    if (!v)
        return -1;
    *out = strtoll(v, &end, 10);
    return *end == '"' ? 0 : -1;
}

static int restore_replica(job_run *run, replica *r, sampler *smp, char *err, size_t errlen)
{
    tensor_info ts[RULE_MAX_STATE + 1];
    float *data[RULE_MAX_STATE + 1], *host[RULE_MAX_STATE + 1];
    int n = replica_tensors(run, r, ts, data);
    char *meta = NULL;
    if (host_mirror(r, ts, data, n, host, 0) != 0) {
        host_mirror_free(r, host, n);
        snprintf(err, errlen, "replica %d: resume: %s", r->rank, r->ctx.err);
        return -1;
    }
    int read = checkpoint_read_replica(&run->resume, replica_id(run, r), ts, host, n, &meta, err, errlen);
    for (int i = 0; i < n && read == 0; i++) {
        if (!ts[i].is_stat)
            model_unpack_params(&r->model, host[i]);
        backend_upload(&r->ctx, data[i], host[i], mirror_floats(r, &ts[i]) * sizeof(float));
    }
    /* The upload must finish before the pinned buffers go. */
    backend_sync(&r->ctx);
    host_mirror_free(r, host, n);
    if (read != 0)
        return -1;
    long long pass = -1, pos = -1, draws = 0;
    int rc = meta_long(meta, "sampler_pass", &pass) | meta_long(meta, "sampler_pos", &pos) |
             meta_long(meta, "sampler_draws", &draws);
    if (meta_double(meta, "sync_s", &r->sync_s) != 0)
        r->sync_s = 0.0; /* older checkpoints did not keep it */
    const char *names[RULE_MAX_SCALARS];
    double *vals[RULE_MAX_SCALARS];
    int nscalars = run->rule->scalars ? run->rule->scalars(r, names, vals) : 0;
    for (int i = 0; i < nscalars; i++) {
        char key[64];
        snprintf(key, sizeof key, "rule.%s", names[i]);
        if (meta_double(meta, key, vals[i]) != 0)
            rc = -1;
    }
    free(meta);
    if (rc != 0 || pos < 0 || pos > smp->count || pass < 0) {
        snprintf(err, errlen, "checkpoint at outer iteration %ld: replica %d: bad sampler "
                 "position in its metadata", run->resume.k, r->rank);
        return -1;
    }
    sampler_restore(smp, (long)pass, (int)pos, (uint64_t)draws);
    return 0;
}

/* A stuck replica (fault injection): it comes back only once the job ends. */
static void hang_until_aborted(job_run *run)
{
    while (!comm_aborted(&run->comm))
        nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
}

/* The replica's context (its GPU, or its share of the cores), model, sampler
 * and rule state; rank 0 also builds the master it evaluates. */
static int replica_setup(job_run *run, replica *r, sampler *smp, char *err, size_t errlen)
{
    const job_config *cfg = run->cfg;
    int threads = pin_replica(run, r->rank);
    if (run->where.ngpus > 0) {
        int gpu = run->where.gpus[r->rank % run->where.ngpus];
        if (backend_ctx_init_cuda(&r->ctx, gpu, job_precision(cfg), cfg->deterministic, err,
                                  errlen) != 0)
            return -1;
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
                 .comm = &run->comm};
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
        if (restore_replica(run, &r, &smp, err, sizeof err) != 0)
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

    const int S = run->rule->steps_per_sync(cfg) == RULE_STEPS_PER_PASS
                      ? (int)run->batches_per_pass : run->rule->steps_per_sync(cfg);
    const long nb = run->outer_per_epoch;
    const philox_key dkey = philox_make_key(cfg->seed, (uint32_t)replica_id(run, &r), RNG_STREAM_DROPOUT);
    double inner_lr = cfg->algorithm.inner_lr > 0 ? cfg->algorithm.inner_lr
                                                  : job_lr_at_epoch(cfg, 0);
    r.inner_lr = (float)inner_lr;
    int turn_slot = -1; /* the turns' slot (core) this replica last ran on */
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
        for (int l = 1; l <= S; l++) {
            const loader_batch cur = next;
            const int cur_slot = slot;
            slot = (slot + 1) % BACKEND_STAGE_SLOTS;
            if (run->scheduled) {
                /* Waiting for a core is waiting for peers: it counts as sync. */
                double tw = now_s();
                int on = step_schedule_wait(&run->sched, r.rank, k, l);
                if (on < 0)
                    goto out;
                r.sync_s += now_s() - tw;
                /* On its slot's core the kernel moves it no more: 3% faster. */
                if (on != turn_slot)
                    pin_to_core(run->where.cores[on]);
                turn_slot = on;
            }
            /* At most two held (cur and next): take cannot fail here. */
            double t0 = now_s();
            (void)batch_loader_take(&loader, &next);
            double t1 = now_s();
            r.wait_s += t1 - t0;
            model_stage_batch(&r.model, &r.ctx, slot, next.x, next.y, next.n);
            model_set_dropout_step(&r.model, dkey, (uint64_t)step);
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
                run_fail(run, "replica %d: injected failure at step %ld (outer iteration %ld, "
                         "inner step %d)", r.rank, step, k, l);
            else if (backend_failed(&r.ctx))
                run_fail(run, "replica %d: step %ld: %s", r.rank, step, r.ctx.err);
            else if (!isfinite(loss))
                run_fail(run, "replica %d: loss is %s at step %ld (epoch %d, outer iteration "
                         "%ld): the learning rate may be too high", r.rank,
                         isnan(loss) ? "NaN" : "infinite", step, epoch, k);
            /* A failure anywhere ends every replica here or at its next collective. */
            if (comm_aborted(&run->comm))
                goto out;
            r.step = step;
            r.last_loss = loss;
            run->rule->step(&r);
            r.step_s += now_s() - t1;
            if (run->scheduled)
                step_schedule_done(&run->sched, r.rank, l);
            window_loss += loss;
            window_steps++;
            epoch_loss += loss;
            epoch_steps++;
        }
        if (fault_strikes(&run->fault, r.rank, FAULT_SYNC, k, 0))
            run_fail(run, "replica %d: injected failure in the sync of outer iteration %ld "
                     "(step %ld)", r.rank, k, step);
        if (run->rule->sync(&r) == 0 && backend_failed(&r.ctx))
            run_fail(run, "replica %d: the sync of outer iteration %ld (step %ld): %s", r.rank, k,
                     step, r.ctx.err);
        note_memory(run, &r);
        if (comm_aborted(&run->comm))
            goto out;
        if (is_master(run, &r) && (window_steps >= cfg->log_every || k % nb == 0)) {
            double t = now_s(), elapsed = t - run->t_start;
            double done = (double)k / (double)run->total_outer;
            run_event ev = {
                .kind = RUN_EV_PROGRESS, .epoch = epoch, .epochs = cfg->epochs, .step = step,
                .data_passes = (double)step / (double)run->batches_per_pass,
                .train_loss = window_steps ? window_loss / (double)window_steps : 0.0,
                .images_per_sec = (double)window_steps * cfg->optim.batch * run->n / (t - window_t0),
                .lr = r.lr, .gamma = run->parle_family && cfg->algorithm.L > 0 ? r.gamma : 0,
                .rho = run->parle_family && run->n > 1 ? r.rho : 0,
                .elapsed_s = elapsed, .eta_s = elapsed / done * (1.0 - done),
                .compute_s = r.step_s, .sync_s = r.sync_s, .wait_s = r.wait_s,
            };
            if (run->rule->describe)
                run->rule->describe(&r, ev.rule, sizeof ev.rule);
            memory_json(run, ev.memory, sizeof ev.memory);
            emit(run, &ev);
            window_steps = 0;
            window_loss = 0.0;
            window_t0 = t;
        }
        int checkpointed = 0;
        if (k % nb == 0) {
            if (evaluate_master(run, &r, epoch + 1, step,
                                epoch_loss / (double)(epoch_steps ? epoch_steps : 1)) != 0)
                goto out;
            epoch_loss = 0.0;
            epoch_steps = 0;
            /* The last boundary needs none: the job is over. */
            if (checkpoints && every > 0 && (k / nb) % every == 0 && k < run->total_outer) {
                if (take_checkpoint(run, &r, &loader, step) != 0)
                    goto out;
                checkpointed = 1;
            }
        }
        /* Everyone agrees whether to stop here (a daemon shutdown; a cancel
         * aborts the comm instead, and failures abort it where they happen). */
        int asked = run->hooks && run->hooks->stop
                        ? __atomic_load_n(run->hooks->stop, __ATOMIC_RELAXED) &
                              RUN_STOP_CHECKPOINT : 0;
        int agreed = comm_any(&run->comm, r.rank, asked);
        if (agreed < 0)
            goto out;
        if (agreed) {
            if (checkpoints && !checkpointed &&
                k < run->total_outer && take_checkpoint(run, &r, &loader, step) != 0)
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

/* The job thread's watch while the replicas run: a cancel aborts the comm at
 * once; a collective some replica has not reached within comm.timeout_s
 * fails the job, naming it. Returns when every replica thread has ended. */
static void supervise(job_run *run)
{
    const double timeout = run->cfg->comm.timeout_s;
    pthread_mutex_lock(&run->lock);
    while (run->live > 0) {
        pthread_mutex_unlock(&run->lock);
        if (run->scheduled && comm_aborted(&run->comm))
            step_schedule_abort(&run->sched); /* a failed replica never ends its turn */
        int stop = run->hooks && run->hooks->stop
                       ? __atomic_load_n(run->hooks->stop, __ATOMIC_RELAXED) : 0;
        int missing;
        const char *what;
        if (stop & (RUN_STOP | RUN_STOP_NOW)) {
            pthread_mutex_lock(&run->lock);
            run->stopped_now = run->failed ? 0 : stop;
            pthread_mutex_unlock(&run->lock);
            comm_abort(&run->comm, "stopped");
        } else if (comm_overdue(&run->comm, now_s(), timeout, &missing, &what) > 0) {
            run_fail(run, "replica %d did not reach the %s within comm.timeout_s = %g s "
                     "(it was last seen at step %ld): the job is stopped", run->first + missing, what,
                     timeout, __atomic_load_n(&run->at_step[missing], __ATOMIC_RELAXED));
        }
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 50 * 1000 * 1000;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&run->lock);
        if (run->live > 0)
            pthread_cond_timedwait(&run->ended, &run->lock, &until);
    }
    pthread_mutex_unlock(&run->lock);
    /* The comm may have aborted itself (a GPU or NCCL failure in a
     * collective, which no replica reports): its reason fails the job. A
     * no-op when the job already failed or was stopped. */
    if (comm_aborted(&run->comm))
        run_fail(run, "%s", comm_abort_reason(&run->comm));
}

int run_job(const job_config *cfg, const dataset *train, const dataset *test,
            const run_devices *where, const run_hooks *hooks, run_result *result, char *err,
            size_t errlen)
{
    job_run run = {.cfg = cfg, .train = train, .test = test, .hooks = hooks, .where = *where,
                   .n = cfg->algorithm.replicas};
    memset(result, 0, sizeof(*result));
    run.rule = coupling_find(cfg->algorithm.name);
    run.parle_family = run.rule && run.rule == coupling_find("parle");
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
                       !coupling_runs_across_ranks(cfg, where->ngpus > 0))) {
        snprintf(err, errlen, "run: across MPI ranks a job runs with a rule that can (parle "
                 "and allreduce; every rule on CPUs) and at least one replica per rank "
                 "(docs/mpi.md)");
        return -1;
    }
    if (train->n < cfg->optim.batch || test->n < 1) {
        snprintf(err, errlen, "data: %d training examples are fewer than one batch of %d",
                 train->n, cfg->optim.batch);
        return -1;
    }
    if (fault_parse(getenv("PARLE_FAULT_REPLICA"), &run.fault, err, errlen) != 0)
        return -1;
    long shard = cfg->data.split ? train->n / run.n : train->n;
    run.outer_per_epoch = run.batches_per_pass = (shard + cfg->optim.batch - 1) / cfg->optim.batch;
    if (run.rule->steps_per_sync(cfg) == RULE_STEPS_PER_PASS)
        run.outer_per_epoch = 1;
    run.total_outer = run.outer_per_epoch * cfg->epochs;
    /* comm_attach sizes the all-reduce buffer once the models are built. */
    if (comm_init(&run.comm, run.nlocal, 0, err, errlen) != 0)
        return -1;
    run.comm.net = where->net;
    run.comm.first = run.first;
    pthread_mutex_init(&run.lock, NULL);
    pthread_cond_init(&run.ended, NULL);
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
                            .data_passes = (double)run.resume.step / (double)run.batches_per_pass,
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
    int S = run.rule->steps_per_sync(cfg);
    /* Out of memory for it, the kernel's time slices share the cores. */
    run.scheduled = replicas_float(&run) && S != RULE_STEPS_PER_PASS &&
                    step_schedule_wanted(run.nlocal, where->ncores, S) &&
                    step_schedule_init(&run.sched, run.nlocal, where->ncores, S,
                                       run.resume.k + 1) == 0;
    pthread_t *tids = calloc((size_t)run.n, sizeof(pthread_t));
    replica_arg *args = calloc((size_t)run.n, sizeof(replica_arg));
    run.at_step = calloc((size_t)run.n, sizeof(long));
    run.mem_bytes = calloc((size_t)run.n, sizeof(size_t));
    int started = 0;
    if (tids && args && run.at_step && run.mem_bytes) {
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
    supervise(&run);
    for (int i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    free(tids);
    free(args);
    free(run.at_step);
    free(run.mem_bytes);
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
