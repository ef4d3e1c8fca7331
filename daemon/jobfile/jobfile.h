/* Reading a job file: parsed and validated completely before it is queued,
 * against the field table, the rules' own checks (coupling.h) and the
 * datasets' table (dataset_table.h); docs/config.md lists every field. */
#ifndef PARLE_JOBFILE_H
#define PARLE_JOBFILE_H

#include <stddef.h>
#include "jobconfig.h"

/* Parse a job from JSON text. On failure returns -1 and writes every problem,
 * each as "dotted.path: why", joined by "; ", into err. */
int job_config_parse(const char *json, size_t len, job_config *cfg, char *err, size_t errlen);
/* The same for a job already parsed as JSON (a request's "job"). */
struct cJSON;
int job_config_from_json(const struct cJSON *root, job_config *cfg, char *err, size_t errlen);

#endif
