/* Admission of a job's data before it is loaded: the claim a loader makes
 * once it has read its files' headers, and the question it asks with it.
 * The loaders (idx.c, cifar.c, load.c's synthetic sets) call data_admit;
 * the caller of the load (the queue, a test) sets the answer with
 * data_admit_with. Nothing here calls a loader. */
#ifndef PARLE_ADMIT_H
#define PARLE_ADMIT_H

#include <stddef.h>

/* What a job's data will take once loaded, as its files say before any of
 * it is allocated: IDX headers, CIFAR file sizes (a file's header can claim
 * a million images of a sparse file), or a synthetic set's fields. */
typedef struct data_claim {
    long ntrain, ntest;       /* examples to load: each set's count within its limit */
    int c, h, w, classes;
    long claimed;             /* examples the larger set's files claim, limits aside */
    char source[4200];        /* what claims them: "PATH's header", "PATH's size"... */
} data_claim;

/* Asked by a loader once it has read every header of the job's files (from
 * the descriptors it then reads the data from) and before it allocates
 * anything: 0 to load, or -1 with why to refuse. */
typedef int (*data_admit_fn)(void *user, const data_claim *claim, char *err, size_t errlen);

/* For the calling thread, as data_files_as: ask `admit` (NULL: nothing is
 * asked) before every load. */
void data_admit_with(data_admit_fn admit, void *user);

/* The loaders' call: the thread's admit's answer (0 if none is set). */
int data_admit(const data_claim *claim, char *err, size_t errlen);

#endif
