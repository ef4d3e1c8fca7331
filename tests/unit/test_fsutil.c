/* Durable writes: replacement, injected failures, errors, mkdir_p. */
#include <dirent.h>
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "file_tree.h"
#include "fsutil.h"
#include "testutil.h"

static char dir[64];

static size_t read_file(const char *path, unsigned char *buf, size_t cap)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return (size_t)-1;
    size_t n = fread(buf, 1, cap, f);
    fclose(f);
    return n;
}

static int file_equals(const char *path, const unsigned char *want, size_t len)
{
    unsigned char *buf = malloc(len + 1);
    size_t n = read_file(path, buf, len + 1);
    int same = n == len && memcmp(buf, want, len) == 0;
    free(buf);
    return same;
}

/* Entries of the test dir; *temps counts leftover temporaries. */
static int count_entries(int *temps)
{
    DIR *d = opendir(dir);
    int n = 0;
    *temps = 0;
    for (struct dirent *e; d && (e = readdir(d));) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        n++;
        *temps += strstr(e->d_name, ".tmp-") != NULL;
    }
    if (d)
        closedir(d);
    return n;
}

static void random_bytes(unsigned char *buf, size_t n)
{
    for (size_t i = 0; i < n; i++)
        buf[i] = (unsigned char)test_uniform(0, 256);
}

static void test_replace_and_fault(void)
{
    char path[128], err[512];
    snprintf(path, sizeof path, "%s/state.json", dir);
    size_t old_len = 100 + (size_t)test_uniform(0, 1000), new_len = old_len + 1000;
    unsigned char *old = malloc(old_len), *fresh = malloc(new_len);
    random_bytes(old, old_len);
    random_bytes(fresh, new_len);

    CHECK(atomic_write_file(path, old, old_len, err, sizeof err) == 0, "%s", err);
    CHECK(file_equals(path, old, old_len), "first write reads back");

    /* A failure past N bytes keeps the old file and leaves no temporary. */
    char limit[32];
    snprintf(limit, sizeof limit, "%zu", new_len - 1);
    setenv("PARLE_FAULT_WRITE_AFTER", limit, 1);
    err[0] = '\0';
    CHECK(atomic_write_file(path, fresh, new_len, err, sizeof err) == -1, "injected failure");
    CHECK(strstr(err, "No space left") && strstr(err, path), "error names ENOSPC and path: %s",
          err);
    CHECK(file_equals(path, old, old_len), "old content kept after a failed replace");
    int temps, n = count_entries(&temps);
    CHECK(n == 1 && temps == 0, "%d entries, %d temporaries after a failed replace", n, temps);

    /* Exactly N bytes is still fine. */
    CHECK(atomic_write_file(path, fresh, new_len - 1, err, sizeof err) == 0, "%s", err);
    CHECK(file_equals(path, fresh, new_len - 1), "write of exactly N bytes under the fault limit");
    unsetenv("PARLE_FAULT_WRITE_AFTER");

    CHECK(atomic_write_file(path, fresh, new_len, err, sizeof err) == 0, "%s", err);
    CHECK(file_equals(path, fresh, new_len), "replacement reads back");

    /* Abort: nothing changes. */
    atomic_file af;
    CHECK(atomic_open(&af, path, err, sizeof err) == 0, "%s", err);
    fwrite(old, 1, old_len, af.f);
    atomic_abort(&af);
    CHECK(file_equals(path, fresh, new_len), "abort keeps the file");
    n = count_entries(&temps);
    CHECK(n == 1 && temps == 0, "%d entries, %d temporaries after abort", n, temps);

    /* Two writers at once get different temporaries; the last commit wins. */
    atomic_file a, b;
    CHECK(atomic_open(&a, path, err, sizeof err) == 0, "%s", err);
    CHECK(atomic_open(&b, path, err, sizeof err) == 0, "%s", err);
    CHECK(strcmp(a.tmp, b.tmp) != 0, "temporaries differ: %s", a.tmp);
    fwrite(old, 1, old_len, a.f);
    fwrite(fresh, 1, 10, b.f);
    CHECK(atomic_commit(&a, err, sizeof err) == 0, "%s", err);
    CHECK(atomic_commit(&b, err, sizeof err) == 0, "%s", err);
    CHECK(file_equals(path, fresh, 10), "last commit wins");
    n = count_entries(&temps);
    CHECK(n == 1 && temps == 0, "%d entries, %d temporaries after two commits", n, temps);
    CHECK(atomic_write_file(path, NULL, 0, err, sizeof err) == 0, "empty file: %s", err);
    CHECK(file_equals(path, (const unsigned char *)"", 0), "empty file reads back empty");
    free(old);
    free(fresh);
}

static void test_errors(void)
{
    char file[128], path[160], err[512];
    snprintf(file, sizeof file, "%s/plain", dir);
    CHECK(atomic_write_file(file, "x", 1, err, sizeof err) == 0, "%s", err);
    /* A regular file as the directory: unwritable even for root. */
    snprintf(path, sizeof path, "%s/out.json", file);
    err[0] = '\0';
    CHECK(atomic_write_file(path, "x", 1, err, sizeof err) == -1, "write under a regular file");
    CHECK(strstr(err, file) && strstr(err, "Not a directory"), "clear error: %s", err);
    err[0] = '\0';
    CHECK(atomic_write_file("/proc/parle-test-file", "x", 1, err, sizeof err) == -1,
          "write into /proc");
    CHECK(strstr(err, "/proc/parle-test-file") != NULL, "error names the path: %s", err);

    char long_path[1100];
    memset(long_path, 'a', sizeof long_path - 1);
    long_path[sizeof long_path - 1] = '\0';
    atomic_file af;
    CHECK(atomic_open(&af, long_path, err, sizeof err) == -1 && strstr(err, "too long"),
          "over-long path: %s", err);
    unlink(file);
}

