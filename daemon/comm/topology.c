#include "topology.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


int topology_device(int rank, const int *gpus, int ngpus)
{
    return ngpus > 0 ? gpus[rank % ngpus] : -1;
}

int topology_build(topology *t, int n, const int *device, char *err, size_t errlen)
{
    memset(t, 0, sizeof *t);
    if (n < 1 || n > TOPO_MAX_RANKS) {
        snprintf(err, errlen, "topology: %d replicas (1 to %d)", n, TOPO_MAX_RANKS);
        return -1;
    }
    t->n = n;
    for (int r = 0; r < n; r++) {
        if ((device[r] < 0) != (device[0] < 0)) {
            snprintf(err, errlen, "topology: replica %d is on %s and replica 0 on %s: a job "
                     "runs on the CPU or on GPUs, not both", r, device[r] < 0 ? "the CPU" : "a GPU",
                     device[0] < 0 ? "the CPU" : "a GPU");
            return -1;
        }
        int g = 0;
        while (g < t->ngroups && t->group_device[g] != device[r])
            g++;
        if (g == t->ngroups) {
            if (g == TOPO_MAX_GROUPS) {
                snprintf(err, errlen, "topology: more than %d devices", TOPO_MAX_GROUPS);
                return -1;
            }
            /* Ranks are visited in order, so the first one seen leads. */
            t->ngroups++;
            t->group_device[g] = device[r];
            t->leader[g] = r;
        }
        t->device[r] = device[r];
        t->group[r] = g;
        t->size[g]++;
    }
    t->nccl_ranks = t->ngroups;
    t->total = n;
    return 0;
}

int topology_join(topology *t, int groups_before, int groups_total, int replicas_total,
                  char *err, size_t errlen)
{
    if (groups_before < 0 || groups_before + t->ngroups > groups_total ||
        replicas_total < t->n) {
        snprintf(err, errlen, "topology: %d GPU groups after %d of %d, %d replicas of %d: the "
                 "processes disagree about the job", t->ngroups, groups_before, groups_total,
                 t->n, replicas_total);
        return -1;
    }
    t->nccl_first = groups_before;
    t->nccl_ranks = groups_total;
    t->total = replicas_total;
    return 0;
}

int topology_members(const topology *t, int g, int *ranks)
{
    int k = 0;
    for (int r = t->leader[g]; r < t->n; r++)
        if (t->group[r] == g)
            ranks[k++] = r;
    return k;
}

float topology_weight(const topology *t, int g) { return (float)t->size[g] / (float)t->total; }

int topology_parse_cpulist(const char *s, int *cpus, int max)
{
    int n = 0;
    while (*s && *s != '\n') {
        char *end;
        if (!isdigit((unsigned char)*s))
            return -1;
        long lo = strtol(s, &end, 10), hi = lo;
        s = end;
        if (*s == '-') {
            if (!isdigit((unsigned char)s[1]))
                return -1;
            hi = strtol(s + 1, &end, 10);
            s = end;
        }
        if (hi < lo || hi > 1 << 20)
            return -1;
        for (long c = lo; c <= hi; c++) {
            if (n == max)
                return -1;
            cpus[n++] = (int)c;
        }
        if (*s == ',')
            s++;
        else if (*s && *s != '\n')
            return -1;
    }
    return n;
}

int topology_local_cpus(const char *sysfs_root, const char *pci_bus_id, int *cpus, int max)
{
    char path[512], line[4096];
    int len = snprintf(path, sizeof path, "%s/bus/pci/devices/", sysfs_root);
    /* CUDA spells the bus id in upper case, sysfs in lower. */
    for (const char *p = pci_bus_id; *p && len < (int)sizeof path - 1; p++)
        path[len++] = (char)tolower((unsigned char)*p);
    snprintf(path + len, sizeof path - (size_t)len, "/local_cpulist");
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    char *got = fgets(line, sizeof line, f);
    fclose(f);
    return got ? topology_parse_cpulist(line, cpus, max) : -1;
}

int topology_near_cpus(const char *sysfs_root, const char *pci_bus_id, const int *allowed,
                       int nallowed, int *out)
{
    int near[1024], nnear = pci_bus_id ? topology_local_cpus(sysfs_root, pci_bus_id, near, 1024)
                                       : -1;
    int n = 0;
    for (int i = 0; i < nallowed; i++)
        for (int j = 0; j < nnear; j++)
            if (allowed[i] == near[j]) {
                out[n++] = allowed[i];
                break;
            }
    if (n == 0) {
        memcpy(out, allowed, (size_t)nallowed * sizeof(int));
        n = nallowed;
    }
    return n;
}

int topology_gpu_cpus(int device, const char *sysfs_root, const int *allowed, int nallowed,
                      int *out)
{
    char id[64];
    int known = topology_pci_bus_id(device, id, sizeof id) == 0;
    return topology_near_cpus(sysfs_root, known ? id : NULL, allowed, nallowed, out);
}

