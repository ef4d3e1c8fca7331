/* libFuzzer harness: any bytes as a sweep object, as parled receives it from
 * parlectl (the base job inline). Reading must not crash, leak or read past
 * the input; a rejection carries a message; an accepted sweep stays within
 * its bounds and its points are distinct grid indices in ascending order;
 * its jobs' check (sweep_spec_check) refuses with a message, or its first
 * and last points expand to jobs with a label. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cjson/cJSON.h>

#include "sweep_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_job(const sweep_spec *s, long point, int k)
{
    char err[512] = "";
    cJSON *job = sweep_job(s, point, k, err, sizeof err);
    if (!job || err[0]) /* sweep_spec_check validated every job */
        __builtin_trap();
    cJSON_Delete(job);
    char label[256];
    if (sweep_point_label(s, point, label, sizeof label) != label ||
        strnlen(label, sizeof label) == sizeof label)
        __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    cJSON *root = cJSON_ParseWithLength((const char *)data, size);
    if (!root)
        return 0;
    sweep_spec s;
    char err[1024];
    err[0] = '\0';
    int rc = sweep_spec_read(root, &s, err, sizeof err);
    if (strnlen(err, sizeof err) == sizeof err)
        __builtin_trap(); /* unterminated message */
    if (rc != 0) {
        if (rc != -1 || !err[0])
            __builtin_trap();
        cJSON_Delete(root);
        return 0;
    }
    if (s.nkeys < 0 || s.nkeys > SWEEP_MAX_KEYS || s.grid < 1 || s.grid > SWEEP_MAX_GRID ||
        s.seeds < 1 || s.seeds > SWEEP_MAX_SEEDS || s.npoints < 1 ||
        (long)s.npoints * s.seeds > SWEEP_MAX_JOBS || !s.name[0])
        __builtin_trap();
    for (int i = 0; i < s.npoints; i++)
        if (s.points[i] < 0 || s.points[i] >= s.grid || (i > 0 && s.points[i] <= s.points[i - 1]))
            __builtin_trap();
    rc = sweep_spec_check(&s, err, sizeof err);
    if (strnlen(err, sizeof err) == sizeof err || (rc != 0 && (rc != -1 || !err[0])))
        __builtin_trap();
    if (rc == 0) {
        check_job(&s, s.points[0], 0);
        check_job(&s, s.points[s.npoints - 1], s.seeds - 1);
    }
    sweep_spec_free(&s);
    cJSON_Delete(root);
    return 0;
}
