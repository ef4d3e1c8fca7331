/* What the job queue answers as JSON (jobs_impl.h): a job's status, the
 * list, the devices and who holds them, the daemon's summary, an export's
 * reply; and the bits of JSON the loop's events share with them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fsutil.h"
#include "jobs_impl.h"
#include "mpi_node.h"
#include "safetensors.h"
#include "topology.h"

void devices_text(uint64_t mask, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    if (mask & DEV_CPU)
        n += (size_t)snprintf(buf, len, "cpu");
    for (int i = 0; i < DEV_MAX_GPUS && n < len; i++)
        if (mask & (1ull << i))
            n += (size_t)snprintf(buf + n, len - n, "%s%d", n ? "," : "", i);
}

void add_num_or_null(cJSON *o, const char *k, double v)
{
    if (isfinite(v))
        cJSON_AddNumberToObject(o, k, v);
    else
        cJSON_AddNullToObject(o, k);
}

/* The coupling rule's own quantities (GoSGD's a_i, gossip's scores...), as
 * the runner gave them: "rule", an object, when there are any. */
void add_rule_json(cJSON *o, const run_event *ev)
{
    cJSON *rule = ev->rule[0] ? cJSON_Parse(ev->rule) : NULL;
    if (cJSON_IsObject(rule))
        cJSON_AddItemToObject(o, "rule", rule);
    else
        cJSON_Delete(rule);
}

/* Where each replica runs, as run_job places them: "cuda:G" round-robin over
 * the job's GPUs, else "cpu". */
/* Under MPI a replica on another rank is "rankR:cpu" or "rankR:gpu" (its
 * rank picks its GPU); rank 0's replicas are named as in one process. */
static cJSON *replica_devices_json(const job *j)
{
    int gpus[DEV_MAX_GPUS], ngpus = job_devices_gpus(j->devices, gpus);
    unsigned char rank[64] = {0};
    pthread_mutex_lock(&j->js->mu);
    if (j->placed)
        memcpy(rank, j->replica_rank, sizeof rank);
    pthread_mutex_unlock(&j->js->mu);
    cJSON *a = cJSON_CreateArray();
    for (int r = 0; r < j->cfg.algorithm.replicas; r++) {
        char name[24] = "cpu";
        if (r < 64 && rank[r])
            snprintf(name, sizeof name, "rank%d:%s", rank[r], ngpus > 0 ? "gpu" : "cpu");
        else if (ngpus > 0)
            snprintf(name, sizeof name, "cuda:%d", topology_device(r, gpus, ngpus));
        cJSON_AddItemToArray(a, cJSON_CreateString(name));
    }
    return a;
}

cJSON *owner_json(const job_owner *owner)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "uid", owner->uid);
    cJSON_AddNumberToObject(o, "gid", owner->gid);
    cJSON_AddStringToObject(o, "user", owner->user);
    return o;
}

