/* The forms of a job's `devices` (jobconfig.h): read once, by the job's
 * validator, into a job_device_spec, and resolved here, against what the
 * daemon or the machine has, by everyone who places a job (the queue, a
 * restart, the MPI ranks, parle-train). */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "backend.h"
#include "jobconfig.h"

#define MAX_GPU_ID 62
#define MAX_RANK_ID 63

int job_devices_ranks(const char *s, uint64_t *ranks, char *why, size_t whylen)
{
    *ranks = 0;
    if (strncmp(s, "rank", 4) != 0)
        return 0;
    const char *kind = NULL; /* ":cpu" or ":gpu", the same for every rank */
    int first = 0;
    for (const char *at = s;;) {
        int id = 0;
        if (strncmp(at, "rank", 4) != 0 || !isdigit((unsigned char)at[4])) {
            snprintf(why, whylen, "expected rankN:cpu or rankN:gpu items separated by commas");
            return -1;
        }
        for (at += 4; isdigit((unsigned char)*at); at++)
            if ((id = id * 10 + (*at - '0')) > MAX_RANK_ID) {
                snprintf(why, whylen, "MPI ranks are 0..%d here", MAX_RANK_ID);
                return -1;
            }
        if ((strncmp(at, ":cpu", 4) != 0 && strncmp(at, ":gpu", 4) != 0) ||
            (at[4] && at[4] != ',')) {
            snprintf(why, whylen, "rank%d must be followed by \":cpu\" or \":gpu\"", id);
            return -1;
        }
        if (!kind) {
            kind = at, first = id;
        } else if (strncmp(at, kind, 4) != 0) {
            snprintf(why, whylen, "rank%d is on %.3s and rank%d on %.3s: a job runs on CPUs "
                     "everywhere or on GPUs everywhere", first, kind + 1, id, at + 1);
            return -1;
        }
        if (*ranks & (1ull << id)) {
            snprintf(why, whylen, "rank%d is named twice", id);
            return -1;
        }
        *ranks |= 1ull << id;
        at += 4;
        if (!*at)
            break;
        if (!*++at) {
            snprintf(why, whylen, "ends with a comma");
            return -1;
        }
    }
    if (!(*ranks & 1)) {
        snprintf(why, whylen, "must include rank0 (it serves the job and runs replica "
                 "0, the master)");
        return -1;
    }
    return 1;
}

int job_devices_read(const char *s, job_device_spec *d, char *why, size_t whylen)
{
    *d = (job_device_spec){.kind = DEVICES_CPU};
    int named = job_devices_ranks(s, &d->ranks, why, whylen);
    if (named < 0)
        return -1;
    if (named) {
        /* Each named rank on its CPU or all its GPUs, as "cpu" or "gpu". */
        d->kind = strncmp(strchr(s, ':'), ":gpu", 4) ? DEVICES_CPU : DEVICES_GPU;
        return 0;
    }
    if (!strncmp(s, "cpu:", 4)) {
        long k = 0;
        const char *at = s + 4;
        for (; isdigit((unsigned char)*at) && k <= JOB_MAX_CORES; at++)
            k = k * 10 + (*at - '0');
        if (at == s + 4 || *at || k < 1 || k > JOB_MAX_CORES) {
            snprintf(why, whylen, "cpu:K takes K of the daemon's cores, K in 1..%d",
                     JOB_MAX_CORES);
            return -1;
        }
        d->cores = (int)k;
        return 0;
    }
    if (!strncmp(s, "gpu:", 4)) {
        long n = 0;
        const char *at = s + 4;
        for (; isdigit((unsigned char)*at) && n <= MAX_GPU_ID + 1; at++)
            n = n * 10 + (*at - '0');
        if (at == s + 4 || *at || n < 1 || n > MAX_GPU_ID + 1) {
            snprintf(why, whylen, "gpu:N takes any N of the daemon's GPUs, N in 1..%d",
                     MAX_GPU_ID + 1);
            return -1;
        }
        d->kind = DEVICES_GPU;
        d->count = (int)n;
        return 0;
    }
    if (!strcmp(s, "cpu") || !strcmp(s, "auto") || !strcmp(s, "gpu")) {
        d->kind = s[0] == 'c' ? DEVICES_CPU : s[0] == 'a' ? DEVICES_AUTO : DEVICES_GPU;
        return 0;
    }
    d->kind = DEVICES_IDS;
    if (!strncmp(s, "cuda:", 5))
        s += 5;
    for (;;) {
        int id = 0;
        if (!isdigit((unsigned char)*s))
            break;
        for (; isdigit((unsigned char)*s); s++)
            if ((id = id * 10 + (*s - '0')) > MAX_GPU_ID)
                goto not_a_form;
        if (d->ids & (1ull << id))
            break;
        d->ids |= 1ull << id;
        if (!*s)
            return 0;
        if (*s++ != ',')
            break;
    }
not_a_form:
    if (whylen)
        *why = '\0';
    return -2;
}

