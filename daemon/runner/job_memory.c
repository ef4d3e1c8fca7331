/* Admission by memory (job_memory.h): a job's bytes per device from its
 * file, planned as the runner would build it, and the machine's figures. */
#include "job_memory.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "augment.h"
#include "coupling.h"
#include "model.h"
#include "runner.h"
#include "topology.h"

/* Host bytes of the data: images and labels, and while ZCA is fitted
 * (preprocess.c zca_fit) two dim x dim double matrices, a float covariance
 * and the float whitening matrix. */
size_t job_memory_data_bytes(const job_config *cfg, const data_claim *s)
{
    size_t ex = (size_t)s->c * s->h * s->w;
    size_t bytes = (size_t)(s->ntrain + s->ntest) * (ex * sizeof(float) + sizeof(int32_t));
    if (!strcmp(cfg->data.normalize, "zca"))
        bytes += ex * ex * (2 * sizeof(double) + 2 * sizeof(float));
    return bytes;
}

/* Host bytes beside the replicas: each one's loader buffers (augment.h) and
 * scratch image, its sampler's permutation, and the master's host copy. */
static size_t batches_bytes(const job_config *cfg, const data_claim *s, const model *m)
{
    size_t ex = (size_t)s->c * s->h * s->w;
    size_t loader = LOADER_BUFFERS * (size_t)cfg->optim.batch * (ex * sizeof(float) + sizeof(int32_t)) +
                    ex * sizeof(float) + (size_t)s->ntrain * sizeof(int32_t);
    return (size_t)cfg->algorithm.replicas * loader + (m->nparams + m->nstats) * sizeof(float);
}

/* A file's bytes on disk: its size rounded up to whole 4 KiB blocks. */
static size_t on_disk(size_t bytes) { return (bytes + 4095) / 4096 * 4096 + 4096; }

/* Bytes a job's folder holds at most: (keep + 1) checkpoints (the new one
 * is complete before the oldest goes), each every replica's rule state
 * (rule->vectors, an upper bound on what it checkpoints) and BN statistics
 * with a header; the master; metrics.jsonl, log.txt and status.json, for
 * which METRICS_BYTES_PER_EPOCH an epoch and METRICS_BYTES more is ample
 * for the default eval.every_passes. */
enum { ST_HEADER_BYTES = 16384, METRICS_BYTES = 256 << 10, METRICS_BYTES_PER_EPOCH = 16 << 10 };

static void disk_bytes(const job_config *cfg, const coupling_rule *rule, const model *train,
                       job_memory *m)
{
    int n = cfg->algorithm.replicas;
    size_t vec = train->nparams_logical * sizeof(float), stats = train->nstats * sizeof(float);
    m->checkpoint = 0;
    for (int r = 0; r < n; r++)
        m->checkpoint += on_disk((size_t)rule->vectors(cfg, r > 0) * vec + stats + ST_HEADER_BYTES);
    m->checkpoint += 2 * on_disk(0); /* its directory and manifest */
    size_t copies = cfg->checkpoint.every_epochs > 0 ? (size_t)cfg->checkpoint.keep + 1 : 0;
    m->disk = copies * m->checkpoint + on_disk(vec + stats + ST_HEADER_BYTES) + METRICS_BYTES +
              (size_t)cfg->epochs * METRICS_BYTES_PER_EPOCH;
}

/* m->bytes of the model the runner builds, planned: nothing allocated. */
static int planned(const job_config *cfg, const data_claim *s, int device, int batch, int train,
                   model *m, char *err, size_t errlen)
{
    backend_ctx plan;
    backend_ctx_plan(&plan, device, job_precision(cfg));
    model_spec spec = cfg->model;
    spec.in_c = s->c, spec.in_h = s->h, spec.in_w = s->w;
    if (spec.classes <= 0)
        spec.classes = s->classes;
    return model_build(m, &plan, &spec, batch, train, err, errlen);
}

/* How many of the job's replicas run on its g-th GPU, placed as run_job
 * places them (topology_device). */