cJSON *job_status_json(const job *j, const job_viewer *v)
{
    cJSON *o = cJSON_CreateObject();
    int started = j->started_at > 0, ended = job_state_final(j->state);
    /* Another member's job, unless --open-job-details: what the queue needs,
     * its training values, errors and what it could not write null. */
    const bool details = jobs_viewer_sees_details(j, v);
    char dev[256];
    devices_text(j->devices, dev, sizeof(dev));
    cJSON_AddStringToObject(o, "id", j->id);
    cJSON_AddStringToObject(o, "name", j->cfg.name[0] ? j->cfg.name : j->id);
    cJSON_AddStringToObject(o, "state", job_shown_state(j));
    cJSON_AddItemToObject(o, "owner", owner_json(&j->owner));
    /* Where it is in the queue and why (the scheduling glue's). */
    j->js->hooks.status_sched(j, o);
    cJSON_AddBoolToObject(o, "details", details);
    if (j->error[0] && details)
        cJSON_AddStringToObject(o, "error", j->error);
    else
        cJSON_AddNullToObject(o, "error");
    cJSON_AddStringToObject(o, "algorithm", j->cfg.algorithm.name);
    cJSON_AddNumberToObject(o, "replicas", j->cfg.algorithm.replicas);
    cJSON_AddStringToObject(o, "model", j->cfg.model.arch);
    cJSON_AddStringToObject(o, "dataset", j->cfg.data.dataset);
    if ((j->devices & DEV_CPU) && j->cfg.device_spec.cores)
        snprintf(dev, sizeof dev, "cpu:%d", j->cfg.device_spec.cores);
    if (j->cfg.device_spec.count && j->state == JOB_QUEUED) /* the GPUs are picked at its start */
        snprintf(dev, sizeof dev, "gpu:%d", j->cfg.device_spec.count);
    cJSON_AddStringToObject(o, "devices", dev);
    /* Scheduling limits: a run's time limit (seconds, null: none) and what
     * it starts after. */
    const double limit = j->js ? job_time_limit(j->js, j) : j->cfg.time_limit;
    add_num_or_null(o, "time_limit", limit > 0 ? limit : NAN);
    if (j->cfg.after[0])
        cJSON_AddStringToObject(o, "after", j->cfg.after);
    else
        cJSON_AddNullToObject(o, "after");
    cJSON_AddBoolToObject(o, "after_any", j->cfg.after_any);
    /* The core ids a running CPU job holds (disjoint from the others'). */
    if (j->cores)
        cJSON_AddItemToObject(o, "cores", cJSON_CreateIntArray(j->cores, j->ncores_held));
    else
        cJSON_AddNullToObject(o, "cores");
    cJSON_AddItemToObject(o, "replica_devices", replica_devices_json(j));
    if (j->state == JOB_QUEUED && j->waiting[0])
        cJSON_AddStringToObject(o, "waiting", j->waiting);
    else
        cJSON_AddNullToObject(o, "waiting");
    /* What could not be written (a checkpoint, the master), until it is. */
    if (details && (j->saving.save_failed[0][0] || j->saving.save_failed[1][0])) {
        char both[sizeof j->saving.save_failed + 4];
        const char (*failed)[512] = j->saving.save_failed;
        snprintf(both, sizeof both, "%s%s%s", failed[0], failed[0][0] && failed[1][0] ? "; " : "",
                 failed[1]);
        cJSON_AddStringToObject(o, "save_error", both);
    } else {
        cJSON_AddNullToObject(o, "save_error");
    }
    cJSON_AddNumberToObject(o, "epoch", j->last.epoch);
    cJSON_AddNumberToObject(o, "epochs", j->cfg.epochs);
    cJSON_AddNumberToObject(o, "step", (double)j->last.step);
    cJSON_AddNumberToObject(o, "data_passes", j->last.data_passes);
    /* Running: the speed of the last log interval. Otherwise the mean over
     * the training time so far (0 before the first step): every replica
     * takes `step` batches (the minimum for asynchronous rules). */
    double images = (double)j->last.step * j->cfg.optim.batch * j->cfg.algorithm.replicas;
    double elapsed = started ? job_elapsed(j) : 0;
    add_num_or_null(o, "images_per_sec", !details ? NAN
                                         : j->state == JOB_RUNNING ? j->last.images_per_sec
                                         : elapsed > 0 ? images / elapsed : 0);
    add_num_or_null(o, "mean_images_per_sec", !details ? NAN : elapsed > 0 ? images / elapsed : 0);
    cJSON *mem = j->memory[0] ? cJSON_Parse(j->memory) : NULL;
    if (cJSON_IsObject(mem))
        cJSON_AddItemToObject(o, "memory_bytes", mem);
    else {
        cJSON_Delete(mem);
        cJSON_AddNullToObject(o, "memory_bytes");
    }
    add_num_or_null(o, "test_error", details ? j->test_error : NAN);
    add_num_or_null(o, "test_loss", details ? j->test_loss : NAN);
    add_num_or_null(o, "train_loss", details && j->last.step > 0 ? j->last.train_loss : NAN);
    add_num_or_null(o, "lr", details && j->last.step > 0 ? j->last.lr : NAN);
    add_num_or_null(o, "reseeds", details ? (double)j->last.reseeds : NAN);
    if (details)
        add_rule_json(o, &j->last);
    cJSON_AddNumberToObject(o, "elapsed_s", started ? job_elapsed(j) : 0);
    add_num_or_null(o, "eta_s",
                    j->state == JOB_DONE                          ? 0
                    : j->state == JOB_RUNNING && j->last.step > 0 ? j->last.eta_s
                                                                  : NAN);
    cJSON_AddNumberToObject(o, "disk_bytes", (double)j->disk_bytes);
    cJSON_AddNumberToObject(o, "submitted_at", j->submitted_at);
    add_num_or_null(o, "started_at", started ? j->started_at : NAN);
    add_num_or_null(o, "ended_at", ended ? j->ended_at : NAN);
    j->js->client.status(j->js->client.self, j, o); /* a sweep's job: its tag */
    return o;
}

