/* A run's checkpoints (docs/architecture.md "Checkpoints"; the files are
 * checkpoint.c's): finding the newest to resume from, taking one at an
 * outer-iteration boundary (every replica its file, rank 0 the manifest),
 * and restoring a replica from one. A replica's metadata (the sampler's
 * position, sync_s, the rule's host scalars) is read back as parsed
 * key/values (checkpoint_meta). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner_impl.h"

void run_checkpoint_find(job_run *run)
{
    const job_config *cfg = run->cfg;
    char log[2048];
    int found = checkpoint_find_latest(run->hooks->checkpoint_dir, run->n, &run->resume, log,
                                       sizeof log);
    for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n"))
        run_emit_log(run, "%s", line);
    __atomic_store_n(&run->kept_k, found == 1 ? run->resume.k : 0, __ATOMIC_RELAXED);
    if (found == 1 && run->resume.k < run->total_outer) {
        run->t_start -= run->resume.elapsed_s;
        run->result.epochs_done = run->resume.epochs_done;
        run->result.test_error = run->resume.test_error;
        run->result.test_loss = run->resume.test_loss;
        run->result.resumed_k = run->resume.k;
        run->result.resumed_step = run->resume.step;
        run_event ev = {.kind = RUN_EV_RESUME, .epochs = cfg->epochs,
                        .epoch = (int)(run->resume.k / run->outer_per_epoch),
                        .step = run->resume.step,
                        .data_passes = (double)run->resume.step / (double)run->batches_per_pass,
                        .test_error = run->resume.test_error,
                        .test_loss = run->resume.test_loss,
                        .elapsed_s = run->resume.elapsed_s, .reseeds = run->resume.reseeds};
        snprintf(ev.message, sizeof ev.message,
                 "resuming from checkpoint at outer iteration %ld (step %ld)", run->resume.k,
                 run->resume.step);
        run_emit(run, &ev);
    } else {
        memset(&run->resume, 0, sizeof run->resume);
    }
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

/* A checkpoint that could not be written: logged and shown in the job's
 * status (RUN_EV_SAVE) until one is, naming the one a resume would use. */
static void checkpoint_failed(job_run *run, long k, const char *err)
{
    run_event ev = {.kind = RUN_EV_SAVE, .saved = RUN_SAVED_CHECKPOINT,
                    .epochs = run->cfg->epochs};
    long kept = __atomic_load_n(&run->kept_k, __ATOMIC_RELAXED);
    char stays[64];
    if (kept > 0)
        snprintf(stays, sizeof stays, "the one at outer iteration %ld stays", kept);
    else
        snprintf(stays, sizeof stays, "there is no earlier one to resume from");
    snprintf(ev.message, sizeof ev.message, "checkpoint at outer iteration %ld failed (%s): %.400s",
             k, stays, err);
    run_emit(run, &ev);
}

int run_checkpoint_take(job_run *run, replica *r, const batch_loader *loader, long step)
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
        checkpoint_failed(run, r->k, err);
    int anyone_bad = comm_any(r->comm, r->rank, bad);
    if (anyone_bad < 0)
        return -1;
    if (anyone_bad || !is_master(run, r))
        return 0;
    checkpoint_info info = {.k = r->k, .step = step, .replicas = run->n,
                            .epochs_done = run->result.epochs_done,
                            .test_error = run->result.test_error,
                            .test_loss = run->result.test_loss,
                            .elapsed_s = comm_now_s() - run->t_start, .reseeds = r->reseeds};
    if (checkpoint_commit(run->hooks->checkpoint_dir, &info, run->cfg->checkpoint.keep, err,
                          sizeof err) != 0) {
        checkpoint_failed(run, r->k, err);
        return 0;
    }
    __atomic_store_n(&run->kept_k, r->k, __ATOMIC_RELAXED);
    run_emit_log(run, "checkpoint at outer iteration %ld (step %ld) written", r->k, step);
    run_event ev = {.kind = RUN_EV_SAVE, .saved = RUN_SAVED_CHECKPOINT,
                    .epochs = run->cfg->epochs};
    run_emit(run, &ev);
    return 0;
}

/* The sampler's position and the rule's host scalars from the replica's
 * metadata (sync_s, which older checkpoints did not keep, is 0 when it is
 * missing). */
static int restore_meta(job_run *run, replica *r, sampler *smp, const char *json, char *err,
                        size_t errlen)
{
    char file[1200], why[1600];
    checkpoint_meta meta;
    checkpoint_replica_path(file, sizeof file, &run->resume, replica_id(run, r));
    long long pass = -1, pos = -1;
    unsigned long long draws = 0;
    int rc = checkpoint_meta_parse(&meta, file, json, why, sizeof why);
    if (rc == 0)
        rc = checkpoint_meta_long(&meta, "sampler_pass", &pass, why, sizeof why) != 0 ||
             checkpoint_meta_long(&meta, "sampler_pos", &pos, why, sizeof why) != 0 ||
             checkpoint_meta_u64(&meta, "sampler_draws", &draws, why, sizeof why) != 0 ? -1 : 0;
    if (rc == 0 && pass < 0) {
        snprintf(why, sizeof why, "%s: metadata key \"sampler_pass\" is %lld, below 0", file,
                 pass);
        rc = -1;
    } else if (rc == 0 && (pos < 0 || pos > smp->count)) {
        snprintf(why, sizeof why, "%s: metadata key \"sampler_pos\" is %lld, outside 0..%d",
                 file, pos, smp->count);
        rc = -1;
    }
    if (rc == 0 && checkpoint_meta_double(&meta, "sync_s", &r->sync_s, why, sizeof why) != 0)
        r->sync_s = 0.0;
    const char *names[RULE_MAX_SCALARS];
    double *vals[RULE_MAX_SCALARS];
    int nscalars = rc == 0 && run->rule->scalars ? run->rule->scalars(r, names, vals) : 0;
    for (int i = 0; i < nscalars && rc == 0; i++) {
        char key[64];
        snprintf(key, sizeof key, "rule.%s", names[i]);
        rc = checkpoint_meta_double(&meta, key, vals[i], why, sizeof why);
    }
    checkpoint_meta_free(&meta);
    if (rc != 0) {
        snprintf(err, errlen, "checkpoint at outer iteration %ld: replica %d: %s", run->resume.k,
                 r->rank, why);
        return -1;
    }
    sampler_restore(smp, (long)pass, (int)pos, (uint64_t)draws);
    return 0;
}

int run_checkpoint_restore(job_run *run, replica *r, sampler *smp, char *err, size_t errlen)
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
    int rc = read == 0 ? restore_meta(run, r, smp, meta, err, errlen) : -1;
    free(meta);
    return rc;
}
