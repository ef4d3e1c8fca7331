/* The state dir's numbered folders: jobs/j0001..., sweeps/s0001...
 * (numbered_dirs.c). An id the daemon issued is never issued again, even
 * once its folder is removed: the next one is kept in NEXT_ID_FILE of the
 * folder, and a folder being removed is first renamed with REMOVING_PREFIX,
 * so that a crash midway leaves no half folder under its id. */
#ifndef PARLE_NUMBERED_DIRS_H
#define PARLE_NUMBERED_DIRS_H

#include <stddef.h>

#define REMOVING_PREFIX ".removing-"
#define NEXT_ID_FILE ".next_id"

/* The number of an id issued with `prefix` (j0042: 42; s0007: 7), or -1. */
int numbered_id(const char *name, char prefix);
/* The entries of `dir` so named, in number order (malloc'd;
 * numbered_dirs_free), raising *next_id past each and to NEXT_ID_FILE's,
 * and finishing removals a crash cut short: 0, or -1 with a message. */
int numbered_dirs(const char *dir, char prefix, char ***names, size_t *n, int *next_id,
                  char *err, size_t errlen);
void numbered_dirs_free(char **names, size_t n);
/* next_id kept in dir's NEXT_ID_FILE (before a removal): 0, or -1. */
int numbered_keep_next(const char *dir, int next_id, char *err, size_t errlen);
/* dir/name taken out of sight (a rename within dir: atomic) and removed.
 * 0, or -1 with a message (nothing moved, or what stayed). */
int numbered_dir_remove(const char *dir, const char *name, char *err, size_t errlen);

#endif
