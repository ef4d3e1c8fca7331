/* IDX loading: valid files (gzip and raw), every malformed case, the split
 * loader, the claim its headers make before anything is allocated, and the
 * real Fashion-MNIST when it is installed. */
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "dataset.h"
#include "load.h"
#include "testutil.h"

#define FMNIST_ROOT "/usr/share/datasets/fashion-mnist"

static char dir[64];

typedef struct idx_spec {
    uint32_t magic;
    int ndims;
    uint32_t dims[3];
    const unsigned char *data;
    size_t data_len;
    size_t header_len; /* bytes of the header written: < 4 + 4 ndims truncates it */
} idx_spec;

static void put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24);
    p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* Writes in/name (with ".gz" and gzip when gz) and its path into path. */
static void write_idx(char *path, size_t len, const char *in, const char *name, int gz,
                      const idx_spec *s)
{
    unsigned char hdr[16];
    put_be32(hdr, s->magic);
    for (int i = 0; i < s->ndims; i++)
        put_be32(hdr + 4 + 4 * i, s->dims[i]);
    size_t hlen = s->header_len ? s->header_len : 4 + 4 * (size_t)s->ndims;
    snprintf(path, len, "%s/%s%s", in, name, gz ? ".gz" : "");
    if (gz) {
        gzFile f = gzopen(path, "wb");
        gzwrite(f, hdr, (unsigned)hlen);
        if (s->data_len)
            gzwrite(f, s->data, (unsigned)s->data_len);
        gzclose(f);
    } else {
        FILE *f = fopen(path, "wb");
        fwrite(hdr, 1, hlen, f);
        fwrite(s->data, 1, s->data_len, f);
        fclose(f);
    }
}

typedef struct idx_pair {
    int n, rows, cols;
    unsigned char *pixels, *labels;
} idx_pair;

/* Random pixels and labels for p's n, rows and cols. */
static void fill_pair(idx_pair *p)
{
    size_t np = (size_t)p->n * p->rows * p->cols;
    p->pixels = malloc(np);
    p->labels = malloc((size_t)p->n);
    for (size_t i = 0; i < np; i++)
        p->pixels[i] = (unsigned char)test_uniform(0, 256);
    for (int i = 0; i < p->n; i++)
        p->labels[i] = (unsigned char)test_uniform(0, 10);
}

static void make_pair(idx_pair *p)
{
    p->n = 20 + (int)test_uniform(0, 40);
    p->rows = 3 + (int)test_uniform(0, 6);
    p->cols = 3 + (int)test_uniform(0, 6);
    fill_pair(p);
}

static idx_spec images_spec(const idx_pair *p)
{
    idx_spec s = {0x803, 3, {(uint32_t)p->n, (uint32_t)p->rows, (uint32_t)p->cols}, p->pixels,
                  (size_t)p->n * p->rows * p->cols, 0};
    return s;
}

static idx_spec labels_spec(const idx_pair *p)
{
    idx_spec s = {0x801, 1, {(uint32_t)p->n, 0, 0}, p->labels, (size_t)p->n, 0};
    return s;
}

/* The loaded set holds the first n examples of p, pixels as byte / 255. */
static void check_matches(const dataset *d, const idx_pair *p, int n, const char *what)
{
    CHECK(d->n == n && d->c == 1 && d->h == p->rows && d->w == p->cols && d->classes == 10,
          "%s: shape n=%d c=%d h=%d w=%d classes=%d", what, d->n, d->c, d->h, d->w, d->classes);
    if (d->n != n || d->h != p->rows || d->w != p->cols)
        return;
    size_t np = (size_t)n * p->rows * p->cols;
    size_t bad = 0;
    for (size_t i = 0; i < np; i++)
        bad += fabs((double)d->images[i] - p->pixels[i] / 255.0) > 1e-7;
    CHECK(bad == 0, "%s: %zu pixels differ from byte / 255", what, bad);
    int bad_labels = 0;
    for (int i = 0; i < n; i++)
        bad_labels += d->labels[i] != p->labels[i];
    CHECK(bad_labels == 0, "%s: %d labels differ", what, bad_labels);
}

