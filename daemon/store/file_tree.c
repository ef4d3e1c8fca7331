#include "file_tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Deeper than any tree parled writes (a job's ckpt/kN/file): a bound on
 * recursion and open descriptors, whatever is found on disk. */
#define TREE_MAX_DEPTH 16

static uint64_t dir_bytes(int dirfd, int depth)
{
    DIR *d = fdopendir(dirfd);
    if (!d) {
        close(dirfd);
        return 0;
    }
    uint64_t total = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        struct stat st;
        if (fstatat(dirfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
            continue;
        total += (uint64_t)st.st_blocks * 512;
        int sub;
        if (S_ISDIR(st.st_mode) && depth < TREE_MAX_DEPTH &&
            (sub = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) >= 0)
            total += dir_bytes(sub, depth + 1);
    }
    closedir(d);
    return total;
}

uint64_t tree_disk_bytes(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return 0;
    int fd = S_ISDIR(st.st_mode) ? open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
    return (uint64_t)st.st_blocks * 512 + (fd >= 0 ? dir_bytes(fd, 1) : 0);
}

/* Empty the directory open as dirfd (closed here): 0, or -1 with err set
 * for the first entry that stayed. */
static int empty_dir(int dirfd, const char *path, int depth, char *err, size_t errlen)
{
    DIR *d = fdopendir(dirfd);
    if (!d) {
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        close(dirfd);
        return -1;
    }
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        if (unlinkat(dirfd, e->d_name, 0) == 0)
            continue;
        char child[4096];
        snprintf(child, sizeof child, "%s/%s", path, e->d_name);
        int sub = -1, failed = errno;
        if (failed == EISDIR && depth < TREE_MAX_DEPTH) {
            sub = openat(dirfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            failed = sub < 0 ? errno : 0;
        }
        if (sub >= 0 && empty_dir(sub, child, depth + 1, err, errlen) != 0) {
            rc = -1; /* err names what stayed below */
            continue;
        }
        if (sub >= 0 && unlinkat(dirfd, e->d_name, AT_REMOVEDIR) != 0)
            failed = errno;
        if (failed) {
            if (rc == 0)
                snprintf(err, errlen, "%s: %s", child, strerror(failed));
            rc = -1;
        }
    }
    closedir(d);
    return rc;
}

int remove_tree(const char *path, char *err, size_t errlen)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0 : (snprintf(err, errlen, "%s: %s", path, strerror(errno)), -1);
    if (!S_ISDIR(st.st_mode)) {
        if (unlink(path) == 0)
            return 0;
        snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return -1;
    }
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || empty_dir(fd, path, 1, err, errlen) != 0)
        return fd < 0 ? (snprintf(err, errlen, "%s: %s", path, strerror(errno)), -1) : -1;
    if (rmdir(path) == 0)
        return 0;
    snprintf(err, errlen, "%s: %s", path, strerror(errno));
    return -1;
}
