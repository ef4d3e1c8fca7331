/* CIFAR loading (on small files written here: class-coloured blobs, so the
 * sets are learnable) with every malformed case, and the preprocessing:
 * per-channel and per-image normalisation, the eigensolver, and ZCA against a
 * float64 reference (Jacobi eigendecomposition). */
#include <ftw.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cifar.h"
#include "preprocess.h"
#include "testutil.h"

#define PIXELS 3072

static char dir[64];

/* A record set as the loader should return it. */
typedef struct fake_set {
    int n;
    unsigned char *pixels; /* n * 3072 */
    unsigned char *coarse, *fine;
} fake_set;

/* Class k: a blob of its own colour in one of four quadrants, on noise. */
static void make_set(fake_set *s, int n, int classes)
{
    s->n = n;
    s->pixels = malloc((size_t)n * PIXELS);
    s->coarse = malloc((size_t)n);
    s->fine = malloc((size_t)n);
    for (int i = 0; i < n; i++) {
        int k = (int)test_uniform(0, classes);
        s->fine[i] = (unsigned char)k;
        s->coarse[i] = (unsigned char)(k % 20);
        int cy = 8 + 16 * (k % 2), cx = 8 + 16 * (k / 2 % 2);
        for (int ch = 0; ch < 3; ch++)
            for (int y = 0; y < 32; y++)
                for (int x = 0; x < 32; x++) {
                    int in_blob = (y - cy) * (y - cy) + (x - cx) * (x - cx) < 36;
                    double v = in_blob ? 60 + (k * (ch + 3) * 37) % 180 + test_uniform(0, 16)
                                       : test_uniform(0, 60);
                    s->pixels[(size_t)i * PIXELS + ch * 1024 + y * 32 + x] = (unsigned char)v;
                }
    }
}

static void free_set(fake_set *s)
{
    free(s->pixels);
    free(s->coarse);
    free(s->fine);
}

/* Records [lo, hi) of s into dir/name; label_bytes 1 (CIFAR-10) or 2. */
static void write_records(const char *in, const char *name, const fake_set *s, int lo, int hi,
                          int label_bytes)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", in, name);
    FILE *f = fopen(path, "wb");
    for (int i = lo; i < hi; i++) {
        if (label_bytes == 2)
            fputc(s->coarse[i], f);
        fputc(s->fine[i], f);
        fwrite(s->pixels + (size_t)i * PIXELS, 1, PIXELS, f);
    }
    fclose(f);
}

/* The CIFAR-10 training files: five parts of train, of uneven sizes. */
static void write_cifar10(const char *in, const fake_set *train, const fake_set *test, int *ends)
{
    for (int b = 0; b < 5; b++) {
        char name[32];
        snprintf(name, sizeof name, "data_batch_%d.bin", b + 1);
        write_records(in, name, train, b ? ends[b - 1] : 0, ends[b], 1);
    }
    write_records(in, "test_batch.bin", test, 0, test->n, 1);
}

/* The first d->n records of s, exactly. */
static int matches(const dataset *d, const fake_set *s)
{
    for (int i = 0; i < d->n; i++) {
        if (d->labels[i] != s->fine[i])
            return 0;
        for (int j = 0; j < PIXELS; j++)
            if (fabs(d->images[(size_t)i * PIXELS + j] - s->pixels[(size_t)i * PIXELS + j] / 255.0) > 1e-7)
                return 0;
    }
    return 1;
}

/* Nearest class mean, fitted on train: the blobs make this near perfect. */
static double nearest_mean_accuracy(const dataset *train, const dataset *test)
{
    int classes = train->classes;
    double *mean = calloc((size_t)classes * PIXELS, sizeof(double));
    int *count = calloc((size_t)classes, sizeof(int));
    for (int i = 0; i < train->n; i++) {
        count[train->labels[i]]++;
        for (int j = 0; j < PIXELS; j++)
            mean[(size_t)train->labels[i] * PIXELS + j] += train->images[(size_t)i * PIXELS + j];
    }
    int hits = 0;
    for (int i = 0; i < test->n; i++) {
        int best = -1;
        double best_d = 0;
        for (int k = 0; k < classes; k++) {
            if (!count[k])
                continue;
            double dist = 0;
            for (int j = 0; j < PIXELS; j++) {
                double t = test->images[(size_t)i * PIXELS + j] - mean[(size_t)k * PIXELS + j] / count[k];
                dist += t * t;
            }
            if (best < 0 || dist < best_d)
                best = k, best_d = dist;
        }
        hits += best == test->labels[i];
    }
    free(mean);
    free(count);
    return (double)hits / test->n;
}

