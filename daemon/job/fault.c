#include "fault.h"

#include <stdio.h>
#include <string.h>

static const char *const phase_names[] = {"none", "start", "step", "sync", "eval",
                                          "checkpoint", "hang", "device", "oom", "load",
                                          "nan", "park", "stopping"};

const char *fault_phase_name(enum fault_phase phase) { return phase_names[phase]; }

int fault_parse(const char *spec, fault_point *fp, char *err, size_t errlen)
{
    memset(fp, 0, sizeof *fp);
    if (!spec || !*spec)
        return 0;
    char phase[16];
    int rank, step = 1, used = 0;
    long k;
    int got = sscanf(spec, "%d:%15[a-z]:%ld%n:%d%n", &rank, phase, &k, &used, &step, &used);
    if (got < 3 || spec[used] != '\0' || rank < 0 || k < 1 || step < 1) {
        snprintf(err, errlen, "PARLE_FAULT_REPLICA=\"%s\": want RANK:PHASE:K[:STEP]", spec);
        return -1;
    }
    for (int p = FAULT_START; p <= FAULT_STOPPING; p++) {
        if (strcmp(phase, phase_names[p]) == 0) {
            *fp = (fault_point){.phase = (enum fault_phase)p, .rank = rank, .k = k, .step = step};
            return 0;
        }
    }
    snprintf(err, errlen, "PARLE_FAULT_REPLICA=\"%s\": no phase \"%s\"", spec, phase);
    return -1;
}

int fault_strikes(const fault_point *fp, int rank, enum fault_phase phase, long k, int step)
{
    if (fp->phase != phase)
        return 0;
    if (phase == FAULT_LOAD)
        return fp->k == k;
    if (fp->rank != rank)
        return 0;
    if (phase == FAULT_START)
        return 1;
    if (phase == FAULT_STEP || phase == FAULT_HANG || phase == FAULT_DEVICE || phase == FAULT_OOM ||
        phase == FAULT_NAN)
        return fp->k == k && fp->step == step;
    return fp->k == k;
}