/* idx_load must fail with an error naming `file` and containing `want`. */
static void expect_error(const char *images, const char *labels, const char *file,
                         const char *want, const char *what)
{
    dataset d;
    char err[512] = "";
    int rc = idx_load(&d, images, labels, 0, NULL, err, sizeof err);
    CHECK(rc == -1, "%s: load should fail", what);
    CHECK(strstr(err, file) && strstr(err, want), "%s: error '%s' should name %s and say '%s'",
          what, err, file, want);
    CHECK(d.images == NULL && d.labels == NULL && d.n == 0, "%s: nothing left allocated", what);
}

static void test_valid(int gz)
{
    idx_pair p;
    make_pair(&p);
    char images[128], labels[128], err[512];
    idx_spec si = images_spec(&p), sl = labels_spec(&p);
    write_idx(images, sizeof images, dir, "ok-images", gz, &si);
    write_idx(labels, sizeof labels, dir, "ok-labels", gz, &sl);
    dataset d;
    CHECK(idx_load(&d, images, labels, 0, NULL, err, sizeof err) == 0, "%s", err);
    check_matches(&d, &p, p.n, gz ? "gzip" : "raw");
    dataset_free(&d);
    CHECK(d.images == NULL && d.labels == NULL && d.n == 0, "dataset_free clears");

    int limit = 1 + (int)test_uniform(0, p.n - 1);
    CHECK(idx_load(&d, images, labels, limit, NULL, err, sizeof err) == 0, "%s", err);
    check_matches(&d, &p, limit, "limit");
    dataset_free(&d);
    CHECK(idx_load(&d, images, labels, p.n + 5, NULL, err, sizeof err) == 0, "%s", err);
    check_matches(&d, &p, p.n, "limit beyond n");
    dataset_free(&d);
    volatile int stop = 1; /* a job's cancel or shutdown */
    CHECK(idx_load(&d, images, labels, 0, &stop, err, sizeof err) == -1 &&
              strcmp(err, DATA_STOPPED) == 0 && !d.images && !d.labels,
          "a stopped load: %s", err);
    free(p.pixels);
    free(p.labels);
}

static void test_malformed(int gz)
{
    idx_pair p;
    make_pair(&p);
    char images[128], labels[128], bad[128], missing[128];
    idx_spec si = images_spec(&p), sl = labels_spec(&p);
    write_idx(images, sizeof images, dir, "images", gz, &si);
    write_idx(labels, sizeof labels, dir, "labels", gz, &sl);

    snprintf(missing, sizeof missing, "%s/no-such-file", dir);
    expect_error(missing, labels, missing, "No such file", "missing images");
    expect_error(images, missing, missing, "No such file", "missing labels");

    idx_spec s = si;
    s.header_len = 10;
    s.data_len = 0;
    write_idx(bad, sizeof bad, dir, "short-header", gz, &s);
    expect_error(bad, labels, bad, "truncated header", "truncated image header");
    s = sl;
    s.header_len = 3;
    s.data_len = 0;
    write_idx(bad, sizeof bad, dir, "short-label-header", gz, &s);
    expect_error(images, bad, bad, "truncated header", "truncated label header");

    s = si;
    s.data_len -= 1 + (size_t)test_uniform(0, (double)s.data_len - 1);
    write_idx(bad, sizeof bad, dir, "short-data", gz, &s);
    expect_error(bad, labels, bad, "truncated image data", "truncated image data");
    s = sl;
    s.data_len = (size_t)p.n - 1;
    write_idx(bad, sizeof bad, dir, "short-labels", gz, &s);
    expect_error(images, bad, bad, "truncated label data", "truncated label data");

    expect_error(labels, labels, labels, "wrong magic 0x00000801, expected 0x00000803",
                 "labels as images");
    expect_error(images, images, images, "wrong magic 0x00000803, expected 0x00000801",
                 "images as labels");

    s = sl;
    s.dims[0] = (uint32_t)p.n - 1;
    s.data_len = (size_t)p.n - 1;
    write_idx(bad, sizeof bad, dir, "fewer-labels", gz, &s);
    expect_error(images, bad, bad, "images but", "count mismatch");

    s = si;
    s.dims[1] = 0;
    write_idx(bad, sizeof bad, dir, "zero-rows", gz, &s);
    expect_error(bad, labels, bad, "bad dimensions", "zero rows");
    s = si;
    s.dims[2] = 1u << 20;
    write_idx(bad, sizeof bad, dir, "huge-cols", gz, &s);
    expect_error(bad, labels, bad, "bad dimensions", "huge columns");
    s = sl;
    s.dims[0] = 0;
    s.data_len = 0;
    write_idx(bad, sizeof bad, dir, "no-labels", gz, &s);
    expect_error(images, bad, bad, "bad dimensions", "zero labels");

    int at = (int)test_uniform(0, p.n);
    unsigned char saved = p.labels[at];
    p.labels[at] = (unsigned char)(10 + test_uniform(0, 246));
    char want[64];
    snprintf(want, sizeof want, "label %u at index %d out of range", p.labels[at], at);
    s = sl;
    write_idx(bad, sizeof bad, dir, "bad-label", gz, &s);
    expect_error(images, bad, bad, want, "label out of range");
    p.labels[at] = saved;
    free(p.pixels);
    free(p.labels);
}