static void test_cifar10(void)
{
    char in[128], err[512];
    snprintf(in, sizeof in, "%s/c10", dir);
    mkdir(in, 0700);
    int ends[5], total = 0;
    for (int b = 0; b < 5; b++)
        ends[b] = total += 20 + (int)test_uniform(0, 20);
    fake_set train, test;
    make_set(&train, total, 10);
    make_set(&test, 60 + (int)test_uniform(0, 20), 10);
    write_cifar10(in, &train, &test, ends);

    dataset tr, te;
    int rc = cifar_load_split(&tr, &te, in, 10, 0, 0, NULL, err, sizeof err);
    CHECK(rc == 0, "load: %s", err);
    if (rc == 0) {
        CHECK(tr.n == train.n && te.n == test.n, "counts %d %d, want %d %d", tr.n, te.n, train.n,
              test.n);
        CHECK(tr.c == 3 && tr.h == 32 && tr.w == 32 && tr.classes == 10 && te.c == 3 &&
              te.classes == 10, "shape %dx%dx%d, %d classes", tr.c, tr.h, tr.w, tr.classes);
        CHECK(matches(&tr, &train) && matches(&te, &test), "records read back exactly, in order");
        double acc = nearest_mean_accuracy(&tr, &te);
        CHECK(acc > 0.9, "nearest class mean on the blobs: accuracy %.3f", acc);
    }
    dataset_free(&tr);
    dataset_free(&te);

    /* A limit that ends inside the second file keeps a prefix. */
    int limit = ends[0] + 3;
    rc = cifar_load_split(&tr, &te, in, 10, limit, 5, NULL, err, sizeof err);
    CHECK(rc == 0, "load with limits: %s", err);
    if (rc == 0)
        CHECK(tr.n == limit && te.n == 5 && matches(&tr, &train) && matches(&te, &test),
              "limits give %d / %d records, a prefix", tr.n, te.n);
    dataset_free(&tr);
    dataset_free(&te);

    /* Every malformed case names its file. */
    char path[256], want[256];
    snprintf(path, sizeof path, "%s/data_batch_3.bin", in);
    unlink(path);
    rc = cifar_load_split(&tr, &te, in, 10, 0, 0, NULL, err, sizeof err);
    CHECK(rc == -1 && strstr(err, path) && strstr(err, "cannot open"), "missing file: %s", err);
    CHECK(!tr.images && !te.images && tr.n == 0, "a failed load leaves empty sets");
    write_records(in, "data_batch_3.bin", &train, ends[1], ends[2], 1);

    FILE *f = fopen(path, "ab");
    fputc(7, f);
    fclose(f);
    rc = cifar_load_split(&tr, &te, in, 10, 0, 0, NULL, err, sizeof err);
    CHECK(rc == -1 && strstr(err, path) && strstr(err, "truncated"), "truncated file: %s", err);
    CHECK(cifar_load_split(&tr, &te, in, 10, 5, 5, NULL, err, sizeof err) == -1 &&
              strstr(err, path),
          "a limit still checks every file: %s", err);
    write_records(in, "data_batch_3.bin", &train, ends[1], ends[2], 1);

    /* A label of 10 in the test file, at a random record. */
    int bad = (int)test_uniform(0, test.n);
    unsigned char keep = test.fine[bad];
    test.fine[bad] = 10;
    write_records(in, "test_batch.bin", &test, 0, test.n, 1);
    snprintf(path, sizeof path, "%s/test_batch.bin", in);
    snprintf(want, sizeof want, "label 10 of record %d out of range [0, 10)", bad);
    rc = cifar_load_split(&tr, &te, in, 10, 0, 0, NULL, err, sizeof err);
    CHECK(rc == -1 && strstr(err, path) && strstr(err, want), "bad label: %s", err);
    CHECK(!tr.images && !te.images, "a failed test set frees the training set");
    test.fine[bad] = keep;

    char empty[128];
    snprintf(empty, sizeof empty, "%s/empty", dir);
    mkdir(empty, 0700);
    rc = cifar_load_split(&tr, &te, empty, 10, 0, 0, NULL, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "data_batch_1.bin") && strstr(err, "not found") &&
          strstr(err, "cifar-10-batches-bin"), "no files: %s", err);
    rc = cifar_load_split(&tr, &te, in, 7, 0, 0, NULL, err, sizeof err);
    CHECK(rc == -1 && strstr(err, "10 or 100"), "7 classes: %s", err);
    volatile int stop = 1; /* a job's cancel or shutdown */
    rc = cifar_load_split(&tr, &te, in, 10, 0, 0, &stop, err, sizeof err);
    CHECK(rc == -1 && strcmp(err, DATA_STOPPED) == 0 && !tr.images && !te.images,
          "a stopped load: %s", err);
    free_set(&train);
    free_set(&test);
}

