/* Durable file writes: nothing that matters is ever half written. */
#ifndef PARLE_FSUTIL_H
#define PARLE_FSUTIL_H

#include <stddef.h>
#include <stdio.h>

/* An atomic replacement of `path`: write to a temporary file in the same
 * directory, fsync it, rename it over `path`, fsync the directory. */
typedef struct atomic_file {
    FILE *f;
    char path[1024];
    char tmp[1040];
} atomic_file;

int atomic_open(atomic_file *af, const char *path, char *err, size_t errlen);
/* Flush, fsync, rename, fsync dir. On any error the temporary is removed,
 * `path` keeps its previous content, and -1 is returned with the reason. */
int atomic_commit(atomic_file *af, char *err, size_t errlen);
void atomic_abort(atomic_file *af);
int atomic_write_file(const char *path, const void *data, size_t len, char *err, size_t errlen);

/* mkdir -p with mode 0700 for created directories. */
int mkdir_p(const char *path, char *err, size_t errlen);

/* A whole file of at most `max` bytes, NUL-terminated, malloc'd (*len: its
 * length). NULL with a message naming the file, errno kept (ENOENT: missing). */
char *read_file_text(const char *path, size_t max, size_t *len, char *err, size_t errlen);

#endif