/* Damaged gzip streams: cut short, a bad header, a bad CRC. */
static void test_damaged_gzip(void)
{
    idx_pair p;
    make_pair(&p);
    char images[128], labels[128], bad[128];
    idx_spec si = images_spec(&p), sl = labels_spec(&p);
    write_idx(images, sizeof images, dir, "images", 1, &si);
    write_idx(labels, sizeof labels, dir, "labels", 0, &sl);
    unsigned char buf[4096];
    FILE *f = fopen(images, "rb");
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    snprintf(bad, sizeof bad, "%s/damaged.gz", dir);

    f = fopen(bad, "wb");
    fwrite(buf, 1, n / 2, f);
    fclose(f);
    expect_error(bad, labels, bad, "truncated", "gzip cut in half");

    buf[2] = 0; /* compression method: only 8 (deflate) exists */
    f = fopen(bad, "wb");
    fwrite(buf, 1, n, f);
    fclose(f);
    expect_error(bad, labels, bad, "cannot read header", "bad gzip header");
    buf[2] = 8;

    buf[n - 8] ^= 0x5a; /* the CRC-32 in the trailer */
    f = fopen(bad, "wb");
    fwrite(buf, 1, n, f);
    fclose(f);
    expect_error(bad, labels, bad, "incorrect data check", "bad gzip CRC");

    idx_spec s = sl;
    unsigned char *more = malloc((size_t)p.n + 1);
    memcpy(more, p.labels, (size_t)p.n);
    more[p.n] = 0;
    s.data = more;
    s.data_len = (size_t)p.n + 1;
    write_idx(bad, sizeof bad, dir, "long-labels", 0, &s);
    expect_error(images, bad, bad, "trailing data", "trailing data");
    free(more);
    free(p.pixels);
    free(p.labels);
}

