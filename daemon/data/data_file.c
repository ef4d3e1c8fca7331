#include "data_file.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/fsuid.h>
#include <sys/syscall.h>
#include <unistd.h>

static __thread file_creds thread_creds;
static __thread int thread_has_creds;

int file_creds_of(unsigned uid, unsigned gid, const char *name, file_creds *out, char *err,
                  size_t errlen)
{
    gid_t groups[DATA_MAX_GROUPS];
    int n = DATA_MAX_GROUPS;
    if (getgrouplist(name, (gid_t)gid, groups, &n) < 0) {
        snprintf(err, errlen, "user %s (uid %u) is in more than %d groups", name, uid,
                 DATA_MAX_GROUPS);
        return -1;
    }
    out->uid = uid;
    out->gid = gid;
    out->ngroups = n;
    for (int i = 0; i < n; i++)
        out->groups[i] = (unsigned)groups[i];
    return 0;
}

void data_files_as(const file_creds *c)
{
    thread_has_creds = c != NULL;
    if (c)
        thread_creds = *c;
}

/* The thread's file-system identity, to go back to. */
typedef struct fs_identity {
    uid_t uid;
    gid_t gid;
    int ngroups;
    gid_t groups[DATA_MAX_GROUPS];
} fs_identity;

/* setfsuid and setfsgid return the previous id whether or not they
 * changed it: an invalid id (-1) reads the current one back. */
static int set_identity(uid_t uid, gid_t gid, int ngroups, const gid_t *groups)
{
    if (syscall(SYS_setgroups, (size_t)ngroups, groups) != 0)
        return -1;
    setfsgid(gid);
    setfsuid(uid);
    return (uid_t)setfsuid((uid_t)-1) == uid && (gid_t)setfsgid((gid_t)-1) == gid ? 0 : -1;
}

/* Takes on the thread's job owner's identity, saving the thread's own in
 * *saved. 1 when switched, 0 when nothing is to switch (no owner set, or
 * the daemon runs as the owner already), -1 with why. */
static int enter(fs_identity *saved, const char *path, char *err, size_t errlen)
{
    if (!thread_has_creds)
        return 0;
    const file_creds *c = &thread_creds;
    if (geteuid() != 0 && c->uid == geteuid())
        return 0;
    saved->uid = (uid_t)setfsuid((uid_t)-1);
    saved->gid = (gid_t)setfsgid((gid_t)-1);
    saved->ngroups = getgroups(DATA_MAX_GROUPS, saved->groups);
    gid_t groups[DATA_MAX_GROUPS];
    for (int i = 0; i < c->ngroups; i++)
        groups[i] = (gid_t)c->groups[i];
    if (saved->ngroups < 0 || set_identity(c->uid, c->gid, c->ngroups, groups) != 0) {
        const int e = errno;
        if (saved->ngroups >= 0)
            set_identity(saved->uid, saved->gid, saved->ngroups, saved->groups);
        snprintf(err, errlen, "%s: cannot open with uid %u's rights (parled runs as uid %u): %s",
                 path, c->uid, (unsigned)geteuid(), strerror(e));
        return -1;
    }
    return 1;
}

/* Back to the thread's own identity. Failing that the thread would go on
 * with a user's rights: nothing sane is left to do. */
static void leave(const fs_identity *saved)
{
    if (set_identity(saved->uid, saved->gid, saved->ngroups, saved->groups) != 0) {
        fprintf(stderr, "parled: cannot restore a thread's file-system identity: %s\n",
                strerror(errno));
        abort();
    }
}

static const char *kind_of(mode_t mode)
{
    return S_ISDIR(mode) ? "a directory" : S_ISFIFO(mode) ? "a FIFO" : S_ISSOCK(mode) ? "a socket"
         : S_ISCHR(mode) ? "a character device" : S_ISBLK(mode) ? "a block device"
         : "not a regular file";
}

int data_open(const char *path, struct stat *st, char *err, size_t errlen)
{
    fs_identity saved;
    const int switched = enter(&saved, path, err, errlen);
    if (switched < 0)
        return -1;
    /* stat first, so that a device is never opened at all; fstat after, in
     * case the path changed in between. O_NONBLOCK: a FIFO opens at once. */
    int fd = -1, e = 0;
    if (stat(path, st) != 0)
        e = errno;
    else if (S_ISREG(st->st_mode) &&
             (fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)) < 0)
        e = errno;
    if (switched)
        leave(&saved);
    if (e) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(e));
        return -1;
    }
    if (fd >= 0 && fstat(fd, st) != 0) {
        snprintf(err, errlen, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (!S_ISREG(st->st_mode)) {
        snprintf(err, errlen, "%s: not a regular file (%s): data must be regular files", path,
                 kind_of(st->st_mode));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    const int flags = fcntl(fd, F_GETFL);
    if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

int data_exists(const char *path)
{
    char err[64];
    fs_identity saved;
    const int switched = enter(&saved, path, err, sizeof err);
    if (switched < 0)
        return 0;
    struct stat st;
    const int found = stat(path, &st) == 0;
    if (switched)
        leave(&saved);
    return found;
}
