/* Durable file writes: temp file in the target's directory, fsync, rename,
 * fsync of the directory, so a crash leaves either the old file or the new. */
#include "fsutil.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Distinguishes temporaries of concurrent writers within one process. */
static atomic_uint tmp_counter;

int atomic_open(atomic_file *af, const char *path, char *err, size_t errlen)
{
    af->f = NULL;
    af->tmp[0] = '\0';
    if (strlen(path) >= sizeof af->path) {
        snprintf(err, errlen, "path too long: %.64s...", path);
        return -1;
    }
    strcpy(af->path, path);
    unsigned n = atomic_fetch_add(&tmp_counter, 1);
    int len = snprintf(af->tmp, sizeof af->tmp, "%s.tmp-%d-%u", path, (int)getpid(), n);
    if (len < 0 || (size_t)len >= sizeof af->tmp) {
        snprintf(err, errlen, "path too long: %.64s...", path);
        af->tmp[0] = '\0';
        return -1;
    }
    int fd = open(af->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        snprintf(err, errlen, "cannot write %s: creating %s: %s", path, af->tmp, strerror(errno));
        af->tmp[0] = '\0';
        return -1;
    }
    af->f = fdopen(fd, "wb");
    if (!af->f) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        close(fd);
        unlink(af->tmp);
        af->tmp[0] = '\0';
        return -1;
    }
    return 0;
}

void atomic_abort(atomic_file *af)
{
    if (af->f) {
        fclose(af->f);
        af->f = NULL;
    }
    if (af->tmp[0]) {
        unlink(af->tmp);
        af->tmp[0] = '\0';
    }
}

/* PARLE_FAULT_WRITE_AFTER=N (tests): a file of more than N bytes fails to
 * commit as a full disk would. */
static int fault_injected(off_t size)
{
    const char *env = getenv("PARLE_FAULT_WRITE_AFTER");
    if (!env || !*env)
        return 0;
    return size > (off_t)strtoll(env, NULL, 10);
}

static int fsync_parent_dir(const char *path, char *err, size_t errlen)
{
    char dir[sizeof ((atomic_file *)0)->path];
    const char *slash = strrchr(path, '/');
    if (!slash)
        strcpy(dir, ".");
    else if (slash == path)
        strcpy(dir, "/");
    else
        snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 || fsync(fd) != 0) {
        snprintf(err, errlen, "cannot write %s: fsync of directory %s: %s", path, dir,
                 strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    return 0;
}

int atomic_commit(atomic_file *af, char *err, size_t errlen)
{
    if (!af->f) {
        snprintf(err, errlen, "%s: commit without an open file", af->path);
        return -1;
    }
    struct stat st;
    if (fflush(af->f) != 0 || fstat(fileno(af->f), &st) != 0) {
        snprintf(err, errlen, "cannot write %s: %s", af->path, strerror(errno));
        goto fail;
    }
    if (fault_injected(st.st_size)) {
        snprintf(err, errlen, "cannot write %s: %s (injected by PARLE_FAULT_WRITE_AFTER)",
                 af->path, strerror(ENOSPC));
        goto fail;
    }
    if (fsync(fileno(af->f)) != 0) {
        snprintf(err, errlen, "cannot write %s: fsync: %s", af->path, strerror(errno));
        goto fail;
    }
    int rc = fclose(af->f);
    af->f = NULL;
    if (rc != 0) {
        snprintf(err, errlen, "cannot write %s: close: %s", af->path, strerror(errno));
        goto fail;
    }
    if (rename(af->tmp, af->path) != 0) {
        snprintf(err, errlen, "cannot write %s: rename from %s: %s", af->path, af->tmp,
                 strerror(errno));
        goto fail;
    }
    af->tmp[0] = '\0';
    return fsync_parent_dir(af->path, err, errlen);
fail:
    atomic_abort(af);
    return -1;
}

int atomic_write_file(const char *path, const void *data, size_t len, char *err, size_t errlen)
{
    atomic_file af;
    if (atomic_open(&af, path, err, errlen) != 0)
        return -1;
    if (len > 0 && fwrite(data, 1, len, af.f) != len) {
        snprintf(err, errlen, "cannot write %s: %s", path, strerror(errno));
        atomic_abort(&af);
        return -1;
    }
    return atomic_commit(&af, err, errlen);
}

int mkdir_p(const char *path, char *err, size_t errlen)
{
    char buf[4096];
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof buf) {
        snprintf(err, errlen, "mkdir: bad path length (%zu)", len);
        return -1;
    }
    memcpy(buf, path, len + 1);
    /* Create each prefix ending before a '/', then the whole path. */
    for (size_t i = 1; i <= len; i++) {
        if (buf[i] != '/' && buf[i] != '\0')
            continue;
        if (buf[i - 1] == '/')
            continue; /* repeated or trailing slash */
        char saved = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0700) != 0) {
            int e = errno;
            struct stat st;
            if (e != EEXIST) {
                snprintf(err, errlen, "cannot create directory %s: %s", buf, strerror(e));
                return -1;
            }
            if (stat(buf, &st) != 0 || !S_ISDIR(st.st_mode)) {
                snprintf(err, errlen, "cannot create directory %s: exists and is not a directory",
                         buf);
                return -1;
            }
        }
        buf[i] = saved;
    }
    return 0;
}

/* A whole file of at most `max` bytes, NUL-terminated, malloc'd. NULL with
 * errno kept (ENOENT: missing) and a message. */
char *read_file_text(const char *path, size_t max, size_t *len, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        int e = errno;
        snprintf(err, errlen, "%s: %s", path, strerror(e));
        errno = e;
        return NULL;
    }
    struct stat st;
    char *text = NULL;
    if (fstat(fileno(f), &st) != 0 || (size_t)st.st_size > max) {
        snprintf(err, errlen, "%s: larger than %zu bytes", path, max);
        errno = EFBIG;
    } else if (!(text = malloc((size_t)st.st_size + 1))) {
        snprintf(err, errlen, "%s: out of memory", path);
        errno = ENOMEM;
    } else {
        *len = fread(text, 1, (size_t)st.st_size, f);
        text[*len] = '\0';
        if (ferror(f)) {
            snprintf(err, errlen, "%s: read error", path);
            free(text);
            text = NULL;
            errno = EIO;
        }
    }
    fclose(f);
    return text;
}
