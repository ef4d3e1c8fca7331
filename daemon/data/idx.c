/* IDX files (MNIST, Fashion-MNIST): a big-endian header (magic, then one u32
 * per dimension) followed by u8 data. zlib reads gzip and raw files alike. */
#include "dataset.h"
#include "data_file.h"

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

static int load_images(dataset *out, gzFile gz, const char *path, const char *labels_path,
                       uint32_t n_labels, int limit, const volatile int *stop, char *err,
                       size_t errlen)
{
    uint32_t dims[3];
    if (idx_header(gz, path, IDX_MAGIC_IMAGES, "images", dims, 3, err, errlen) != 0)
        return -1;
    if (dims[0] == 0 || dims[0] > INT32_MAX || dims[1] == 0 || dims[1] > IDX_MAX_SIDE ||
        dims[2] == 0 || dims[2] > IDX_MAX_SIDE) {
        snprintf(err, errlen, "%s: bad dimensions %u x %u x %u", path, dims[0], dims[1], dims[2]);
        return -1;
    }
    if (dims[0] != n_labels) {
        snprintf(err, errlen, "%s: %u images but %s has %u labels", path, dims[0], labels_path,
                 n_labels);
        return -1;
    }
    int n = (int)dims[0];
    if (limit > 0 && limit < n)
        n = limit;
    out->n = n;
    out->c = 1;
    out->h = (int)dims[1];
    out->w = (int)dims[2];
    size_t total = (size_t)n * dataset_example_size(out);
    out->images = malloc(total * sizeof(float));
    unsigned char *bytes = malloc(total);
    int rc = -1;
    if (!out->images || !bytes) {
        snprintf(err, errlen, "%s: out of memory for %d images", path, n);
        goto done;
    }
    if (idx_read(gz, bytes, total, path, "image data", stop, err, errlen) != 0)
        goto done;
    for (size_t i = 0; i < total; i++)
        out->images[i] = (float)bytes[i] * (1.0f / 255.0f);
    rc = 0;
done:
    free(bytes);
    return rc;
}

/* The label data (the header was read first: its count checks the image file). */
static int load_labels(dataset *out, gzFile gz, const char *path, int n,
                       const volatile int *stop, char *err, size_t errlen)
{
    unsigned char *bytes = malloc((size_t)n);
    out->labels = malloc((size_t)n * sizeof(int32_t));
    int rc = -1;
    if (!bytes || !out->labels) {
        snprintf(err, errlen, "%s: out of memory for %d labels", path, n);
        goto done;
    }
    if (idx_read(gz, bytes, (size_t)n, path, "label data", stop, err, errlen) != 0)
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

int idx_load(dataset *out, const char *images_path, const char *labels_path, int limit,
             const volatile int *stop, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->classes = IDX_CLASSES;
    gzFile gl = NULL, gi = NULL;
    uint32_t n_labels;
    int rc = -1;
    gl = idx_open(labels_path, err, errlen);
    if (!gl)
        goto done;
    if (idx_header(gl, labels_path, IDX_MAGIC_LABELS, "labels", &n_labels, 1, err, errlen) != 0)
        goto done;
    if (n_labels == 0 || n_labels > INT32_MAX) {
        snprintf(err, errlen, "%s: bad dimensions: %u labels", labels_path, n_labels);
        goto done;
    }
    gi = idx_open(images_path, err, errlen);
    if (!gi)
        goto done;
    if (load_images(out, gi, images_path, labels_path, n_labels, limit, stop, err, errlen) != 0)
        goto done;
    if (load_labels(out, gl, labels_path, out->n, stop, err, errlen) != 0)
        goto done;
    /* A limit leaves the rest unread, and so unchecked. */
    if ((uint32_t)out->n == n_labels && (idx_expect_end(gi, images_path, err, errlen) != 0 ||
                                         idx_expect_end(gl, labels_path, err, errlen) != 0))
        goto done;
    rc = 0;
done:
    if (gl)
        gzclose(gl);
    if (gi)
        gzclose(gi);
    if (rc != 0)
        dataset_free(out);
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
    char images[4096], labels[4096];
    memset(test, 0, sizeof *test);
    idx_path(images, sizeof images, root, "train-images-idx3-ubyte");
    idx_path(labels, sizeof labels, root, "train-labels-idx1-ubyte");
    if (idx_load(train, images, labels, train_limit, stop, err, errlen) != 0)
        return -1;
    idx_path(images, sizeof images, root, "t10k-images-idx3-ubyte");
    idx_path(labels, sizeof labels, root, "t10k-labels-idx1-ubyte");
    if (idx_load(test, images, labels, test_limit, stop, err, errlen) != 0) {
        dataset_free(train);
        return -1;
    }
    if (test->h != train->h || test->w != train->w) {
        snprintf(err, errlen, "%s: test images are %dx%d but training images are %dx%d", images,
                 test->h, test->w, train->h, train->w);
        dataset_free(train);
        dataset_free(test);
        return -1;
    }
    return 0;
}
