/* CIFAR binary files: fixed-size records, label byte(s) then 3072 pixel bytes,
 * no header. A file's record count is its size over the record size. */
#include "cifar.h"
#include "data_file.h"
#include "admit.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CIFAR_C 3
#define CIFAR_SIDE 32
#define CIFAR_PIXELS (CIFAR_C * CIFAR_SIDE * CIFAR_SIDE)
#define CIFAR100_COARSE 20
#define CIFAR_MAX_FILES 5
#define CIFAR_CHUNK 1024 /* records read at a time (3 MB: a stop is seen between) */

typedef struct cifar_format {
    int classes;
    int label_bytes;        /* the last one is the class */
    const char *subdir;     /* as the archive unpacks */
    const char *train[CIFAR_MAX_FILES];
    int ntrain;
    const char *test;
} cifar_format;

static const cifar_format cifar10 = {
    10, 1, "cifar-10-batches-bin",
    {"data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin", "data_batch_4.bin",
     "data_batch_5.bin"},
    5, "test_batch.bin"};
static const cifar_format cifar100 = {100, 2, "cifar-100-binary", {"train.bin"}, 1, "test.bin"};

/* dir/name into buf; -1 with why if it does not fit. */
static int join_path(char *buf, size_t len, const char *dir, const char *name, char *err,
                     size_t errlen)
{
    int k = snprintf(buf, len, "%s/%s", dir, name);
    if (k < 0 || (size_t)k >= len) {
        snprintf(err, errlen, "%s: path too long", dir);
        return -1;
    }
    return 0;
}