static int in_state(const job *j, const char *state)
{
    return !state[0] || !strcmp(job_shown_state(j), state);
}

/* An issued id's number (j0042: 42), or -1. */
static long id_number(const char *id)
{
    char *end;
    const long n = id[0] == 'j' && id[1] >= '0' && id[1] <= '9' ? strtol(id + 1, &end, 10) : -1;
    return n >= 0 && !*end ? n : -1;
}

/* The newest job submitted before `before` (an id: the one before it in the
 * list, or, once it was removed, the first with a smaller number). */
static const job *older_than(const jobs *js, const char *before)
{
    if (!before[0])
        return js->last;
    const job *b = jobs_index_find(js, before);
    if (b)
        return b->prev;
    const long n = id_number(before);
    const job *j = js->last;
    while (j && id_number(j->id) >= n)
        j = j->prev;
    return j;
}

cJSON *jobs_list_json(const jobs *js, const job_viewer *v, int limit, const char *before,
                      const char *state)
{
    cJSON *o = cJSON_CreateObject(), *a = cJSON_AddArrayToObject(o, "jobs");
    size_t total = 0;
    if (!state[0])
        total = js->njobs;
    else
        for (const job *j = js->first; j; j = j->next)
            total += in_state(j, state);
    /* Newest first to the page's oldest, each put before the last: the page
     * in submission order. */
    const job *j = older_than(js, before), *oldest = NULL;
    for (int n = 0; j && n < limit; j = j->prev)
        if (in_state(j, state)) {
            cJSON *st = job_status_json(j, v);
            if (a->child)
                cJSON_InsertItemInArray(a, 0, st);
            else
                cJSON_AddItemToArray(a, st);
            oldest = j;
            n++;
        }
    while (j && !in_state(j, state))
        j = j->prev;
    cJSON_AddNumberToObject(o, "total", (double)total);
    if (j && oldest)
        cJSON_AddStringToObject(o, "next_before", oldest->id);
    else
        cJSON_AddNullToObject(o, "next_before");
    return o;
}

/* Under MPI, rank r > 0: what it has, whether it still serves, and the
 * running job it takes part in (one job runs at a time under MPI). */
static cJSON *rank_json(const jobs *js, int r)
{
    mpi_rank_info info;
    int lost = mpi_node_describe(r, &info);
    cJSON *d = cJSON_CreateObject();
    cJSON_AddStringToObject(d, "kind", "rank");
    cJSON_AddNumberToObject(d, "rank", r);
    cJSON_AddNumberToObject(d, "pid", (double)info.pid);
    cJSON_AddNumberToObject(d, "cores", info.cores);
    cJSON_AddNumberToObject(d, "gpus", info.gpus);
    cJSON_AddStringToObject(d, "state", lost ? "lost" : "serving");
    const job *on = NULL;
    for (const job *j = js->first; j && !on; j = j->next) {
        if (j->state != JOB_RUNNING)
            continue;
        pthread_mutex_lock(&j->js->mu);
        for (int k = 0; j->placed && k < j->cfg.algorithm.replicas && k < 64 && !on; k++)
            if (j->replica_rank[k] == r)
                on = j;
        pthread_mutex_unlock(&j->js->mu);
    }
    if (on)
        cJSON_AddStringToObject(d, "job", on->id);
    else
        cJSON_AddNullToObject(d, "job");
    return d;
}