static void test_split(void)
{
    char root[96], path[160], err[512];
    snprintf(root, sizeof root, "%s/split", dir);
    mkdir(root, 0700);
    idx_pair train, test;
    make_pair(&train);
    /* The test set must have the training set's image shape. */
    test = (idx_pair){.n = 10, .rows = train.rows, .cols = train.cols};
    fill_pair(&test);
    idx_spec s;
    /* train as gzip, test as raw; a stale raw train-labels file must lose to the .gz. */
    s = images_spec(&train);
    write_idx(path, sizeof path, root, "train-images-idx3-ubyte", 1, &s);
    s = labels_spec(&train);
    write_idx(path, sizeof path, root, "train-labels-idx1-ubyte", 1, &s);
    s.magic = 0x999;
    write_idx(path, sizeof path, root, "train-labels-idx1-ubyte", 0, &s);
    s = images_spec(&test);
    write_idx(path, sizeof path, root, "t10k-images-idx3-ubyte", 0, &s);
    s = labels_spec(&test);
    write_idx(path, sizeof path, root, "t10k-labels-idx1-ubyte", 0, &s);

    dataset dtrain, dtest;
    CHECK(idx_load_split(&dtrain, &dtest, root, 0, 3, NULL, err, sizeof err) == 0, "%s", err);
    check_matches(&dtrain, &train, train.n, "split train");
    check_matches(&dtest, &test, 3, "split test limit");
    dataset_free(&dtrain);
    dataset_free(&dtest);

    snprintf(path, sizeof path, "%s/t10k-labels-idx1-ubyte", root);
    unlink(path);
    err[0] = '\0';
    CHECK(idx_load_split(&dtrain, &dtest, root, 0, 0, NULL, err, sizeof err) == -1 &&
          strstr(err, path) && strstr(err, "No such file"), "missing test labels: %s", err);
    CHECK(dtrain.images == NULL && dtest.images == NULL, "nothing left allocated");
    free(train.pixels);
    free(train.labels);
    free(test.pixels);
    free(test.labels);
}

/* What the loader asked data_admit, and whether to refuse. */
typedef struct admit_seen {
    int calls, refuse;
    data_claim claim;
} admit_seen;

static int record_admit(void *user, const data_claim *claim, char *err, size_t errlen)
{
    admit_seen *seen = user;
    seen->calls++;
    seen->claim = *claim;
    if (seen->refuse)
        snprintf(err, errlen, "refused by the test");
    return seen->refuse ? -1 : 0;
}

/* Headers that claim a million 28x28 images (and no data behind them):
 * the loader asks admission with the claimed counts, read from the headers
 * alone, and allocates nothing when refused. A true set is admitted with
 * its own counts and loads. */
static void test_admit_claim(void)
{
    char root[96], path[160], images[160], labels[160], err[512];
    snprintf(root, sizeof root, "%s/forged", dir);
    mkdir(root, 0700);
    idx_pair p = {.n = 12, .rows = 28, .cols = 28};
    fill_pair(&p);
    idx_spec si = images_spec(&p), sl = labels_spec(&p);
    write_idx(path, sizeof path, root, "t10k-images-idx3-ubyte", 0, &si);
    write_idx(path, sizeof path, root, "t10k-labels-idx1-ubyte", 0, &sl);
    si.dims[0] = sl.dims[0] = 1000000;
    si.data_len = sl.data_len = 0;
    write_idx(images, sizeof images, root, "train-images-idx3-ubyte", 0, &si);
    write_idx(labels, sizeof labels, root, "train-labels-idx1-ubyte", 0, &sl);

    admit_seen seen = {.refuse = 1};
    data_admit_with(record_admit, &seen);
    dataset d, train, test;
    CHECK(idx_load(&d, images, labels, 0, NULL, err, sizeof err) == -1 &&
              strcmp(err, "refused by the test") == 0 && !d.images && !d.labels,
          "a refused claim loads nothing: %s", err);
    CHECK(seen.calls == 1 && seen.claim.claimed == 1000000 && seen.claim.ntrain == 1000000 &&
              seen.claim.ntest == 0 && seen.claim.c == 1 && seen.claim.h == 28 &&
              seen.claim.w == 28 && seen.claim.classes == 10,
          "claim: %d calls, %ld claimed, %ld + %ld of %dx%dx%d", seen.calls, seen.claim.claimed,
          seen.claim.ntrain, seen.claim.ntest, seen.claim.c, seen.claim.h, seen.claim.w);
    CHECK(strstr(seen.claim.source, images) && strstr(seen.claim.source, "'s header"),
          "source: %s", seen.claim.source);
    CHECK(idx_load_split(&train, &test, root, 100, 0, NULL, err, sizeof err) == -1 &&
              !train.images && !test.images && seen.calls == 2 && seen.claim.ntrain == 100 &&
              seen.claim.ntest == 12 && seen.claim.claimed == 1000000,
          "split, limited: %s (%ld + %ld, %ld claimed)", err, seen.claim.ntrain, seen.claim.ntest,
          seen.claim.claimed);
    /* Admitted, the forged set fails as the truncated file it is. */
    seen.refuse = 0;
    CHECK(idx_load(&d, images, labels, 5, NULL, err, sizeof err) == -1 && strstr(err, "truncated"),
          "admitted forged set: %s", err);
    snprintf(images, sizeof images, "%s/t10k-images-idx3-ubyte", root);
    snprintf(labels, sizeof labels, "%s/t10k-labels-idx1-ubyte", root);
    CHECK(idx_load(&d, images, labels, 0, NULL, err, sizeof err) == 0, "%s", err);
    CHECK(seen.calls == 4 && seen.claim.ntrain == 12 && seen.claim.claimed == 12, "true set");
    check_matches(&d, &p, p.n, "admitted");
    dataset_free(&d);
    data_admit_with(NULL, NULL);
    free(p.pixels);
    free(p.labels);
}

