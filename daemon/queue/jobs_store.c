/* The job store made and freed (jobs_impl.h): its devices and cores
 * resolved at open; each record allocated as one block with every
 * module's part of it (and the client's) placed after the store's fields,
 * and a prepared one given its id, files and place (job_commit). */
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fsutil.h"
#include "jobs_impl.h"
#include "topology.h"

/* Each part's place after a block of `size` bytes, aligned for any type. */
static size_t place_parts(size_t size, const size_t part_size[JOB_PARTS], size_t at[JOB_PARTS])
{
    const size_t align = _Alignof(max_align_t);
    for (int k = 0; k < JOB_PARTS; k++) {
        size = (size + align - 1) / align * align;
        at[k] = size;
        size += part_size[k];
    }
    return size;
}

job *job_new(jobs *js)
{
    job *j = calloc(1, js->job_size);
    if (j) {
        j->js = js;
        j->test_error = j->test_loss = NAN;
    }
    return j;
}

void job_discard(job *j) { free(j); }

void *job_part(const job *j, enum job_part k) { return (char *)j + j->js->job_part_at[k]; }

void *jobs_part(const jobs *js, enum job_part k) { return (char *)js + js->jobs_part_at[k]; }

void *job_client_part(const job *j) { return job_part(j, JOB_PART_CLIENT); }

int job_commit(jobs *js, job *j, const cJSON *job_json, const job_owner *owner, char *err,
               size_t errlen)
{
    char path[1200];
    /* job.json: the user's job as sent, which a restart validates again. */
    char *pretty = cJSON_Print(job_json);
    if (!pretty) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    j->owner = *owner;
    snprintf(j->id, sizeof(j->id), "j%04d", js->next_id++);
    snprintf(j->dir, sizeof(j->dir), "%s/%s", js->jobs_dir, j->id);
    job_file_path(j, "job.json", path, sizeof(path));
    if (mkdir_p(j->dir, err, errlen) != 0 ||
        atomic_write_file(path, pretty, strlen(pretty), err, errlen) != 0)
        goto fail;
    if (job_log_start(j, err, errlen) != 0)
        goto fail;
    free(pretty);
    j->submitted_at = jobs_now_s();
    jobs_link(js, j);
    job_log(j, "submitted by %s (uid %u): %s, %s x%d, %s, %d epochs", owner->user, owner->uid,
            j->cfg.model.arch, j->cfg.algorithm.name, j->cfg.algorithm.replicas,
            j->cfg.data.dataset, j->cfg.epochs);
    set_state(j, JOB_QUEUED);
    return 0;
fail:
    if (j->dir[0]) { /* leave no half-made job dir behind */
        job_file_path(j, "job.json", path, sizeof(path));
        unlink(path);
        rmdir(j->dir);
    }
    free(pretty);
    job_discard(j);
    return -1;
}

jobs *jobs_store_new(uv_loop_t *loop, const char *state_dir, const char *devices,
                     const jobs_listener *listener, const jobs_hooks *hooks,
                     const jobs_client *client, char *err, size_t errlen)
{
    size_t at[JOB_PARTS];
    jobs *js = calloc(1, place_parts(sizeof *js, hooks->jobs_part_size, at));
    if (!js) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    /* First: reloading writes status files, which read the job's placement
     * under the lock. */
    pthread_mutex_init(&js->mu, NULL);
    pthread_cond_init(&js->flushed, NULL);
    js->loop = loop;
    js->listener = *listener;
    js->hooks = *hooks;
    js->client = *client;
    memcpy(js->jobs_part_at, at, sizeof at);
    size_t job_part_size[JOB_PARTS];
    memcpy(job_part_size, hooks->job_part_size, sizeof job_part_size);
    job_part_size[JOB_PART_CLIENT] = client->job_part_size;
    js->job_size = place_parts(sizeof(job), job_part_size, js->job_part_at);
    js->limits.keep_ended_count = -1; /* until jobs_set_limits: keep every checkpoint */
    js->next_id = 1;
    js->after_epoch = 1; /* (a job never looked at has after_pending_at 0) */
    snprintf(js->jobs_dir, sizeof(js->jobs_dir), "%s/jobs", state_dir);
    js->ncores = run_cpu_cores(&js->cores, err, errlen);
    if (js->ncores < 1)
        goto fail;
    if (!(js->core_job = calloc((size_t)js->ncores, sizeof *js->core_job))) {
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    /* The daemon's "auto" is its cores and every GPU the driver shows. */
    char why[256];
    int ngpus = backend_cuda_devices();
    uint64_t present = job_devices_present(ngpus);
    job_device_spec spec;
    if (strcmp(devices, "auto") == 0) {
        js->devices = present;
    } else if (job_devices_read(devices, &spec, why, sizeof why) != 0) {
        snprintf(err, errlen, "--devices: \"%s\" is not cpu, auto, gpu or a list of GPU ids "
                 "like 0,1 (this machine has %d GPU%s)", devices, ngpus, ngpus == 1 ? "" : "s");
        goto fail;
    } else if (job_devices_resolve(&spec, devices, present, DEVICES_OF_DAEMON, &js->devices, why,
                                   sizeof why) != 0) {
        snprintf(err, errlen, "--devices: %s (this machine has %d GPU%s)", why, ngpus,
                 ngpus == 1 ? "" : "s");
        goto fail;
    }
    devices_text(js->devices, js->devices_text, sizeof(js->devices_text));
    for (int g = 0; g < DEV_MAX_GPUS; g++) /* NVLink/P2P pairs, for "gpu:N" */
        for (int h = 0; h < DEV_MAX_GPUS && (js->devices >> g & 1); h++)
            if (h != g && (js->devices >> h & 1) && topology_peer_access(g, h))
                js->gpu_links[g] |= 1ull << h;
    return js;
fail:
    jobs_store_free(js);
    return NULL;
}

static void on_handle_closed(uv_handle_t *h)
{
    jobs *js = h->data;
    if (--js->open_handles == 0)
        js->on_closed(js);
}

void jobs_store_close(jobs *js, uv_handle_t *const *handles, int n, void (*on_closed)(jobs *js))
{
    js->on_closed = on_closed;
    js->open_handles = n + 1;
    uv_close((uv_handle_t *)&js->async, on_handle_closed);
    for (int k = 0; k < n; k++)
        uv_close(handles[k], on_handle_closed);
}

void jobs_store_free(jobs *js)
{
    pthread_cond_destroy(&js->flushed);
    pthread_mutex_destroy(&js->mu);
    job *j = js->first;
    while (j) {
        job *next = j->next;
        free(j);
        j = next;
    }
    jobs_index_free(js);
    free(js->cores);
    free(js->core_job);
    free(js);
}