/* CIFAR-100 from the archive's subdirectory; the fine label is the class. */
static void test_cifar100(void)
{
    char in[128], sub[192], err[512], path[256];
    snprintf(in, sizeof in, "%s/c100", dir);
    snprintf(sub, sizeof sub, "%s/cifar-100-binary", in);
    mkdir(in, 0700);
    mkdir(sub, 0700);
    fake_set train, test;
    make_set(&train, 150 + (int)test_uniform(0, 50), 100);
    make_set(&test, 30 + (int)test_uniform(0, 20), 100);
    write_records(sub, "train.bin", &train, 0, train.n, 2);
    write_records(sub, "test.bin", &test, 0, test.n, 2);
    dataset tr, te;
    int rc = cifar_load_split(&tr, &te, in, 100, 0, 0, NULL, err, sizeof err);
    CHECK(rc == 0, "cifar-100 from the subdirectory: %s", err);
    if (rc == 0)
        CHECK(tr.n == train.n && te.n == test.n && tr.classes == 100 && matches(&tr, &train) &&
              matches(&te, &test), "cifar-100 records read back exactly");
    dataset_free(&tr);
    dataset_free(&te);
    CHECK(cifar_load_split(&tr, &te, in, 10, 0, 0, NULL, err, sizeof err) == -1 &&
          strstr(err, "cifar-10-batches-bin"), "cifar-10 files absent: %s", err);

    snprintf(path, sizeof path, "%s/train.bin", sub);
    int bad = (int)test_uniform(0, train.n);
    train.fine[bad] = 100;
    write_records(sub, "train.bin", &train, 0, train.n, 2);
    rc = cifar_load_split(&tr, &te, in, 100, 0, 0, NULL, err, sizeof err);
    CHECK(rc == -1 && strstr(err, path) && strstr(err, "label 100") && strstr(err, "[0, 100)"),
          "fine label 100: %s", err);
    train.fine[bad] = 1;
    train.coarse[bad] = 20;
    write_records(sub, "train.bin", &train, 0, train.n, 2);
    rc = cifar_load_split(&tr, &te, in, 100, 0, 0, NULL, err, sizeof err);
    CHECK(rc == -1 && strstr(err, path) && strstr(err, "coarse label 20"), "coarse label 20: %s", err);
    /* A CIFAR-10 record is one byte shorter: a CIFAR-10 file is not a whole number of them. */
    write_records(sub, "train.bin", &train, 0, 1, 1);
    rc = cifar_load_split(&tr, &te, in, 100, 0, 0, NULL, err, sizeof err);
    CHECK(rc == -1 && strstr(err, path) && strstr(err, "truncated"), "a 3073-byte file: %s", err);
    free_set(&train);
    free_set(&test);
}

/* ---- preprocessing ---- */

static dataset random_dataset(int n, int c, int h, int w, double lo, double hi)
{
    dataset d = {.n = n, .c = c, .h = h, .w = w, .classes = 10};
    d.images = malloc((size_t)n * c * h * w * sizeof(float));
    d.labels = calloc((size_t)n, sizeof(int32_t));
    test_fill_uniform(d.images, (size_t)n * c * h * w, lo, hi);
    return d;
}

