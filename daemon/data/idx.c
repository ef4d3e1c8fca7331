/* IDX files (MNIST, Fashion-MNIST): a big-endian header (magic, then one u32
 * per dimension) followed by u8 data. zlib reads gzip and raw files alike. */
#include "dataset.h"
#include "data_file.h"
#include "admit.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#define IDX_MAGIC_IMAGES 0x00000803u /* u8, 3 dimensions */
#define IDX_MAGIC_LABELS 0x00000801u /* u8, 1 dimension */
#define IDX_CLASSES 10
#define IDX_MAX_SIDE 4096

static gzFile idx_open(const char *path, char *err, size_t errlen)
{
    struct stat st;
    int fd = data_open(path, &st, err, errlen);
    if (fd < 0)
        return NULL;
    gzFile gz = gzdopen(fd, "rb");
    if (!gz) {
        snprintf(err, errlen, "%s: cannot open: out of memory", path);
        close(fd);
    }
    return gz;
}

/* zlib's reason for the last error, without its "<fd:N>: " prefix; errno's
 * for a system error. */
static const char *gz_reason(gzFile gz)
{
    int zerr;
    const char *msg = gzerror(gz, &zerr);
    if (zerr == Z_ERRNO)
        return strerror(errno);
    const char *after = strstr(msg, ">: ");
    return after ? after + 3 : msg;
}

/* Reads exactly len bytes, DATA_STOP_BYTES at a time so that a stop is
 * seen; a short read is "truncated <what>". */