/* Opens `path` and counts its records, or -1 with why. */
static FILE *open_records(const char *path, size_t record, long *count, char *err, size_t errlen)
{
    struct stat st;
    int fd = data_open(path, &st, err, errlen);
    if (fd < 0)
        return NULL;
    if (st.st_size == 0 || (size_t)st.st_size % record != 0) {
        snprintf(err, errlen, "%s: truncated: %lld bytes is not a whole number of %zu-byte records",
                 path, (long long)st.st_size, record);
        close(fd);
        return NULL;
    }
    FILE *fp = fdopen(fd, "rb");
    if (!fp) {
        snprintf(err, errlen, "%s: cannot open: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    *count = (long)((size_t)st.st_size / record);
    return fp;
}

/* Reads the first `n` records of `fp` (opened from `path`) into
 * images/labels from example `first` on. */
static int read_records(dataset *out, int first, int n, FILE *fp, const char *path,
                        const cifar_format *f, unsigned char *buf, const volatile int *stop,
                        char *err, size_t errlen)
{
    size_t record = (size_t)f->label_bytes + CIFAR_PIXELS;
    int rc = -1;
    for (int done = 0; done < n;) {
        if (data_check_stop(stop, err, errlen) != 0)
            goto done;
        int chunk = n - done < CIFAR_CHUNK ? n - done : CIFAR_CHUNK;
        size_t got = fread(buf, record, (size_t)chunk, fp);
        if (got < (size_t)chunk) {
            if (ferror(fp))
                snprintf(err, errlen, "%s: cannot read: %s", path, strerror(errno));
            else
                snprintf(err, errlen, "%s: truncated: ends at record %zu", path, (size_t)done + got);
            goto done;
        }
        for (int r = 0; r < chunk; r++) {
            const unsigned char *rec = buf + (size_t)r * record;
            unsigned label = rec[f->label_bytes - 1];
            if (f->label_bytes == 2 && rec[0] >= CIFAR100_COARSE) {
                snprintf(err, errlen, "%s: coarse label %u of record %d out of range [0, %d)", path,
                         rec[0], done + r, CIFAR100_COARSE);
                goto done;
            }
            if (label >= (unsigned)f->classes) {
                snprintf(err, errlen, "%s: label %u of record %d out of range [0, %d)", path, label,
                         done + r, f->classes);
                goto done;
            }
            size_t ex = (size_t)first + (size_t)done + (size_t)r;
            out->labels[ex] = (int32_t)label;
            float *img = out->images + ex * CIFAR_PIXELS;
            for (int i = 0; i < CIFAR_PIXELS; i++)
                img[i] = (float)rec[f->label_bytes + i] * (1.0f / 255.0f);
        }
        done += chunk;
    }
    rc = 0;
done:
    return rc;
}

/* One set's files under a folder, opened and counted: what a load will
 * take is known before anything is allocated. */
typedef struct cifar_set {
    char paths[CIFAR_MAX_FILES][4096];
    FILE *files[CIFAR_MAX_FILES];
    long counts[CIFAR_MAX_FILES], total;
    int nfiles, n; /* n: examples to load, within the limit */
} cifar_set;

static void close_set(cifar_set *s)
{
    for (int i = 0; i < s->nfiles; i++)
        if (s->files[i])
            fclose(s->files[i]);
    s->nfiles = 0;
}

/* The set of `nfiles` files under dir, in order; every file is opened and
 * checked for size before anything is read. */
static int open_set(cifar_set *s, const char *dir, const char *const *names, int nfiles,
                    const cifar_format *f, int limit, char *err, size_t errlen)
{
    size_t record = (size_t)f->label_bytes + CIFAR_PIXELS;
    memset(s, 0, sizeof *s);
    for (int i = 0; i < nfiles; i++, s->nfiles++) {
        if (join_path(s->paths[i], sizeof s->paths[i], dir, names[i], err, errlen) != 0 ||
            !(s->files[i] = open_records(s->paths[i], record, &s->counts[i], err, errlen)))
            return -1;
        s->total += s->counts[i];
    }
    if (s->total > INT_MAX) {
        snprintf(err, errlen, "%s: %ld records in all, more than supported", s->paths[0], s->total);
        return -1;
    }
    s->n = limit > 0 && limit < s->total ? limit : (int)s->total;
    return 0;
}

/* The claim of the two sets for data_admit, named by the larger set's
 * largest file. */
static int admit_sets(const cifar_set *train, const cifar_set *test, const cifar_format *f,
                      char *err, size_t errlen)
{
    const cifar_set *larger = test->total > train->total ? test : train;
    int largest = 0;
    for (int i = 1; i < larger->nfiles; i++)
        largest = larger->counts[i] > larger->counts[largest] ? i : largest;
    data_claim c = {.ntrain = train->n, .ntest = test->n, .c = CIFAR_C, .h = CIFAR_SIDE,
                    .w = CIFAR_SIDE, .classes = f->classes, .claimed = larger->total};
    snprintf(c.source, sizeof c.source, "%s's size%s", larger->paths[largest],
             larger->nfiles > 1 ? " (with its set's other files)" : "");
    return data_admit(&c, err, errlen);
}

/* An opened set's examples into out (freed on failure). */
static int read_set(dataset *out, const cifar_set *s, const cifar_format *f,
                    const volatile int *stop, char *err, size_t errlen)
{
    size_t record = (size_t)f->label_bytes + CIFAR_PIXELS;
    *out = (dataset){.n = s->n, .c = CIFAR_C, .h = CIFAR_SIDE, .w = CIFAR_SIDE,
                     .classes = f->classes};
    out->images = malloc((size_t)s->n * CIFAR_PIXELS * sizeof(float));
    out->labels = malloc((size_t)s->n * sizeof(int32_t));
    unsigned char *buf = malloc(CIFAR_CHUNK * record);
    int rc = -1;
    if (!out->images || !out->labels || !buf) {
        snprintf(err, errlen, "%s: out of memory for %d images", s->paths[0], s->n);
        goto done;
    }
    for (int i = 0, first = 0; i < s->nfiles && first < s->n; i++) {
        int take = s->counts[i] < s->n - first ? (int)s->counts[i] : s->n - first;
        if (read_records(out, first, take, s->files[i], s->paths[i], f, buf, stop, err, errlen) != 0)
            goto done;
        first += take;
    }
    rc = 0;
done:
    free(buf);
    if (rc != 0)
        dataset_free(out);
    return rc;
}

int cifar_load_split(dataset *train, dataset *test, const char *root, int classes, int train_limit,
                     int test_limit, const volatile int *stop, char *err, size_t errlen)
{
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
    if (classes != 10 && classes != 100) {
        snprintf(err, errlen, "%s: CIFAR has 10 or 100 classes, not %d", root, classes);
        return -1;
    }
    const cifar_format *f = classes == 10 ? &cifar10 : &cifar100;
    /* The files directly under root, or where the archive unpacks them. */
    char dir[4096], probe[4096];
    snprintf(dir, sizeof dir, "%s", root);
    if (join_path(probe, sizeof probe, root, f->train[0], err, errlen) != 0)
        return -1;
    if (!data_exists(probe)) {
        if (join_path(dir, sizeof dir, root, f->subdir, err, errlen) != 0 ||
            join_path(probe, sizeof probe, dir, f->train[0], err, errlen) != 0)
            return -1;
        if (!data_exists(probe)) {
            snprintf(err, errlen, "%s/%s: not found (nor under %s/)", root, f->train[0], dir);
            return -1;
        }
    }
    /* Every file opened and counted first: nothing is allocated before the
     * claim is admitted. */
    cifar_set sets[2];
    sets[0].nfiles = sets[1].nfiles = 0;
    int rc = open_set(&sets[0], dir, f->train, f->ntrain, f, train_limit, err, errlen) == 0 &&
                     open_set(&sets[1], dir, &f->test, 1, f, test_limit, err, errlen) == 0 &&
                     admit_sets(&sets[0], &sets[1], f, err, errlen) == 0 &&
                     read_set(train, &sets[0], f, stop, err, errlen) == 0
                 ? 0
                 : -1;
    if (rc == 0 && read_set(test, &sets[1], f, stop, err, errlen) != 0) {
        dataset_free(train);
        rc = -1;
    }
    close_set(&sets[0]);
    close_set(&sets[1]);
    return rc;
}
