/* The datasets a job may name in data.dataset, one row each, as coupling.c's
 * table is for the rules: the validator accepts exactly these names and fills
 * data.root from a row's default, load.c loads a set by its row's format, and
 * the memory estimate counts a row's shape and usual sizes before any file is
 * read (data_claim_default). tests/unit/test_dataset_table.c checks every row
 * against what its loader gives. The job file's reader (daemon/jobfile/)
 * sits above data/ to read it (docs/architecture.md, "Map"). */
#ifndef PARLE_DATASET_TABLE_H
#define PARLE_DATASET_TABLE_H

#include <stddef.h>
#include <string.h>

enum dataset_format {
    DATASET_IDX,      /* idx.c: the four IDX files of MNIST's layout, gzip or raw */
    DATASET_CIFAR,    /* cifar.c: CIFAR's binary batches, `classes` says which */
    DATASET_SYNTHETIC /* synthetic.c: generated, no files; shaped for the model */
};

typedef struct dataset_kind {
    const char *name;         /* data.dataset */
    enum dataset_format format;
    const char *default_root; /* data.root when the job gives none; NULL: none (a set
                               * read from files then needs the job's data.root) */
    int c, h, w;              /* an example's shape; 0 for a synthetic set, whose shape
                               * follows the model (load.c) */
    long ntrain, ntest;       /* the usual set sizes, before data.*_limit */
    int classes;              /* a synthetic set takes model.classes when it is set */
} dataset_kind;

static const dataset_kind dataset_kinds[] = {
    {"mnist", DATASET_IDX, NULL, 1, 28, 28, 60000, 10000, 10},
    {"fashion-mnist", DATASET_IDX, "/usr/share/datasets/fashion-mnist", 1, 28, 28, 60000, 10000, 10},
    {"cifar10", DATASET_CIFAR, NULL, 3, 32, 32, 50000, 10000, 10},
    {"cifar100", DATASET_CIFAR, NULL, 3, 32, 32, 50000, 10000, 100},
    {"synthetic", DATASET_SYNTHETIC, NULL, 0, 0, 0, 4096, 1024, 10},
};

enum { DATASET_KINDS = sizeof dataset_kinds / sizeof dataset_kinds[0] };

/* The row named `name`, or NULL. */
static inline const dataset_kind *dataset_kind_find(const char *name)
{
    for (size_t i = 0; i < DATASET_KINDS; i++)
        if (!strcmp(dataset_kinds[i].name, name))
            return &dataset_kinds[i];
    return NULL;
}

/* Whether a job naming the set must give data.root: its files have no
 * default place. */
static inline int dataset_kind_needs_root(const dataset_kind *k)
{
    return k->format != DATASET_SYNTHETIC && !k->default_root;
}

#endif
