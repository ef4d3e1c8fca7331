#include "data_file.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <sys/fsuid.h>
#include <sys/statfs.h>
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

/* The kernel's file systems whose files are views of processes, devices or
 * kernel state rather than data a user wrote: a job never reads them (one
 * of parled's own, /proc/self/maps, would show parled to the user). tmpfs
 * and devtmpfs share a magic: devtmpfs holds devices, refused as such. */
static const struct { unsigned long magic; const char *name; } virtual_fs[] = {
    {PROC_SUPER_MAGIC, "proc"},        {SYSFS_MAGIC, "sysfs"},
    {DEVPTS_SUPER_MAGIC, "devpts"},    {DEBUGFS_MAGIC, "debugfs"},
    {TRACEFS_MAGIC, "tracefs"},        {SECURITYFS_MAGIC, "securityfs"},
    {SELINUX_MAGIC, "selinuxfs"},      {SMACK_MAGIC, "smackfs"},
    {AAFS_MAGIC, "apparmorfs"},        {CGROUP_SUPER_MAGIC, "cgroup"},
    {CGROUP2_SUPER_MAGIC, "cgroup2"},  {RDTGROUP_SUPER_MAGIC, "resctrl"},
    {PSTOREFS_MAGIC, "pstore"},        {EFIVARFS_MAGIC, "efivarfs"},
    {BPF_FS_MAGIC, "bpf"},             {BINFMTFS_MAGIC, "binfmt_misc"},
    {NSFS_MAGIC, "nsfs"},              {PIPEFS_MAGIC, "pipefs"},
    {SOCKFS_MAGIC, "sockfs"},          {ANON_INODE_FS_MAGIC, "anon_inodefs"},
    {BINDERFS_SUPER_MAGIC, "binderfs"}, {OPENPROM_SUPER_MAGIC, "openpromfs"},
    {USBDEVICE_SUPER_MAGIC, "usbdevfs"}, {0x62656570, "configfs"},
    {0x65735543, "fusectl"},           {0x19800202, "mqueue"},
};

/* The name of the virtual file system holding fd, or NULL for any other
 * (or when fstatfs cannot tell, as the open itself succeeded). */
static const char *virtual_fs_of(int fd)
{
    struct statfs sfs;
    if (fstatfs(fd, &sfs) != 0)
        return NULL;
    for (size_t i = 0; i < sizeof virtual_fs / sizeof *virtual_fs; i++)
        if ((unsigned long)sfs.f_type == virtual_fs[i].magic)
            return virtual_fs[i].name;
    return NULL;
}

/* open(path) that never follows a /proc magic link (/proc/PID/fd/N, exe,
 * cwd, root: they reach files by what a process holds, not by the path's
 * rights). A kernel before openat2 (Linux 5.6) opens as open(2) does, as
 * under a seccomp filter older than openat2 (which answers EPERM); the
 * file-system check after the open still refuses /proc itself. */
static int open_no_magic_links(const char *path, int flags)
{
    struct open_how how = {.flags = (unsigned long long)flags,
                           .resolve = RESOLVE_NO_MAGICLINKS};
    long fd = syscall(SYS_openat2, AT_FDCWD, path, &how, sizeof how);
    if (fd < 0 && (errno == ENOSYS || errno == EPERM))
        return open(path, flags);
    return (int)fd;
}

/* strerror, saying for ELOOP that a magic link may be its cause. */
static const char *open_reason(int e)
{
    return e == ELOOP ? "too many levels of symbolic links, or a link of /proc (such as "
                        "/proc/self/fd/N), which data paths may not pass through"
                      : strerror(e);
}

/* As the owner: looks path up (O_PATH opens nothing: no device, no FIFO),
 * then opens it for reading only if it is a regular file on a disk file
 * system. *fd is -1 when it was not opened; errno's value, or 0. */
static int look_up_and_open(const char *path, struct stat *st, const char **fs, int *fd)
{
    *fd = -1;
    int found = open_no_magic_links(path, O_PATH | O_CLOEXEC);
    if (found < 0)
        return errno;
    int e = fstat(found, st) != 0 ? errno : 0;
    *fs = e ? NULL : virtual_fs_of(found);
    if (!e && !*fs && S_ISREG(st->st_mode) &&
        (*fd = open_no_magic_links(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)) < 0)
        e = errno;
    close(found);
    return e;
}

int data_open(const char *path, struct stat *st, char *err, size_t errlen)
{
    fs_identity saved;
    const int switched = enter(&saved, path, err, errlen);
    if (switched < 0)
        return -1;
    const char *fs = NULL;
    int fd;
    const int e = look_up_and_open(path, st, &fs, &fd);
    if (switched)
        leave(&saved);
    if (e) {
        snprintf(err, errlen, "%s: cannot open: %s", path, open_reason(e));
        return -1;
    }
    /* Looked at again on what was opened, in case the path changed between. */
    if (fd >= 0 && fstat(fd, st) != 0) {
        snprintf(err, errlen, "%s: cannot stat: %s", path, strerror(errno));
        close(fd);
        return -1;
    }
    if (fd >= 0)
        fs = virtual_fs_of(fd);
    if (fs)
        snprintf(err, errlen, "%s: on a virtual file system (%s): data must be files on disk",
                 path, fs);
    else if (!S_ISREG(st->st_mode))
        snprintf(err, errlen, "%s: not a regular file (%s): data must be regular files", path,
                 kind_of(st->st_mode));
    if (fs || !S_ISREG(st->st_mode)) {
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