static void test_channels(void)
{
    int c = 3, h = 5, w = 4;
    size_t plane = (size_t)h * w;
    dataset tr = random_dataset(40, c, h, w, 0, 1), te = random_dataset(9, c, h, w, 0, 1);
    for (int i = 0; i < tr.n; i++) /* channels with their own scale and offset */
        for (int ch = 0; ch < c; ch++)
            for (size_t j = 0; j < plane; j++)
                tr.images[((size_t)i * c + ch) * plane + j] =
                    tr.images[((size_t)i * c + ch) * plane + j] * (ch + 1) + (float)ch;
    double mean[3] = {0}, var[3] = {0}, cnt = (double)tr.n * plane;
    for (int ch = 0; ch < c; ch++) {
        for (int i = 0; i < tr.n; i++)
            for (size_t j = 0; j < plane; j++)
                mean[ch] += tr.images[((size_t)i * c + ch) * plane + j] / cnt;
        for (int i = 0; i < tr.n; i++)
            for (size_t j = 0; j < plane; j++) {
                double t = tr.images[((size_t)i * c + ch) * plane + j] - mean[ch];
                var[ch] += t * t / cnt;
            }
    }
    float *raw_test = malloc((size_t)te.n * c * plane * sizeof(float));
    memcpy(raw_test, te.images, (size_t)te.n * c * plane * sizeof(float));
    preprocess_channels(&tr, &te);
    for (int ch = 0; ch < c; ch++) {
        double m = 0, v = 0;
        for (int i = 0; i < tr.n; i++)
            for (size_t j = 0; j < plane; j++)
                m += tr.images[((size_t)i * c + ch) * plane + j] / cnt;
        for (int i = 0; i < tr.n; i++)
            for (size_t j = 0; j < plane; j++)
                v += pow(tr.images[((size_t)i * c + ch) * plane + j] - m, 2) / cnt;
        CHECK_CLOSE(m, 0.0, 1e-5, 0, "train channel mean");
        CHECK_CLOSE(v, 1.0, 1e-4, 0, "train channel variance");
        for (int i = 0; i < te.n; i++)
            for (size_t j = 0; j < plane; j += 7) {
                size_t k = ((size_t)i * c + ch) * plane + j;
                CHECK_CLOSE(te.images[k], (raw_test[k] - mean[ch]) / sqrt(var[ch]), 1e-5, 1e-5,
                            "test uses the training statistics");
            }
    }
    free(raw_test);
    dataset_free(&tr);
    dataset_free(&te);
}

static void test_per_image(void)
{
    dataset d = random_dataset(12, 2, 3, 5, -2, 5);
    size_t ex = dataset_example_size(&d);
    for (size_t j = 0; j < ex; j++) /* a flat image: centred, not divided by 0 */
        d.images[3 * ex + j] = 0.25f;
    float *raw = malloc(d.n * ex * sizeof(float));
    memcpy(raw, d.images, d.n * ex * sizeof(float));
    preprocess_per_image(&d);
    for (int i = 0; i < d.n; i++) {
        double m = 0, v = 0;
        for (size_t j = 0; j < ex; j++)
            m += raw[i * ex + j] / (double)ex;
        for (size_t j = 0; j < ex; j++)
            v += pow(raw[i * ex + j] - m, 2) / (double)ex;
        double s = sqrt(v) > PER_IMAGE_STD_FLOOR ? sqrt(v) : PER_IMAGE_STD_FLOOR;
        for (size_t j = 0; j < ex; j++)
            CHECK_CLOSE(d.images[i * ex + j], (raw[i * ex + j] - m) / s, 1e-5, 1e-5,
                        "per-image normalisation");
    }
    free(raw);
    dataset_free(&d);
}

/* Cyclic Jacobi on a copy of the symmetric a (n x n): values, and the
 * eigenvectors as the columns of v. The float64 reference. */
static void jacobi_eigen(const double *a_in, int n, double *values, double *v)
{
    double *a = malloc((size_t)n * n * sizeof(double));
    memcpy(a, a_in, (size_t)n * n * sizeof(double));
    for (int i = 0; i < n * n; i++)
        v[i] = i % (n + 1) == 0;
    for (int sweep = 0; sweep < 100; sweep++) {
        double off = 0;
        for (int p = 0; p < n; p++)
            for (int q = p + 1; q < n; q++)
                off += a[p * n + q] * a[p * n + q];
        if (off < 1e-30)
            break;
        for (int p = 0; p < n; p++)
            for (int q = p + 1; q < n; q++) {
                if (a[p * n + q] == 0)
                    continue;
                /* the angle that zeroes a[p][q] */
                double theta = 0.5 * atan2(2 * a[p * n + q], a[q * n + q] - a[p * n + p]);
                double c = cos(theta), s = sin(theta);
                for (int k = 0; k < n; k++) { /* a := a J */
                    double x = a[k * n + p], y = a[k * n + q];
                    a[k * n + p] = c * x - s * y;
                    a[k * n + q] = s * x + c * y;
                }
                for (int k = 0; k < n; k++) { /* a := J^T a */
                    double x = a[p * n + k], y = a[q * n + k];
                    a[p * n + k] = c * x - s * y;
                    a[q * n + k] = s * x + c * y;
                }
                for (int k = 0; k < n; k++) {
                    double x = v[k * n + p], y = v[k * n + q];
                    v[k * n + p] = c * x - s * y;
                    v[k * n + q] = s * x + c * y;
                }
            }
    }
    for (int i = 0; i < n; i++)
        values[i] = a[i * n + i];
    free(a);
}

