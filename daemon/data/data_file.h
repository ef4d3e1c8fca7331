/* Opening the files a job reads (its data.root and everything under it)
 * with the rights of the user who submitted it, never the daemon's.
 *
 * parled runs as root for a group of users. A job's thread calls
 * data_files_as() with its owner's credentials before loading; every
 * data_open() and data_exists() on that thread then switches the thread's
 * file-system identity (setfsuid, setfsgid and the raw setgroups system
 * call, all per thread in Linux; glibc's setgroups() would change every
 * thread) to the owner for the path lookup and the open alone, and back.
 * The kernel checks permissions at open, so the descriptor is then read
 * with no further checks. Other threads of the daemon keep root's rights
 * throughout. Only regular files on disk are opened: a FIFO, socket,
 * device or directory is refused, found by fstat of an O_PATH descriptor
 * and again after a non-blocking open, so no open ever waits for a writer;
 * a lookup never follows a /proc magic link (openat2's
 * RESOLVE_NO_MAGICLINKS: /proc/self/fd/N would hand the job a file parled
 * holds), and a file of a virtual file system (proc, sysfs, debugfs,
 * cgroup...; fstatfs) is refused, its content and size never read. */
#ifndef PARLE_DATA_FILE_H
#define PARLE_DATA_FILE_H

#include <stddef.h>
#include <sys/stat.h>

#define DATA_MAX_GROUPS 256

typedef struct file_creds {
    unsigned uid, gid;
    int ngroups;                      /* supplementary groups */
    unsigned groups[DATA_MAX_GROUPS];
} file_creds;

/* The credentials of user `name` (uid, primary gid, the groups the group
 * database gives it now). 0, or -1 with why. */
int file_creds_of(unsigned uid, unsigned gid, const char *name, file_creds *out, char *err,
                  size_t errlen);

/* For the calling thread: open data files as `c` (copied), or with the
 * process's own rights when c is NULL. */
void data_files_as(const file_creds *c);

/* Opens a regular file for reading; the descriptor, in blocking mode, with
 * its stat in *st; or -1 with "PATH: cannot open: REASON", "PATH: not a
 * regular file (a FIFO)", "PATH: on a virtual file system (proc)" and the
 * like, which never quote the file's bytes or size. */
int data_open(const char *path, struct stat *st, char *err, size_t errlen);

/* Whether path exists for the thread's user (stat succeeds). */
int data_exists(const char *path);

#endif