cJSON *jobs_devices_json(const jobs *js)
{
    cJSON *a = cJSON_CreateArray();
    for (int i = 63; i >= 0; i--) {
        uint64_t bit = 1ull << i;
        if (!(js->devices & bit))
            continue;
        cJSON *d = cJSON_CreateObject();
        if (bit == DEV_CPU) {
            cJSON_AddStringToObject(d, "kind", "cpu");
            cJSON_AddItemToObject(d, "cores", cJSON_CreateIntArray(js->cores, js->ncores));
        } else {
            cJSON_AddStringToObject(d, "kind", "gpu");
            cJSON_AddNumberToObject(d, "index", i);
            char name[256];
            size_t bytes;
            if (backend_cuda_device_info(i, name, sizeof name, &bytes) == 0) {
                cJSON_AddStringToObject(d, "name", name);
                cJSON_AddNumberToObject(d, "memory_bytes", (double)bytes);
            }
            /* The daemon's GPUs this one reads and writes directly (P2P). */
            cJSON *peers = cJSON_AddArrayToObject(d, "peer_access");
            for (int p = 0; p < 64; p++)
                if ((js->devices & (1ull << p)) && (1ull << p) != DEV_CPU &&
                    topology_peer_access(i, p))
                    cJSON_AddItemToArray(peers, cJSON_CreateNumber(p));
        }
        /* Every running job on it (several share a GPU by gpu_share, the
         * CPU by cpu:K); "job" the first, null when idle. */
        cJSON *on = cJSON_CreateArray();
        for (const job *j = js->first; j; j = j->next)
            if (j->thread_running && (j->devices & bit))
                cJSON_AddItemToArray(on, cJSON_CreateString(j->id));
        if (cJSON_GetArraySize(on) > 0)
            cJSON_AddStringToObject(d, "job", cJSON_GetArrayItem(on, 0)->valuestring);
        else
            cJSON_AddNullToObject(d, "job");
        cJSON_AddItemToObject(d, "jobs", on);
        if (js->faulted & bit)
            cJSON_AddStringToObject(d, "faulted", js->fault[i]);
        else
            cJSON_AddNullToObject(d, "faulted");
        cJSON_AddItemToArray(a, d);
    }
    for (int r = 1; r < mpi_node_size(); r++)
        cJSON_AddItemToArray(a, rank_json(js, r));
    return a;
}

cJSON *jobs_summary_json(const jobs *js)
{
    int count[JOB_STATES] = {0};
    for (job *j = js->first; j; j = j->next)
        count[j->state]++;
    cJSON *o = cJSON_CreateObject();
    for (int s = 0; s < JOB_STATES; s++)
        cJSON_AddNumberToObject(o, job_state_name((enum job_state)s), count[s]);
    cJSON_AddStringToObject(o, "devices", js->devices_text);
    return o;
}

/* The __metadata__ object of a safetensors file (read on the loop thread). */
static cJSON *read_safetensors_metadata(const char *path, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    unsigned char le[8];
    uint64_t n = 0;
    char *header = NULL;
    cJSON *root = NULL, *meta = NULL;
    if (fread(le, 1, 8, f) == 8) {
        for (int i = 7; i >= 0; i--)
            n = n << 8 | le[i];
        if (n >= 2 && n <= SAFETENSORS_HEADER_MAX && (header = malloc((size_t)n)) &&
            fread(header, 1, (size_t)n, f) == n)
            root = cJSON_ParseWithLength(header, (size_t)n);
    }
    fclose(f);
    free(header);
    const cJSON *md = cJSON_GetObjectItemCaseSensitive(root, "__metadata__");
    if (cJSON_IsObject(md))
        meta = cJSON_Duplicate(md, 1);
    else
        snprintf(err, errlen, "%s: not a safetensors file with metadata", path);
    cJSON_Delete(root);
    return meta;
}

cJSON *job_export_json(const job *j, const char **code, char *err, size_t errlen)
{
    char path[1200];
    job_file_path(j, "master.safetensors", path, sizeof(path));
    *code = ERR_INTERNAL;
    if (access(path, F_OK) != 0 && errno == ENOENT) {
        *code = ERR_BAD_STATE;
        snprintf(err, errlen, "job %s has no evaluated master yet (the master is saved at the "
                 "end of each epoch)", j->id);
        return NULL;
    }
    cJSON *meta = read_safetensors_metadata(path, err, errlen);
    if (!meta)
        return NULL;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "id", j->id);
    cJSON_AddStringToObject(o, "path", path);
    cJSON_AddItemToObject(o, "metadata", meta);
    return o;
}