/* A = U^T diag(values) U and U U^T = I for the rows U returned. */
static void check_eigen(const double *a, int n, const char *what)
{
    double *u = malloc((size_t)n * n * sizeof(double)), *values = malloc((size_t)n * sizeof(double));
    double *work = malloc((size_t)n * n * sizeof(double));
    memcpy(work, a, (size_t)n * n * sizeof(double));
    int rc = symmetric_eigen(work, n, values, u, NULL);
    CHECK(rc == 0, "%s (n = %d): did not converge", what, n);
    double scale = 0, worst_rec = 0, worst_orth = 0;
    for (int i = 0; i < n * n; i++)
        scale = fmax(scale, fabs(a[i]));
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double rec = 0, dot = 0;
            for (int k = 0; k < n; k++) {
                rec += u[k * n + i] * values[k] * u[k * n + j];
                dot += u[i * n + k] * u[j * n + k];
            }
            worst_rec = fmax(worst_rec, fabs(rec - a[i * n + j]));
            worst_orth = fmax(worst_orth, fabs(dot - (i == j)));
        }
    CHECK(worst_rec <= 1e-12 * n * (scale + 1e-300), "%s (n = %d): |U^T L U - A| = %g (scale %g)", what,
          n, worst_rec, scale);
    CHECK(worst_orth <= 1e-12 * n, "%s (n = %d): |U U^T - I| = %g", what, n, worst_orth);
    free(u);
    free(work);
    free(values);
}

static void test_eigen(void)
{
    int sizes[] = {1, 2, 3, 5, 17, 64, 150};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int n = sizes[s];
        double *a = malloc((size_t)n * n * sizeof(double));
        for (int i = 0; i < n; i++)
            for (int j = 0; j <= i; j++)
                a[i * n + j] = a[j * n + i] = test_uniform(-1, 1);
        check_eigen(a, n, "random symmetric");
        /* Repeated eigenvalues and an already diagonal block: 2 I + r r^T. */
        double *r = malloc((size_t)n * sizeof(double));
        for (int i = 0; i < n; i++)
            r[i] = i < n / 2 ? 0 : test_uniform(-1, 1);
        for (int i = 0; i < n; i++)
            for (int j = 0; j < n; j++)
                a[i * n + j] = 2.0 * (i == j) + r[i] * r[j];
        check_eigen(a, n, "2 I + rank one");
        free(r);
        free(a);
    }
}

/* x (n x dim): mean, covariance and reference W (float64, Jacobi). */
static void zca_reference(const float *x, int n, int dim, double *mean, double *cov, double *W,
                          double *lambda_min)
{
    double *values = malloc((size_t)dim * sizeof(double)), *u = malloc((size_t)dim * dim * sizeof(double));
    for (int j = 0; j < dim; j++) {
        mean[j] = 0;
        for (int i = 0; i < n; i++)
            mean[j] += x[(size_t)i * dim + j] / (double)n;
    }
    for (int p = 0; p < dim; p++)
        for (int q = 0; q < dim; q++) {
            double s = 0;
            for (int i = 0; i < n; i++)
                s += (x[(size_t)i * dim + p] - mean[p]) * (x[(size_t)i * dim + q] - mean[q]);
            cov[p * dim + q] = s / n;
        }
    jacobi_eigen(cov, dim, values, u);
    *lambda_min = INFINITY;
    for (int k = 0; k < dim; k++)
        *lambda_min = fmin(*lambda_min, values[k]);
    for (int p = 0; p < dim; p++)
        for (int q = 0; q < dim; q++) {
            double s = 0;
            for (int k = 0; k < dim; k++)
                s += u[p * dim + k] * u[q * dim + k] / sqrt(fmax(values[k], 0) + ZCA_EPS);
            W[p * dim + q] = s;
        }
    free(values);
    free(u);
}