static void test_fashion_mnist(void)
{
    struct stat st;
    if (stat(FMNIST_ROOT, &st) != 0) {
        printf("idx: skip: %s absent, real Fashion-MNIST not checked\n", FMNIST_ROOT);
        return;
    }
    dataset train, test;
    char err[512];
    CHECK(idx_load_split(&train, &test, FMNIST_ROOT, 0, 0, NULL, err, sizeof err) == 0, "%s", err);
    if (!train.images)
        return;
    CHECK(train.n == 60000 && test.n == 10000, "sizes %d / %d", train.n, test.n);
    CHECK(train.c == 1 && train.h == 28 && train.w == 28 && test.h == 28 && test.w == 28,
          "shape %dx%dx%d", train.c, train.h, train.w);
    CHECK(train.labels[0] == 9, "first train label %d (Fashion-MNIST: 9, ankle boot)",
          train.labels[0]);
    int counts[10] = {0};
    for (int i = 0; i < train.n; i++)
        counts[train.labels[i]]++;
    for (int k = 0; k < 10; k++)
        CHECK(counts[k] == 6000, "class %d has %d training examples", k, counts[k]);
    double sum = 0, lo = 1, hi = 0;
    size_t np = (size_t)train.n * 784;
    for (size_t i = 0; i < np; i++) {
        sum += train.images[i];
        lo = fmin(lo, train.images[i]);
        hi = fmax(hi, train.images[i]);
    }
    CHECK(lo == 0.0 && hi == 1.0, "pixel range [%g, %g]", lo, hi);
    CHECK_CLOSE(sum / (double)np, 0.2860, 0.002, 0, "mean training pixel");

    dataset small, small_test;
    CHECK(idx_load_split(&small, &small_test, FMNIST_ROOT, 100, 7, NULL, err, sizeof err) == 0,
          "%s", err);
    CHECK(small.n == 100 && small_test.n == 7, "limits give %d / %d", small.n, small_test.n);
    if (small.n == 100 && small_test.n == 7) {
        CHECK(memcmp(small.images, train.images, 100 * 784 * sizeof(float)) == 0 &&
              memcmp(small.labels, train.labels, 100 * sizeof(int32_t)) == 0 &&
              memcmp(small_test.labels, test.labels, 7 * sizeof(int32_t)) == 0,
              "a limit keeps a prefix");
    }
    dataset_free(&small);
    dataset_free(&small_test);
    dataset_free(&train);
    dataset_free(&test);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

int main(void)
{
    test_init("idx");
    snprintf(dir, sizeof dir, "/tmp/parle-idx-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    for (int gz = 0; gz < 2; gz++) {
        test_valid(gz);
        test_malformed(gz);
    }
    test_damaged_gzip();
    test_split();
    test_admit_claim();
    test_fashion_mnist();
    nftw(dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
    return test_main_end();
}
