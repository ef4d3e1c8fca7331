/* The forms of a job's `devices` (jobconfig.h), parsed in one place so that
 * every reader of a job file (the validator, the scheduler, the runner, the
 * MPI ranks) agrees. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

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

int job_devices_parse(const char *s, enum job_devices *kind, uint64_t *ids)
{
    *ids = 0;
    char why[8];
    if (!strncmp(s, "rank", 4)) {
        /* Each named rank on its CPU or all its GPUs, as "cpu" or "gpu". */
        uint64_t ranks;
        *kind = strncmp(strchr(s, ':') ? strchr(s, ':') : s, ":gpu", 4) ? DEVICES_CPU
                                                                        : DEVICES_GPU;
        return job_devices_ranks(s, &ranks, why, sizeof why) == 1 ? 0 : -1;
    }
    if (!strcmp(s, "cpu") || !strcmp(s, "auto") || !strcmp(s, "gpu")) {
        *kind = s[0] == 'c' ? DEVICES_CPU : s[0] == 'a' ? DEVICES_AUTO : DEVICES_GPU;
        return 0;
    }
    *kind = DEVICES_IDS;
    if (!strncmp(s, "cuda:", 5))
        s += 5;
    for (;;) {
        if (!isdigit((unsigned char)*s))
            return -1;
        int id = 0;
        for (; isdigit((unsigned char)*s); s++)
            if ((id = id * 10 + (*s - '0')) > MAX_GPU_ID)
                return -1;
        if (*ids & (1ull << id))
            return -1;
        *ids |= 1ull << id;
        if (!*s)
            return 0;
        if (*s++ != ',')
            return -1;
    }
}

int job_devices_valid(const char *s)
{
    enum job_devices kind;
    uint64_t ids;
    return job_devices_parse(s, &kind, &ids) == 0;
}
