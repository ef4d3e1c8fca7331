/* data/dataset_table.h against what uses it: the validator takes exactly the
 * table's names (and fills or asks for data.root as a row says), and for every
 * row the loader gives the row's shape and classes, and claims what the
 * memory estimate counts for the same job (data_claim_default), on small IDX
 * and CIFAR files written here and on the synthetic set at its usual sizes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dataset_table.h"
#include "jobfile.h"
#include "load.h"
#include "testutil.h"

enum { NTRAIN = 7, NTEST = 3, TRAIN_LIMIT = 5 };

static char dir[64];

static int parse_job(const char *arch, const char *name, const char *extra, job_config *cfg,
                     char *err, size_t errlen)
{
    char json[1024];
    snprintf(json, sizeof json,
             "{\"model\": {\"arch\": \"%s\"}, \"data\": {\"dataset\": \"%s\"%s}, "
             "\"algorithm\": {\"name\": \"sgd\"}}",
             arch, name, extra);
    return job_config_parse(json, strlen(json), cfg, err, errlen);
}

/* Every name of the table is taken, with its default root or asking for
 * one; every other name is refused, and the refusal lists the table. */
static void test_validator(void)
{
    job_config cfg;
    char err[2048];
    for (size_t i = 0; i < DATASET_KINDS; i++) {
        const dataset_kind *k = &dataset_kinds[i];
        int ok = parse_job("lenet", k->name, "", &cfg, err, sizeof err) == 0;
        if (dataset_kind_needs_root(k)) {
            CHECK(!ok && strstr(err, "data.root: required for dataset") && strstr(err, k->name),
                  "%s without a root: %s", k->name, ok ? "accepted" : err);
            CHECK(parse_job("lenet", k->name, ", \"root\": \"/r\"", &cfg, err, sizeof err) == 0,
                  "%s: %s", k->name, err);
            CHECK(!strcmp(cfg.data.root, "/r"), "%s: root %s", k->name, cfg.data.root);
        } else {
            CHECK(ok, "%s: %s", k->name, err);
            CHECK(!strcmp(cfg.data.root, k->default_root ? k->default_root : ""),
                  "%s: root \"%s\"", k->name, cfg.data.root);
        }
        CHECK(!strcmp(cfg.data.dataset, k->name), "%s: kept as %s", k->name, cfg.data.dataset);
        CHECK(dataset_kind_find(k->name) == k, "%s: find", k->name);
    }
    const char *others[] = {"imagenet", "MNIST", "cifar", "cifar1000", "synthetic ", "", "mnis"};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        CHECK(dataset_kind_find(others[i]) == NULL, "find \"%s\"", others[i]);
        CHECK(parse_job("lenet", others[i], ", \"root\": \"/r\"", &cfg, err, sizeof err) != 0 &&
                  strstr(err, "data.dataset: unknown"),
              "\"%s\": %s", others[i], err);
        for (size_t j = 0; j < DATASET_KINDS; j++)
            CHECK(strstr(err, dataset_kinds[j].name), "\"%s\": %s not listed in: %s", others[i],
                  dataset_kinds[j].name, err);
    }
}

static void put_be32(unsigned char *p, unsigned v)
{
    p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16);
    p[2] = (unsigned char)(v >> 8), p[3] = (unsigned char)v;
}

/* A file of `len` bytes: `head` (hlen bytes), then bytes i % 10 (a label
 * below 10, a pixel of any value). */
static void write_file(const char *name, const unsigned char *head, size_t hlen, size_t len)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    CHECK(f, "cannot write %s", path);
    if (!f)
        return;
    if (hlen)
        fwrite(head, 1, hlen, f);
    for (size_t i = hlen; i < len; i++)
        fputc((int)(i % 10), f);
    fclose(f);
}

