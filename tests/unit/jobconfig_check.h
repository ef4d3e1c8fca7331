/* What the job file tests share (test_jobconfig*.c): the common valid
 * sections of a job, spliced into their cases, a bad job with the message
 * it must get, and the parse and count of messages they all use. */
#ifndef PARLE_JOBCONFIG_CHECK_H
#define PARLE_JOBCONFIG_CHECK_H

#include <stddef.h>

#include "jobfile.h"

/* The common valid sections, spliced into the tests' cases. */
#define MODEL "\"model\": {\"arch\": \"lenet\"}"
#define DATA "\"data\": {\"dataset\": \"synthetic\"}"
#define SGD "\"algorithm\": {\"name\": \"sgd\"}"
#define BASE MODEL ", " DATA ", " SGD
#define JOB(...) "{" BASE ", " __VA_ARGS__ "}"

typedef struct bad_case {
    const char *json;
    const char *want; /* a substring of the error */
} bad_case;

/* Messages are joined by "; " (which also introduces an enum's known values). */
int count_messages(const char *err);

/* job_config_parse of the whole of a NUL-terminated text. */
int parse(const char *json, job_config *cfg, char *err, size_t errlen);

#endif