/* Rows x_i = b + sum_k s_k z_ik q_k, q orthonormal, s in [0.3, 3]: a
 * covariance far from diagonal, all its eigenvalues well above eps. */
static float *correlated_rows(int n, int dim)
{
    double *q = malloc((size_t)dim * dim * sizeof(double)), *s = malloc((size_t)dim * sizeof(double));
    double *b = malloc((size_t)dim * sizeof(double));
    for (int k = 0; k < dim; k++) { /* Gram-Schmidt on random rows */
        for (int j = 0; j < dim; j++)
            q[k * dim + j] = test_uniform(-1, 1);
        for (int p = 0; p < k; p++) {
            double dot = 0;
            for (int j = 0; j < dim; j++)
                dot += q[k * dim + j] * q[p * dim + j];
            for (int j = 0; j < dim; j++)
                q[k * dim + j] -= dot * q[p * dim + j];
        }
        double norm = 0;
        for (int j = 0; j < dim; j++)
            norm += q[k * dim + j] * q[k * dim + j];
        for (int j = 0; j < dim; j++)
            q[k * dim + j] /= sqrt(norm);
        s[k] = test_uniform(0.3, 3);
        b[k] = test_uniform(-2, 2);
    }
    float *x = malloc((size_t)n * dim * sizeof(float));
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < dim; j++)
            x[(size_t)i * dim + j] = (float)b[j];
        for (int k = 0; k < dim; k++) {
            double z = s[k] * test_uniform(-1, 1);
            for (int j = 0; j < dim; j++)
                x[(size_t)i * dim + j] += (float)(z * q[k * dim + j]);
        }
    }
    free(q);
    free(s);
    free(b);
    return x;
}

static void test_zca(void)
{
    int dim = 2 * 4 * 4, n = 1500 + (int)test_uniform(0, 1000), nt = 50;
    float *x = correlated_rows(n + nt, dim), *xt = x + (size_t)n * dim;
    double *mean = malloc(dim * sizeof(double)), *cov = malloc(dim * dim * sizeof(double));
    double *Wref = malloc(dim * dim * sizeof(double)), lambda_min;
    zca_reference(x, n, dim, mean, cov, Wref, &lambda_min);
    float *m = malloc(dim * sizeof(float)), *W = malloc(dim * dim * sizeof(float));
    char err[256];
    volatile int stop = 1; /* a job's cancel or shutdown */
    CHECK(zca_fit(x, n, dim, ZCA_EPS, 1, m, W, &stop, err, sizeof err) == -1 &&
              strcmp(err, DATA_STOPPED) == 0,
          "a stopped zca_fit: %s", err);
    CHECK(zca_apply(x, n, dim, m, W, 1, &stop, err, sizeof err) == -1 &&
              strcmp(err, DATA_STOPPED) == 0,
          "a stopped zca_apply: %s", err);
    double *sq = calloc((size_t)dim * dim, sizeof(double)), *vals = malloc(dim * sizeof(double));
    double *vecs = malloc((size_t)dim * dim * sizeof(double));
    CHECK(symmetric_eigen(sq, dim, vals, vecs, &stop) == -3, "a stopped eigendecomposition");
    free(sq);
    free(vals);
    free(vecs);
    int rc = zca_fit(x, n, dim, ZCA_EPS, 1, m, W, NULL, err, sizeof err);
    CHECK(rc == 0, "zca_fit: %s", err);
    double wmax = 0;
    for (int i = 0; i < dim * dim; i++)
        wmax = fmax(wmax, fabs(Wref[i]));
    for (int p = 0; p < dim; p++) {
        CHECK_CLOSE(m[p], mean[p], 1e-5, 1e-5, "zca mean");
        for (int q = 0; q < dim; q++) {
            CHECK(W[p * dim + q] == W[q * dim + p], "W[%d][%d] = %g but W[%d][%d] = %g", p, q,
                  W[p * dim + q], q, p, W[q * dim + p]);
            CHECK_CLOSE(W[p * dim + q], Wref[p * dim + q], 1e-4 * wmax, 0, "W against float64");
        }
    }
    /* The whitened training set: covariance W C W = U diag(l / (l + eps)) U^T ~ I. */
    float *y = malloc((size_t)(n + nt) * dim * sizeof(float));
    memcpy(y, x, (size_t)(n + nt) * dim * sizeof(float));
    CHECK(zca_apply(y, n + nt, dim, m, W, 1, NULL, err, sizeof err) == 0, "zca_apply: %s", err);
    double tol = ZCA_EPS / lambda_min + 1e-4;
    for (int p = 0; p < dim; p++)
        for (int q = 0; q < dim; q++) {
            double s = 0;
            for (int i = 0; i < n; i++)
                s += (double)y[(size_t)i * dim + p] * y[(size_t)i * dim + q];
            CHECK_CLOSE(s / n, p == q, tol, 0, "whitened covariance");
        }
    /* Held-out rows map as the reference does: W (x - mean). */
    for (int i = 0; i < nt; i++)
        for (int p = 0; p < dim; p++) {
            double r = 0;
            for (int q = 0; q < dim; q++)
                r += Wref[p * dim + q] * (xt[(size_t)i * dim + q] - mean[q]);
            CHECK_CLOSE(y[(size_t)(n + i) * dim + p], r, 1e-4, 1e-4, "held-out row");
        }
    printf("zca: d = %d, n = %d, lambda_min %.3g, whitened covariance within %.2g of I\n", dim, n,
           lambda_min, tol);
    free(x);
    free(y);
    free(mean);
    free(cov);
    free(Wref);
    free(m);
    free(W);
}