static int replicas_on(const job_memory *m, int g)
{
    int on = 0;
    for (int r = 0; r < m->replicas; r++)
        on += topology_device(r, m->gpus, m->ngpus) == m->gpus[g];
    return on;
}

int job_memory_estimate(const job_config *cfg, const int *gpus, int ngpus, job_memory *m,
                        char *err, size_t errlen)
{
    data_claim s;
    if (data_claim_default(cfg, &s, err, errlen) != 0)
        return -1;
    return job_memory_estimate_claimed(cfg, &s, gpus, ngpus, m, err, errlen);
}

int job_memory_estimate_claimed(const job_config *cfg, const data_claim *s, const int *gpus,
                                int ngpus, job_memory *m, char *err, size_t errlen)
{
    memset(m, 0, sizeof *m);
    const coupling_rule *rule = coupling_find(cfg->algorithm.name);
    if (!rule) {
        snprintf(err, errlen, "algorithm.name: no rule \"%s\"", cfg->algorithm.name);
        return -1;
    }
    int device = ngpus > 0 ? gpus[0] : -1, n = cfg->algorithm.replicas;
    model train, eval;
    if (planned(cfg, s, device, cfg->optim.batch, 1, &train, err, errlen) != 0)
        return -1;
    size_t vec = train.nparams * sizeof(float);
    m->replicas = n;
    m->model = train.bytes;
    m->rule = (size_t)rule->vectors(cfg, n > 1 ? 1 : 0) * vec;
    m->rule0 = (size_t)rule->vectors(cfg, 0) * vec;
    m->data = job_memory_data_bytes(cfg, s);
    m->batches = batches_bytes(cfg, s, &train);
    disk_bytes(cfg, rule, &train, m);
    model_free(&train, NULL);
    if (planned(cfg, s, device, EVAL_BATCH, 0, &eval, err, errlen) != 0)
        return -1;
    m->eval = eval.bytes;
    model_free(&eval, NULL);
    size_t replicas = m->model * (size_t)n + m->rule * (size_t)(n - 1) + m->rule0 + m->eval;
    m->host = m->data + m->batches + (ngpus > 0 ? 0 : replicas);
    m->ngpus = ngpus < JOB_MEMORY_GPUS ? ngpus : JOB_MEMORY_GPUS;
    for (int g = 0; g < m->ngpus; g++)
        m->gpus[g] = gpus[g];
    for (int g = 0; g < m->ngpus; g++) {
        size_t on = (size_t)replicas_on(m, g);
        m->gpu[g] = on * (m->model + m->rule) + (g == 0 ? m->rule0 - m->rule + m->eval : 0);
    }
    return 0;
}

void job_memory_bytes_text(size_t bytes, char *out, size_t len)
{
    double b = (double)bytes;
    if (b >= 1024.0 * 1024 * 1024)
        snprintf(out, len, "%.2f GiB", b / (1024.0 * 1024 * 1024));
    else if (b >= 1024.0 * 1024)
        snprintf(out, len, "%.1f MiB", b / (1024.0 * 1024));
    else
        snprintf(out, len, "%.0f KiB", b / 1024.0);
}

/* "model 2.10 GiB x 3 replicas, rule state 96.0 MiB x 3, evaluation model
 * 200.0 MiB, data 820.0 MiB, batches 10.0 MiB": the parts of what one place
 * holds. `g`: the index of a GPU in m->gpus, or -1 for the host, which holds
 * the replicas too in a CPU job. */
static void parts_text(const job_memory *m, int g, char *out, size_t len)
{
    char net[32], rule[32], eval[32], data[32], batches[32];
    job_memory_bytes_text(m->model, net, sizeof net);
    job_memory_bytes_text(m->rule0 > m->rule ? m->rule0 : m->rule, rule, sizeof rule);
    job_memory_bytes_text(m->eval, eval, sizeof eval);
    job_memory_bytes_text(m->data, data, sizeof data);
    job_memory_bytes_text(m->batches, batches, sizeof batches);
    int on = g < 0 ? m->replicas : replicas_on(m, g);
    size_t at = 0;
    out[0] = '\0';
    if (m->replicas > 0 && (g >= 0 || m->ngpus == 0)) {
        at = (size_t)snprintf(out, len, "model %s x %d replica%s, rule state %s x %d", net, on,
                              on == 1 ? "" : "s", rule, on);
        if (g <= 0 && at < len) /* replica 0's place */
            at += (size_t)snprintf(out + at, len - at, ", evaluation model %s", eval);
    }
    if (g < 0 && at < len)
        snprintf(out + at, len - at, "%sdata %s, batches %s", at ? ", " : "", data, batches);
}

