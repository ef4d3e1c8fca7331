/* The state dir's numbered folders listed, their next id kept and one
 * removed (numbered_dirs.h). */
#include "numbered_dirs.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file_tree.h"
#include "fsutil.h"
#include "log.h"

int numbered_id(const char *name, char prefix)
{
    char *end;
    if (name[0] != prefix || name[1] < '0' || name[1] > '9')
        return -1;
    long n = strtol(name + 1, &end, 10);
    return *end == '\0' && n < 100000000 ? (int)n : -1;
}

static int by_number(const void *a, const void *b)
{
    const char *p = *(char *const *)a, *q = *(char *const *)b;
    int x = numbered_id(p, p[0]), y = numbered_id(q, q[0]);
    return (x > y) - (x < y);
}

void numbered_dirs_free(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* The next id kept by a removal (job_remove.c), if higher: removed ids are
 * never issued again. */
static void raise_to_kept_id(const char *dir, int *next_id)
{
    char path[1200], err[256];
    size_t len;
    snprintf(path, sizeof path, "%s/%s", dir, NEXT_ID_FILE);
    char *text = read_file_text(path, 64, &len, err, sizeof err);
    long kept = text ? strtol(text, NULL, 10) : 0;
    if (kept > *next_id && kept < 1000000000)
        *next_id = (int)kept;
    free(text);
}

int numbered_dirs(const char *dir, char prefix, char ***names_out, size_t *n_out, int *next_id,
                  char *err, size_t errlen)
{
    DIR *d = opendir(dir);
    if (!d) {
        snprintf(err, errlen, "%s: %s", dir, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    int rc = 0;
    while ((e = readdir(d))) {
        if (strncmp(e->d_name, REMOVING_PREFIX, strlen(REMOVING_PREFIX)) == 0) {
            char path[1400], why[1400];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            if (remove_tree(path, why, sizeof why) != 0) /* a removal a crash cut short */
                server_log(LOG_WARN, "could not finish removing %s", why);
            continue;
        }
        int num = numbered_id(e->d_name, prefix);
        if (num < 0)
            continue;
        if (num >= *next_id)
            *next_id = num + 1;
        if (n == cap) {
            cap = cap ? 2 * cap : 64;
            char **more = realloc(names, cap * sizeof(*names));
            if (!more) {
                rc = -1;
                break;
            }
            names = more;
        }
        if (!(names[n] = strdup(e->d_name))) {
            rc = -1;
            break;
        }
        n++;
    }
    closedir(d);
    if (rc != 0) {
        snprintf(err, errlen, "out of memory listing %s", dir);
        numbered_dirs_free(names, n);
        return -1;
    }
    if (n > 0)
        qsort(names, n, sizeof(*names), by_number);
    raise_to_kept_id(dir, next_id);
    *names_out = names;
    *n_out = n;
    return 0;
}

int numbered_dir_remove(const char *dir, const char *name, char *err, size_t errlen)
{
    char from[1200], to[1300];
    snprintf(from, sizeof from, "%s/%s", dir, name);
    snprintf(to, sizeof to, "%s/%s%s", dir, REMOVING_PREFIX, name);
    if (rename(from, to) != 0) {
        snprintf(err, errlen, "%s: %s", from, strerror(errno));
        return -1;
    }
    return remove_tree(to, err, errlen);
}

int numbered_keep_next(const char *dir, int next_id, char *err, size_t errlen)
{
    char path[1200], text[32];
    snprintf(path, sizeof path, "%s/%s", dir, NEXT_ID_FILE);
    int n = snprintf(text, sizeof text, "%d\n", next_id);
    return atomic_write_file(path, text, (size_t)n, err, errlen);
}