static void write_idx_pair(const char *prefix, int n, int h, int w)
{
    unsigned char head[16];
    char name[64];
    put_be32(head, 0x803), put_be32(head + 4, (unsigned)n);
    put_be32(head + 8, (unsigned)h), put_be32(head + 12, (unsigned)w);
    snprintf(name, sizeof name, "%s-images-idx3-ubyte", prefix);
    write_file(name, head, 16, 16 + (size_t)n * h * w);
    put_be32(head, 0x801), put_be32(head + 4, (unsigned)n);
    snprintf(name, sizeof name, "%s-labels-idx1-ubyte", prefix);
    write_file(name, head, 8, 8 + (size_t)n);
}

/* CIFAR's binary layout: records of label byte(s) and the pixels. */
static void write_cifar(const dataset_kind *k)
{
    size_t record = (size_t)(k->classes == 100 ? 2 : 1) + (size_t)k->c * k->h * k->w;
    if (k->classes == 100) {
        write_file("train.bin", NULL, 0, NTRAIN * record);
        write_file("test.bin", NULL, 0, NTEST * record);
        return;
    }
    for (int b = 1; b <= 5; b++) {
        char name[32];
        snprintf(name, sizeof name, "data_batch_%d.bin", b);
        write_file(name, NULL, 0, NTRAIN * record);
    }
    write_file("test_batch.bin", NULL, 0, NTEST * record);
}

