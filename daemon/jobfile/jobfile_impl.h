/* Internal to the job file's reader: the field table and the problems
 * found (jobfile_fields.c), each field's reading (jobfile.c) and the checks
 * between fields once all are read (jobfile_checks.c). */
#ifndef PARLE_JOBFILE_IMPL_H
#define PARLE_JOBFILE_IMPL_H

#include <stddef.h>

#include "coupling.h"
#include "jobconfig.h"

/* K_RULE: a string, one of the coupling rules' names (coupling.h); K_DATASET:
 * one of the datasets' names (data/dataset_table.h). */
enum field_kind { K_INT, K_NUM, K_FLOAT, K_BOOL, K_STR, K_RULE, K_DATASET, K_SEED, K_SCHEDULE,
                  K_DURATION };
enum { LO_OPEN = 1, HI_OPEN = 2 };

typedef struct field {
    const char *path;
    enum field_kind kind;
    size_t offset, size;
    double lo, hi;              /* K_INT, K_NUM, K_FLOAT, K_SEED: allowed range */
    int open;                   /* LO_OPEN, HI_OPEN: the bound itself is excluded */
    const char *const *choices; /* K_STR: the allowed values, or NULL for free text */
} field;

/* Every field a job file may hold (jobfile_fields.c, which checks this count). */
#define NFIELDS 71
extern const field fields[];

/* What the file did with each field (coupling.h's enum rule_field): the
 * defaults and cross-checks need to know, and a bad value must not be
 * reported twice. */

typedef struct parser {
    job_config *cfg;
    enum rule_field state[NFIELDS];
    char *err;
    size_t errlen, used;
    int nerrors;
    int full; /* err holds all it can, ending in "..." */
} parser;

/* jobfile_fields.c: one problem, joined to the list in p->err; the index of
 * the field at `path` (-1: none); what the file did with it; data.dataset's
 * choices, NULL-terminated. */
__attribute__((format(printf, 2, 3))) void report(parser *p, const char *fmt, ...);
int field_index(const char *path);
enum rule_field state_of(const parser *p, const char *path);
const char *const *dataset_names(void);

/* jobfile_checks.c: the rules between fields, and the defaults that depend
 * on another field, once every field is read. */
void finish(parser *p);

#endif