static void test_mkdir_p(void)
{
    char path[256], err[512];
    struct stat st;
    snprintf(path, sizeof path, "%s/a/bb/ccc/", dir);
    CHECK(mkdir_p(path, err, sizeof err) == 0, "%s", err);
    CHECK(stat(path, &st) == 0 && S_ISDIR(st.st_mode), "nested directory made");
    CHECK((st.st_mode & 0777) == 0700, "mode %o", (unsigned)(st.st_mode & 0777));
    CHECK(mkdir_p(path, err, sizeof err) == 0, "again: %s", err);
    snprintf(path, sizeof path, "%s//a//x", dir);
    CHECK(mkdir_p(path, err, sizeof err) == 0, "repeated slashes: %s", err);
    snprintf(path, sizeof path, "%s/a/x", dir);
    CHECK(stat(path, &st) == 0 && S_ISDIR(st.st_mode), "a/x made");

    char file[128];
    snprintf(file, sizeof file, "%s/a/file", dir);
    CHECK(atomic_write_file(file, "x", 1, err, sizeof err) == 0, "%s", err);
    err[0] = '\0';
    CHECK(mkdir_p(file, err, sizeof err) == -1 && strstr(err, "not a directory") &&
          strstr(err, file), "a file in the way: %s", err);
    snprintf(path, sizeof path, "%s/sub/dir", file);
    err[0] = '\0';
    CHECK(mkdir_p(path, err, sizeof err) == -1 && strstr(err, file), "under a file: %s", err);
}

/* A tree with files, nested directories and links out of it: its disk use
 * counts what is in it, and its removal takes the links, not their targets. */
static void test_tree(void)
{
    char tree[256], path[512], outside[256], err[512];
    snprintf(tree, sizeof tree, "%s/tree", dir);
    snprintf(outside, sizeof outside, "%s/outside", dir);
    snprintf(path, sizeof path, "%s/k1/k2/k3", tree);
    CHECK(mkdir_p(path, err, sizeof err) == 0 && mkdir_p(outside, err, sizeof err) == 0, "%s", err);
    char data[20000];
    memset(data, 7, sizeof data);
    const char *files[] = {"a", "k1/b", "k1/k2/c", "k1/k2/k3/d"};
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", tree, files[i]);
        CHECK(atomic_write_file(path, data, sizeof data, err, sizeof err) == 0, "%s", err);
    }
    char target[600];
    snprintf(target, sizeof target, "%s/keep", outside);
    CHECK(atomic_write_file(target, data, sizeof data, err, sizeof err) == 0, "%s", err);
    snprintf(path, sizeof path, "%s/k1/link-file", tree);
    CHECK(symlink(target, path) == 0, "symlink to a file");
    snprintf(path, sizeof path, "%s/k1/k2/link-dir", tree);
    CHECK(symlink(outside, path) == 0, "symlink to a directory");
    const uint64_t bytes = tree_disk_bytes(tree), out = tree_disk_bytes(outside);
    CHECK(bytes >= 4 * sizeof data && bytes < 4 * sizeof data + out + (64u << 10),
          "disk use %llu: the four files, not the linked directory's %llu",
          (unsigned long long)bytes, (unsigned long long)out);
    CHECK(tree_disk_bytes("/nonexistent/parle") == 0, "a missing tree uses nothing");
    CHECK(remove_tree(tree, err, sizeof err) == 0, "remove: %s", err);
    struct stat st;
    CHECK(lstat(tree, &st) != 0, "the tree is gone");
    CHECK(stat(target, &st) == 0 && st.st_size == sizeof data, "the linked file stays");
    CHECK(stat(outside, &st) == 0, "the linked directory stays");
    CHECK(remove_tree(tree, err, sizeof err) == 0, "a missing tree: nothing to do");
    /* What cannot be removed is named (a directory without write permission,
     * unless we are root, whom it does not stop). */
    snprintf(path, sizeof path, "%s/locked/inner", tree);
    CHECK(mkdir_p(path, err, sizeof err) == 0, "%s", err);
    snprintf(path, sizeof path, "%s/locked", tree);
    chmod(path, 0500);
    err[0] = '\0';
    const int rc = remove_tree(tree, err, sizeof err);
    if (geteuid() != 0)
        CHECK(rc == -1 && strstr(err, "locked/inner"), "a locked directory is named: %s", err);
    else
        CHECK(rc == 0, "root removes it: %s", err);
    chmod(path, 0700);
    CHECK(remove_tree(tree, err, sizeof err) == 0, "unlocked, removed: %s", err);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

int main(void)
{
    test_init("fsutil");
    snprintf(dir, sizeof dir, "/tmp/parle-fsutil-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_replace_and_fault();
    test_errors();
    test_mkdir_p();
    test_tree();
    nftw(dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
    return test_main_end();
}