/* One place against what it has, told as `pre` <bytes> `post`. */
static int place_fits(const job_memory *m, int g, size_t need, size_t has, const char *pre,
                      const char *post, char *why, size_t whylen)
{
    if (need <= has)
        return 1;
    char where[24] = "cpu", need_s[32], has_s[32], parts[320];
    if (g >= 0)
        snprintf(where, sizeof where, "cuda:%d", m->gpus[g]);
    job_memory_bytes_text(need, need_s, sizeof need_s);
    job_memory_bytes_text(has, has_s, sizeof has_s);
    parts_text(m, g, parts, sizeof parts);
    snprintf(why, whylen, "needs %s on %s (%s) but %s%s%s", need_s, where, parts, pre, has_s, post);
    return 0;
}

/* What is free less what is held, at least 0. */
static size_t less_held(size_t free_b, size_t held) { return free_b > held ? free_b - held : 0; }

int job_memory_fits(const job_memory *m, int now, const memory_held *held, char *why,
                    size_t whylen)
{
    const size_t host_held = held ? held->host : 0;
    size_t total, avail;
    if (job_memory_host(&total, &avail) == 0) {
        size_t has = now ? less_held(avail, host_held) : total;
        const char *post = !now       ? " (MemTotal)"
                           : host_held ? " are available now (MemAvailable less what jobs "
                                         "starting will take)"
                                       : " are available now (MemAvailable)";
        if (!place_fits(m, -1, m->host, has, now ? "" : "the machine has ", post, why, whylen))
            return 0;
    }
    /* The total from the device's properties: asking for free memory makes
     * a CUDA context there, which only a job about to start needs. */
    for (int g = 0; g < m->ngpus; g++) {
        size_t free_b = 0, total_b = 0;
        char name[256];
        int known = now ? backend_cuda_mem_info(m->gpus[g], &free_b, &total_b) == 0
                        : backend_cuda_device_info(m->gpus[g], name, sizeof name, &total_b) == 0;
        /* A GPU shared with jobs that are starting (gpu_share): less theirs. */
        const size_t gpu_held = held && now ? held->gpu[m->gpus[g]] : 0;
        if (known && !place_fits(m, g, m->gpu[g], now ? less_held(free_b, gpu_held) : total_b,
                                 now ? "" : "the GPU has ",
                                 !now      ? " in all"
                                 : gpu_held ? " are free there now (less what jobs starting "
                                              "on it will take)"
                                            : " are free there now",
                                 why, whylen))
            return 0;
    }
    return 1;
}

/* The value of a "Name:   N kB" line of meminfo text, in bytes. */
static int meminfo_field(const char *text, const char *name, size_t *bytes)
{
    size_t len = strlen(name);
    for (const char *at = text; at; at = strchr(at, '\n')) {
        at += *at == '\n';
        unsigned long long kb;
        if (!strncmp(at, name, len) && at[len] == ':' &&
            sscanf(at + len + 1, "%llu", &kb) == 1) {
            *bytes = (size_t)kb * 1024;
            return 0;
        }
    }
    return -1;
}

int job_memory_host(size_t *total, size_t *available)
{
    const char *path = getenv("PARLE_MEMINFO");
    FILE *f = fopen(path && *path ? path : "/proc/meminfo", "r");
    if (!f)
        return -1;
    char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = '\0';
    return meminfo_field(text, "MemTotal", total) == 0 &&
                   meminfo_field(text, "MemAvailable", available) == 0
               ? 0
               : -1;
}
