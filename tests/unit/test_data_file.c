/* Opening a job's data with its owner's rights (daemon/data/data_file.c):
 * as root, files only root may read are refused to a job of uid 65534 with
 * "Permission denied", also through a symlink the user owns, group rights
 * count, a FIFO is refused at once (no open waits for a writer), and
 * another thread of the process keeps root's rights all the while (run
 * under ThreadSanitizer too); no /proc magic link is followed and no file
 * of a virtual file system (/proc/self/maps, a /sys file) is opened, with
 * an error that quotes none of its bytes. Skips (77) unless run as root. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data_file.h"
#include "testutil.h"

enum { NOBODY = 65534, GROUP = 4242, ROUNDS = 2000 };

static char dir[256];

static void path_of(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s/%s", dir, name);
}

static void make_file(const char *name, mode_t mode, gid_t gid)
{
    char p[512];
    path_of(p, sizeof p, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0 && write(fd, "data", 4) == 4 && fchown(fd, 0, gid) == 0 &&
              fchmod(fd, mode) == 0 && close(fd) == 0,
          "make %s: %s", p, strerror(errno));
}

static int opens(const char *name, char *err, size_t errlen)
{
    char p[512];
    struct stat st;
    path_of(p, sizeof p, name);
    int fd = data_open(p, &st, err, errlen);
    if (fd >= 0)
        close(fd);
    return fd >= 0;
}

static const file_creds nobody = {.uid = NOBODY, .gid = NOBODY, .ngroups = 0};
static const file_creds nobody_in_group = {.uid = NOBODY, .gid = NOBODY, .ngroups = 1,
                                           .groups = {GROUP}};

/* Root's thread, meanwhile: every open of the root-only file succeeds. */
static void *root_thread(void *arg)
{
    int *failures = arg;
    char err[512];
    for (int i = 0; i < ROUNDS; i++)
        *failures += !opens("secret", err, sizeof err);
    return NULL;
}

static void *user_thread(void *arg)
{
    int *wrong = arg;
    char err[512];
    data_files_as(&nobody);
    for (int i = 0; i < ROUNDS; i++)
        *wrong += opens("secret", err, sizeof err) || !opens("public", err, sizeof err);
    data_files_as(NULL);
    return NULL;
}

static void test_rights(void)
{
    char err[512], p[512];
    data_files_as(&nobody);
    CHECK(!opens("secret", err, sizeof err) && strstr(err, "/secret: cannot open: Permission denied"),
          "root-only file: %s", err);
    CHECK(!opens("link", err, sizeof err) && strstr(err, "Permission denied"),
          "symlink to the root-only file: %s", err);
    CHECK(!opens("private/file", err, sizeof err) && strstr(err, "Permission denied"),
          "file in a 0700 directory: %s", err);
    path_of(p, sizeof p, "private/file");
    CHECK(!data_exists(p), "a 0700 directory's file exists for the user");
    CHECK(opens("public", err, sizeof err), "world-readable file: %s", err);
    CHECK(!opens("group", err, sizeof err) && strstr(err, "Permission denied"),
          "group file outside the group: %s", err);
    data_files_as(&nobody_in_group);
    CHECK(opens("group", err, sizeof err), "group file, in the group: %s", err);
    data_files_as(NULL);
    CHECK(opens("secret", err, sizeof err) && data_exists(p), "root's rights back: %s", err);
    /* This thread's identity is root's again, outside data_open too. */
    path_of(p, sizeof p, "secret");
    int fd = open(p, O_RDONLY);
    CHECK(fd >= 0, "plain open after the user's opens: %s", strerror(errno));
    if (fd >= 0)
        close(fd);
}

static void test_not_regular(void)
{
    char err[512];
    data_files_as(&nobody);
    CHECK(!opens("fifo", err, sizeof err) && strstr(err, "not a regular file (a FIFO)"),
          "FIFO: %s", err);
    CHECK(!opens(".", err, sizeof err) && strstr(err, "not a regular file (a directory)"),
          "directory: %s", err);
    data_files_as(NULL);
    CHECK(!opens("fifo", err, sizeof err) && strstr(err, "(a FIFO)"), "FIFO as root: %s", err);
    struct stat st;
    CHECK(data_open("/dev/null", &st, err, sizeof err) < 0 &&
              strstr(err, "not a regular file (a character device)"),
          "device: %s", err);
    CHECK(data_open("/nonexistent/x", &st, err, sizeof err) < 0 &&
              strstr(err, "/nonexistent/x: cannot open: No such file or directory"),
          "missing: %s", err);
}