/* The paper's pipeline on 2x4x4 images against per-image normalisation and
 * ZCA in float64. Per-image normalised rows sum to 0, so the covariance is
 * singular: the eps keeps that direction finite. */
static void test_paper_pipeline(void)
{
    int n = 600 + (int)test_uniform(0, 400), dim = 32;
    dataset tr = random_dataset(n, 2, 4, 4, 0, 1), te = random_dataset(40, 2, 4, 4, 0, 1);
    for (int i = 0; i < n; i++) /* neighbouring pixels correlated, as in images */
        for (int j = 1; j < dim; j++)
            tr.images[(size_t)i * dim + j] = 0.6f * tr.images[(size_t)i * dim + j - 1] +
                                            0.4f * tr.images[(size_t)i * dim + j];
    dataset ref_tr = tr, ref_te = te;
    ref_tr.images = malloc((size_t)n * dim * sizeof(float));
    ref_te.images = malloc((size_t)te.n * dim * sizeof(float));
    memcpy(ref_tr.images, tr.images, (size_t)n * dim * sizeof(float));
    memcpy(ref_te.images, te.images, (size_t)te.n * dim * sizeof(float));
    char err[256];
    int rc = preprocess_zca(&tr, &te, 1, NULL, err, sizeof err);
    CHECK(rc == 0, "preprocess_zca: %s", err);
    /* Reference: per-image in double (checked above), then ZCA in float64. */
    preprocess_per_image(&ref_tr);
    preprocess_per_image(&ref_te);
    double *mean = malloc(dim * sizeof(double)), *cov = malloc(dim * dim * sizeof(double));
    double *Wref = malloc(dim * dim * sizeof(double)), lambda_min;
    zca_reference(ref_tr.images, n, dim, mean, cov, Wref, &lambda_min);
    CHECK(fabs(lambda_min) < 1e-6, "per-image normalised data has a null direction (%g)", lambda_min);
    dataset *sets[2] = {&tr, &te}, *refs[2] = {&ref_tr, &ref_te};
    double worst = 0;
    for (int s = 0; s < 2; s++)
        for (int i = 0; i < sets[s]->n; i++)
            for (int p = 0; p < dim; p++) {
                double r = 0;
                for (int q = 0; q < dim; q++)
                    r += Wref[p * dim + q] * (refs[s]->images[(size_t)i * dim + q] - mean[q]);
                worst = fmax(worst, fabs(sets[s]->images[(size_t)i * dim + p] - r));
            }
    CHECK(worst < 2e-3, "per-image + ZCA against float64: worst difference %g", worst);
    free(mean);
    free(cov);
    free(Wref);
    dataset_free(&tr);
    dataset_free(&te);
    free(ref_tr.images); /* the labels are tr's and te's */
    free(ref_te.images);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

int main(void)
{
    test_init("cifar");
    snprintf(dir, sizeof dir, "/tmp/parle-cifar-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_cifar10();
    test_cifar100();
    nftw(dir, remove_entry, 8, FTW_DEPTH | FTW_PHYS);
    test_channels();
    test_per_image();
    test_eigen();
    test_zca();
    test_paper_pipeline();
    return test_main_end();
}