static int idx_read(gzFile gz, void *buf, size_t len, const char *path, const char *what,
                    const volatile int *stop, char *err, size_t errlen)
{
    size_t got = 0;
    while (got < len) {
        if (data_check_stop(stop, err, errlen) != 0)
            return -1;
        size_t chunk = len - got < DATA_STOP_BYTES ? len - got : DATA_STOP_BYTES;
        int n = gzread(gz, (unsigned char *)buf + got, (unsigned)chunk);
        if (n < 0) {
            snprintf(err, errlen, "%s: cannot read %s: %s", path, what, gz_reason(gz));
            return -1;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    if (got < len) {
        int zerr;
        gzerror(gz, &zerr);
        snprintf(err, errlen, "%s: truncated %s: expected %zu bytes, got %zu%s%s", path, what, len,
                 got, zerr != Z_OK ? "; " : "", zerr != Z_OK ? gz_reason(gz) : "");
        return -1;
    }
    return 0;
}

static uint32_t be32(const unsigned char *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

/* Reads the magic and `ndims` dimensions into dims. */
static int idx_header(gzFile gz, const char *path, uint32_t want_magic, const char *kind,
                      uint32_t *dims, int ndims, char *err, size_t errlen)
{
    unsigned char hdr[16];
    size_t len = 4 + 4 * (size_t)ndims;
    if (idx_read(gz, hdr, len, path, "header", NULL, err, errlen) != 0) /* a few bytes */
        return -1;
    uint32_t magic = be32(hdr);
    if (magic != want_magic) {
        snprintf(err, errlen, "%s: wrong magic 0x%08x, expected 0x%08x (IDX %s)", path, magic,
                 want_magic, kind);
        return -1;
    }
    for (int i = 0; i < ndims; i++)
        dims[i] = be32(hdr + 4 + 4 * i);
    return 0;
}

/* One set's two files, opened and past their headers, which agree: what
 * a load will take is known before anything is allocated. */
typedef struct idx_set {
    const char *images_path, *labels_path;
    gzFile gi, gl;
    uint32_t count; /* examples the headers claim */
    int n, h, w;    /* examples to load (within the limit), each image's size */
} idx_set;

static void idx_set_close(idx_set *s)
{
    if (s->gl)
        gzclose(s->gl);
    if (s->gi)
        gzclose(s->gi);
    s->gl = s->gi = NULL;
}

static int idx_set_open(idx_set *s, const char *images_path, const char *labels_path, int limit,
                        char *err, size_t errlen)
{
    *s = (idx_set){.images_path = images_path, .labels_path = labels_path};
    uint32_t n_labels, dims[3];
    if (!(s->gl = idx_open(labels_path, err, errlen)) ||
        idx_header(s->gl, labels_path, IDX_MAGIC_LABELS, "labels", &n_labels, 1, err, errlen) != 0)
        return -1;
    if (n_labels == 0 || n_labels > INT32_MAX) {
        snprintf(err, errlen, "%s: bad dimensions: %u labels", labels_path, n_labels);
        return -1;
    }
    if (!(s->gi = idx_open(images_path, err, errlen)) ||
        idx_header(s->gi, images_path, IDX_MAGIC_IMAGES, "images", dims, 3, err, errlen) != 0)
        return -1;
    if (dims[0] == 0 || dims[0] > INT32_MAX || dims[1] == 0 || dims[1] > IDX_MAX_SIDE ||
        dims[2] == 0 || dims[2] > IDX_MAX_SIDE) {
        snprintf(err, errlen, "%s: bad dimensions %u x %u x %u", images_path, dims[0], dims[1],
                 dims[2]);
        return -1;
    }
    if (dims[0] != n_labels) {
        snprintf(err, errlen, "%s: %u images but %s has %u labels", images_path, dims[0],
                 labels_path, n_labels);
        return -1;
    }
    s->count = dims[0];
    s->n = limit > 0 && (uint32_t)limit < s->count ? limit : (int)s->count;
    s->h = (int)dims[1];
    s->w = (int)dims[2];
    return 0;
}

/* The claim of a training set and its test set (NULL: none), for
 * data_admit: the larger set's images file names it. */
static int idx_admit(const idx_set *train, const idx_set *test, char *err, size_t errlen)
{
    const idx_set *larger = test && test->count > train->count ? test : train;
    data_claim c = {.ntrain = train->n, .ntest = test ? test->n : 0, .c = 1, .h = train->h,
                    .w = train->w, .classes = IDX_CLASSES, .claimed = larger->count};
    snprintf(c.source, sizeof c.source, "%s's header", larger->images_path);
    return data_admit(&c, err, errlen);
}

/* The image data of an opened set. */
static int read_images(dataset *out, const idx_set *s, const volatile int *stop, char *err,
                       size_t errlen)
{
    size_t total = (size_t)s->n * dataset_example_size(out);
    out->images = malloc(total * sizeof(float));
    unsigned char *bytes = malloc(total);
    int rc = -1;
    if (!out->images || !bytes) {
        snprintf(err, errlen, "%s: out of memory for %d images", s->images_path, s->n);
        goto done;
    }
    if (idx_read(s->gi, bytes, total, s->images_path, "image data", stop, err, errlen) != 0)
        goto done;
    for (size_t i = 0; i < total; i++)
        out->images[i] = (float)bytes[i] * (1.0f / 255.0f);
    rc = 0;
done:
    free(bytes);
    return rc;
}

/* The label data of an opened set. */
static int read_labels(dataset *out, const idx_set *s, const volatile int *stop, char *err,
                       size_t errlen)
{
    const char *path = s->labels_path;
    const int n = s->n;
    unsigned char *bytes = malloc((size_t)n);
    out->labels = malloc((size_t)n * sizeof(int32_t));
    int rc = -1;
    if (!bytes || !out->labels) {
        snprintf(err, errlen, "%s: out of memory for %d labels", path, n);
        goto done;
    }
    if (idx_read(s->gl, bytes, (size_t)n, path, "label data", stop, err, errlen) != 0)
        goto done;
    for (int i = 0; i < n; i++) {
        if (bytes[i] >= IDX_CLASSES) {
            snprintf(err, errlen, "%s: label %u at index %d out of range [0, %d)", path,
                     bytes[i], i, IDX_CLASSES);
            goto done;
        }
        out->labels[i] = bytes[i];
    }
    rc = 0;
done:
    free(bytes);
    return rc;
}

/* After the last example: no more data and, for gzip, a valid trailer (CRC). */
static int idx_expect_end(gzFile gz, const char *path, char *err, size_t errlen)
{
    unsigned char extra;
    int n = gzread(gz, &extra, 1), zerr;
    gzerror(gz, &zerr);
    if (n > 0)
        snprintf(err, errlen, "%s: trailing data after the last example", path);
    else if (zerr != Z_OK)
        snprintf(err, errlen, "%s: corrupt end of file: %s", path, gz_reason(gz));
    return n > 0 || zerr != Z_OK ? -1 : 0;
}

/* An opened set's examples into out (freed on failure). */
static int idx_set_read(dataset *out, const idx_set *s, const volatile int *stop, char *err,
                        size_t errlen)
{
    *out = (dataset){.n = s->n, .c = 1, .h = s->h, .w = s->w, .classes = IDX_CLASSES};
    /* A limit leaves the rest unread, and so unchecked. */
    if (read_images(out, s, stop, err, errlen) != 0 || read_labels(out, s, stop, err, errlen) != 0 ||
        ((uint32_t)s->n == s->count && (idx_expect_end(s->gi, s->images_path, err, errlen) != 0 ||
                                        idx_expect_end(s->gl, s->labels_path, err, errlen) != 0))) {
        dataset_free(out);
        return -1;
    }
    return 0;
}

int idx_load(dataset *out, const char *images_path, const char *labels_path, int limit,
             const volatile int *stop, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    idx_set s;
    int rc = idx_set_open(&s, images_path, labels_path, limit, err, errlen) == 0 &&
                     idx_admit(&s, NULL, err, errlen) == 0 &&
                     idx_set_read(out, &s, stop, err, errlen) == 0
                 ? 0
                 : -1;
    idx_set_close(&s);
    return rc;
}

/* root/name.gz when present, else root/name. */
static void idx_path(char *buf, size_t len, const char *root, const char *name)
{
    snprintf(buf, len, "%s/%s.gz", root, name);
    if (!data_exists(buf))
        snprintf(buf, len, "%s/%s", root, name);
}

int idx_load_split(dataset *train, dataset *test, const char *root, int train_limit,
                   int test_limit, const volatile int *stop, char *err, size_t errlen)
{
    char images[2][4096], labels[2][4096];
    idx_set sets[2] = {{0}, {0}};
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
    idx_path(images[0], sizeof images[0], root, "train-images-idx3-ubyte");
    idx_path(labels[0], sizeof labels[0], root, "train-labels-idx1-ubyte");
    idx_path(images[1], sizeof images[1], root, "t10k-images-idx3-ubyte");
    idx_path(labels[1], sizeof labels[1], root, "t10k-labels-idx1-ubyte");
    /* Every header first: nothing is allocated before the claim is admitted. */
    int rc = -1;
    if (idx_set_open(&sets[0], images[0], labels[0], train_limit, err, errlen) != 0 ||
        idx_set_open(&sets[1], images[1], labels[1], test_limit, err, errlen) != 0)
        goto done;
    if (sets[1].h != sets[0].h || sets[1].w != sets[0].w) {
        snprintf(err, errlen, "%s: test images are %dx%d but training images are %dx%d",
                 images[1], sets[1].h, sets[1].w, sets[0].h, sets[0].w);
        goto done;
    }
    if (idx_admit(&sets[0], &sets[1], err, errlen) != 0 ||
        idx_set_read(train, &sets[0], stop, err, errlen) != 0)
        goto done;
    if (idx_set_read(test, &sets[1], stop, err, errlen) != 0) {
        dataset_free(train);
        goto done;
    }
    rc = 0;
done:
    idx_set_close(&sets[0]);
    idx_set_close(&sets[1]);
    return rc;
}