/* `target` through a symlink named `name` in the test's folder: refused
 * with `want` in the error, which names the link and quotes nothing read. */
static void refused_via_link(const char *name, const char *target, const char *want)
{
    char p[512], err[512];
    path_of(p, sizeof p, name);
    CHECK(symlink(target, p) == 0, "symlink %s -> %s: %s", p, target, strerror(errno));
    for (int as_user = 0; as_user < 2; as_user++) {
        data_files_as(as_user ? &nobody : NULL);
        CHECK(!opens(name, err, sizeof err) && strstr(err, p) && strstr(err, want) &&
                  !strstr(err, "bytes") && !strstr(err, "0x"),
              "%s -> %s (%s): %s", name, target, as_user ? "as the user" : "as root", err);
    }
    data_files_as(NULL);
    CHECK(unlink(p) == 0, "unlink %s", p);
}

/* Files that are parled's own view of itself or of the kernel: never read. */
static void test_virtual_files(void)
{
    char err[512], fd_path[64], p[512];
    struct stat st;
    refused_via_link("maps", "/proc/self/maps", "on a virtual file system (proc)");
    refused_via_link("status", "/proc/self/status", "on a virtual file system (proc)");
    /* A descriptor of this process on a regular file the user could not
     * open by its path: the magic link is never followed. */
    path_of(p, sizeof p, "secret");
    int held = open(p, O_RDONLY);
    CHECK(held >= 0, "open %s", p);
    snprintf(fd_path, sizeof fd_path, "/proc/self/fd/%d", held);
    refused_via_link("fd", fd_path, "/proc");
    CHECK(data_open(fd_path, &st, err, sizeof err) < 0 && strstr(err, "link of /proc"),
          "%s as root: %s", fd_path, err);
    close(held);
    refused_via_link("sys", "/sys/kernel/uevent_seqnum", "on a virtual file system (sysfs)");
    CHECK(data_open("/sys/kernel/uevent_seqnum", &st, err, sizeof err) < 0 &&
              strstr(err, "/sys/kernel/uevent_seqnum: on a virtual file system (sysfs)"),
          "a /sys file by its path: %s", err);
    CHECK(data_open("/proc/meminfo", &st, err, sizeof err) < 0 &&
              strstr(err, "/proc/meminfo: on a virtual file system (proc)"),
          "/proc/meminfo by its path: %s", err);
    /* A regular file through an ordinary symlink still opens, as the user. */
    path_of(p, sizeof p, "public");
    char link[512];
    path_of(link, sizeof link, "plain");
    CHECK(symlink(p, link) == 0, "symlink %s", link);
    data_files_as(&nobody);
    CHECK(opens("plain", err, sizeof err), "a symlink to a regular file: %s", err);
    data_files_as(NULL);
    CHECK(unlink(link) == 0, "unlink %s", link);
}

static void test_threads(void)
{
    int failures = 0, wrong = 0;
    pthread_t a, b;
    CHECK(pthread_create(&a, NULL, root_thread, &failures) == 0 &&
              pthread_create(&b, NULL, user_thread, &wrong) == 0,
          "threads");
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    CHECK(failures == 0, "root's thread failed %d of %d opens while the other was a user", failures,
          ROUNDS);
    CHECK(wrong == 0, "the user's thread saw root's rights %d times", wrong);
}

int main(void)
{
    if (geteuid() != 0) {
        printf("SKIP: needs root (to open files as another user)\n");
        return 77;
    }
    test_init("data_file");
    snprintf(dir, sizeof dir, "%s/parle-data-file.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    CHECK(mkdtemp(dir) != NULL && chmod(dir, 0755) == 0, "mkdtemp: %s", strerror(errno));
    char p[512], q[512];
    make_file("secret", 0600, 0);
    make_file("public", 0644, 0);
    make_file("group", 0640, GROUP);
    path_of(p, sizeof p, "private");
    CHECK(mkdir(p, 0700) == 0, "mkdir %s", p);
    make_file("private/file", 0644, 0);
    path_of(p, sizeof p, "fifo");
    CHECK(mkfifo(p, 0666) == 0, "mkfifo");
    path_of(p, sizeof p, "link");
    path_of(q, sizeof q, "secret");
    CHECK(symlink(q, p) == 0 && lchown(p, NOBODY, NOBODY) == 0, "symlink");

    test_rights();
    test_not_regular();
    test_virtual_files();
    test_threads();

    const char *names[] = {"secret", "public", "group", "private/file", "private", "fifo", "link"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        path_of(p, sizeof p, names[i]);
        CHECK(remove(p) == 0, "remove %s", p);
    }
    rmdir(dir);
    return test_main_end();
}