static void remove_files(void)
{
    const char *names[] = {"train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                           "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte", "train.bin",
                           "test.bin", "data_batch_1.bin", "data_batch_2.bin", "data_batch_3.bin",
                           "data_batch_4.bin", "data_batch_5.bin", "test_batch.bin"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char path[256];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
}

/* The claim the loader hands to admission, kept for the checks. */
static int admit_keep(void *user, const data_claim *claim, char *err, size_t errlen)
{
    (void)err, (void)errlen;
    *(data_claim *)user = *claim;
    return 0;
}

/* The loader's sets and claim for `cfg` against the row and the estimate's
 * claim: shape and classes as the row says, counts as the estimate counts. */
static void check_load(const job_config *cfg, const dataset_kind *k, const char *what)
{
    data_claim usual, loaded = {0};
    dataset train, test;
    char err[4096];
    CHECK(data_claim_default(cfg, &usual, err, sizeof err) == 0, "%s: %s", what, err);
    data_admit_with(admit_keep, &loaded);
    int rc = data_load_job(cfg, &train, &test, NULL, err, sizeof err);
    data_admit_with(NULL, NULL);
    CHECK(rc == 0, "%s: %s", what, err);
    if (rc != 0)
        return;
    if (k->c)
        CHECK(train.c == k->c && train.h == k->h && train.w == k->w, "%s: %dx%dx%d, table %dx%dx%d",
              what, train.c, train.h, train.w, k->c, k->h, k->w);
    CHECK(train.classes == k->classes && test.classes == k->classes, "%s: classes %d, table %d",
          what, train.classes, k->classes);
    CHECK(usual.c == train.c && usual.h == train.h && usual.w == train.w &&
              usual.classes == train.classes,
          "%s: estimate %dx%dx%d/%d, loaded %dx%dx%d/%d", what, usual.c, usual.h, usual.w,
          usual.classes, train.c, train.h, train.w, train.classes);
    CHECK(loaded.c == usual.c && loaded.h == usual.h && loaded.w == usual.w &&
              loaded.classes == usual.classes && loaded.ntrain == usual.ntrain &&
              loaded.ntest == usual.ntest,
          "%s: loader claims %ld/%ld of %dx%dx%d, estimate %ld/%ld of %dx%dx%d", what,
          loaded.ntrain, loaded.ntest, loaded.c, loaded.h, loaded.w, usual.ntrain, usual.ntest,
          usual.c, usual.h, usual.w);
    CHECK(train.n == usual.ntrain && test.n == usual.ntest, "%s: loaded %d/%d, estimate %ld/%ld",
          what, train.n, test.n, usual.ntrain, usual.ntest);
    dataset_free(&train);
    dataset_free(&test);
}

/* Every row that reads files, on files of the row's shape, with limits at or
 * below what the files hold (the training set cut short), so that the loader
 * and the estimate count the same examples. */
static void test_file_rows(void)
{
    for (size_t i = 0; i < DATASET_KINDS; i++) {
        const dataset_kind *k = &dataset_kinds[i];
        if (k->format == DATASET_SYNTHETIC)
            continue;
        if (k->format == DATASET_IDX) {
            write_idx_pair("train", NTRAIN, k->h, k->w);
            write_idx_pair("t10k", NTEST, k->h, k->w);
        } else {
            write_cifar(k);
        }
        job_config cfg;
        char err[2048], extra[256];
        snprintf(extra, sizeof extra, ", \"root\": \"%s\", \"train_limit\": %d, \"test_limit\": %d",
                 dir, TRAIN_LIMIT, NTEST);
        CHECK(parse_job(k->c == 3 ? "allcnn" : "lenet", k->name, extra, &cfg, err, sizeof err) == 0,
              "%s: %s", k->name, err);
        check_load(&cfg, k, k->name);
        remove_files();
    }
}

/* The synthetic set at its usual sizes, for an MNIST-shaped and a
 * CIFAR-shaped network (the shape follows the model). */
static void test_synthetic_row(void)
{
    const dataset_kind *k = dataset_kind_find("synthetic");
    CHECK(k && k->format == DATASET_SYNTHETIC, "no synthetic row");
    if (!k)
        return;
    const char *archs[] = {"lenet", "allcnn"};
    for (int a = 0; a < 2; a++) {
        job_config cfg;
        char err[2048], what[64];
        CHECK(parse_job(archs[a], "synthetic", "", &cfg, err, sizeof err) == 0, "%s", err);
        data_claim usual;
        CHECK(data_claim_default(&cfg, &usual, err, sizeof err) == 0, "%s", err);
        CHECK(usual.ntrain == k->ntrain && usual.ntest == k->ntest, "%s: %ld/%ld, table %ld/%ld",
              archs[a], usual.ntrain, usual.ntest, k->ntrain, k->ntest);
        snprintf(what, sizeof what, "synthetic for %s", archs[a]);
        check_load(&cfg, k, what);
    }
}

/* Rows with a default root, where their files are installed: the whole
 * sets, whose sizes are the row's usual ones. */
static void test_installed_rows(void)
{
    for (size_t i = 0; i < DATASET_KINDS; i++) {
        const dataset_kind *k = &dataset_kinds[i];
        if (!k->default_root)
            continue;
        if (access(k->default_root, R_OK) != 0) {
            printf("dataset_table: %s not installed at %s, its sizes not checked\n", k->name,
                   k->default_root);
            continue;
        }
        job_config cfg;
        char err[2048];
        CHECK(parse_job("lenet", k->name, "", &cfg, err, sizeof err) == 0, "%s: %s", k->name, err);
        data_claim usual;
        CHECK(data_claim_default(&cfg, &usual, err, sizeof err) == 0 && usual.ntrain == k->ntrain &&
                  usual.ntest == k->ntest,
              "%s: estimate %ld/%ld, table %ld/%ld", k->name, usual.ntrain, usual.ntest, k->ntrain,
              k->ntest);
        check_load(&cfg, k, k->default_root);
    }
}

/* A name the table does not hold (a job file validated by an older build,
 * say) fails the estimate and the load, naming it. */
static void test_unknown(void)
{
    job_config cfg;
    char err[4096];
    CHECK(parse_job("lenet", "synthetic", "", &cfg, err, sizeof err) == 0, "%s", err);
    strcpy(cfg.data.dataset, "imagenet");
    data_claim c;
    CHECK(data_claim_default(&cfg, &c, err, sizeof err) != 0 && strstr(err, "\"imagenet\""),
          "estimate: %s", err);
    dataset train, test;
    CHECK(data_load_job(&cfg, &train, &test, NULL, err, sizeof err) != 0 &&
              strstr(err, "data.dataset") && strstr(err, "\"imagenet\""),
          "load: %s", err);
}

int main(void)
{
    test_init("dataset_table");
    snprintf(dir, sizeof dir, "/tmp/parle-dataset-table-XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_validator();
    test_file_rows();
    test_synthetic_row();
    test_installed_rows();
    test_unknown();
    rmdir(dir);
    return test_main_end();
}