uint64_t job_devices_present(int ngpus)
{
    /* A GPU the build has no code for is shown (parlectl devices) but not present. */
    return JOB_DEVICES_CPU |
           ((ngpus >= JOB_DEVICES_MAX_GPUS ? ~JOB_DEVICES_CPU : (1ull << ngpus) - 1) &
            ~backend_gpu_probe()->unusable);
}

int job_devices_resolve(const job_device_spec *d, const char *text, uint64_t allowed,
                        enum job_devices_of of, uint64_t *out, char *err, size_t errlen)
{
    uint64_t gpus = allowed & ~JOB_DEVICES_CPU;
    switch (d->kind) {
    case DEVICES_CPU: *out = JOB_DEVICES_CPU; break;
    case DEVICES_AUTO: *out = gpus ? gpus : JOB_DEVICES_CPU; break;
    case DEVICES_GPU: *out = gpus; break;
    case DEVICES_IDS: *out = d->ids; break;
    }
    const int present = __builtin_popcountll(gpus);
    if (d->kind == DEVICES_GPU && d->count && present >= d->count) {
        /* The daemon's scheduler picks N as the job starts (any of *out);
         * elsewhere the lowest N. */
        if (of == DEVICES_OF_MACHINE)
            for (uint64_t all = *out, n = 0; all; all &= all - 1)
                if (++n > (uint64_t)d->count)
                    *out &= ~(all & -all);
        return 0;
    }
    /* Why there are fewer GPUs than the machine may hold: the driver's error, ... */
    char why[sizeof backend_gpu_probe()->error + 128];
    backend_gpu_why_none(why, sizeof why);
    if (d->kind == DEVICES_GPU && d->count) {
        snprintf(err, errlen, "%s\"%s\" asks for %d GPUs, %s %d%s%s", of == DEVICES_OF_DAEMON ? "" : "devices: ",
                 text, d->count, of == DEVICES_OF_DAEMON ? "the daemon has" : "this machine has",
                 present, *why ? ": " : "", why);
        return -1;
    }
    if (of == DEVICES_OF_DAEMON) {
        if (!*out)
            snprintf(err, errlen, "\"%s\": the daemon has no GPU%s%s", text, *why ? ": " : "", why);
        else if (*out & ~allowed)
            snprintf(err, errlen, "\"%s\" is not within the daemon's --devices", text);
    } else {
        if (!*out)
            snprintf(err, errlen, "devices: \"gpu\": this machine has no GPU%s%s", *why ? ": " : "", why);
        else if (*out & ~allowed)
            snprintf(err, errlen, "devices: GPU %d: this machine has %d GPU%s",
                     __builtin_ctzll(*out & ~allowed), present, present == 1 ? "" : "s");
    }
    return *out && !(*out & ~allowed) ? 0 : -1;
}

int job_devices_gpus(uint64_t set, int *gpus)
{
    int n = 0;
    for (int i = 0; i < JOB_DEVICES_MAX_GPUS; i++)
        if (set & (1ull << i))
            gpus[n++] = i;
    return n;
}
