/* The synthetic set: deterministic, well formed, balanced, learnable with
 * real noise, train and test sharing their class prototypes. */
#include <stdlib.h>
#include <string.h>

#include "dataset.h"
#include "testutil.h"

static int same_set(const dataset *a, const dataset *b)
{
    size_t size = (size_t)a->n * dataset_example_size(a);
    return a->n == b->n && dataset_example_size(a) == dataset_example_size(b) &&
           memcmp(a->images, b->images, size * sizeof(float)) == 0 &&
           memcmp(a->labels, b->labels, (size_t)a->n * sizeof(int32_t)) == 0;
}

static void test_shape_and_determinism(void)
{
    char err[256];
    uint64_t seed = (uint64_t)test_uniform(0, 1e15);
    int n = 50 + (int)test_uniform(0, 100), c = 1 + (int)test_uniform(0, 3);
    int h = 1 + (int)test_uniform(0, 12), w = 1 + (int)test_uniform(0, 12);
    int classes = 2 + (int)test_uniform(0, 9);
    dataset a, b, other, test;
    CHECK(synthetic_make(&a, n, c, h, w, classes, seed, 0, NULL, err, sizeof err) == 0, "%s", err);
    CHECK(a.n == n && a.c == c && a.h == h && a.w == w && a.classes == classes,
          "shape %d %dx%dx%d %d", a.n, a.c, a.h, a.w, a.classes);
    size_t total = (size_t)n * c * h * w, out_of_range = 0;
    for (size_t i = 0; i < total; i++)
        out_of_range += !(a.images[i] >= 0.0f && a.images[i] <= 1.0f);
    CHECK(out_of_range == 0, "%zu pixels outside [0, 1]", out_of_range);

    int counts[16] = {0}, bad_labels = 0;
    for (int i = 0; i < n; i++) {
        bad_labels += a.labels[i] < 0 || a.labels[i] >= classes;
        if (a.labels[i] >= 0 && a.labels[i] < classes)
            counts[a.labels[i]]++;
    }
    CHECK(bad_labels == 0, "%d labels out of range", bad_labels);
    /* Balanced, and so is every prefix (a train_limit keeps one). */
    for (int k = 0; k < classes; k++)
        CHECK(counts[k] == n / classes || counts[k] == n / classes + 1, "class %d: %d of %d", k,
              counts[k], n);
    int prefix = classes + (int)test_uniform(0, n - classes), seen[16] = {0};
    for (int i = 0; i < prefix; i++)
        seen[a.labels[i]]++;
    for (int k = 0; k < classes; k++)
        CHECK(abs(seen[k] - prefix / classes) <= 1, "prefix %d: class %d has %d", prefix, k,
              seen[k]);

    CHECK(synthetic_make(&b, n, c, h, w, classes, seed, 0, NULL, err, sizeof err) == 0, "%s", err);
    CHECK(same_set(&a, &b), "same seed, same set");
    CHECK(synthetic_make(&other, n, c, h, w, classes, seed + 1, 0, NULL, err, sizeof err) == 0,
          "%s", err);
    CHECK(memcmp(a.images, other.images, total * sizeof(float)) != 0, "another seed differs");
    CHECK(synthetic_make(&test, n, c, h, w, classes, seed, 1, NULL, err, sizeof err) == 0, "%s",
          err);
    CHECK(memcmp(a.images, test.images, total * sizeof(float)) != 0, "test noise differs");
    dataset_free(&a);
    dataset_free(&b);
    dataset_free(&other);
    dataset_free(&test);

    CHECK(synthetic_make(&a, 0, 1, 8, 8, 10, seed, 0, NULL, err, sizeof err) == -1 &&
          strstr(err, "n=0"), "n = 0: %s", err);
    CHECK(synthetic_make(&a, 10, 1, 8, 8, 1, seed, 0, NULL, err, sizeof err) == -1 &&
          strstr(err, "classes=1"), "one class: %s", err);
    CHECK(synthetic_make(&a, 10, 1, -3, 8, 10, seed, 0, NULL, err, sizeof err) == -1 &&
          strstr(err, "h=-3") && a.images == NULL, "negative h: %s", err);
}

/* Class means from the training split classify the test split (shared
 * prototypes) far above chance, while each example is far from its mean. */
static void test_learnable(void)
{
    char err[256];
    uint64_t seed = (uint64_t)test_uniform(0, 1e15);
    const int classes = 10, c = 1, h = 12, w = 12, d = c * h * w;
    dataset train, test;
    CHECK(synthetic_make(&train, 1000, c, h, w, classes, seed, 0, NULL, err, sizeof err) == 0, "%s",
          err);
    CHECK(synthetic_make(&test, 500, c, h, w, classes, seed, 1, NULL, err, sizeof err) == 0, "%s",
          err);
    if (!train.images || !test.images)
        return;
    double *mean = calloc((size_t)classes * d, sizeof(double));
    int counts[10] = {0};
    for (int i = 0; i < train.n; i++) {
        int k = train.labels[i];
        counts[k]++;
        for (int j = 0; j < d; j++)
            mean[k * d + j] += train.images[(size_t)i * d + j];
    }
    for (int k = 0; k < classes; k++)
        for (int j = 0; j < d; j++)
            mean[k * d + j] /= counts[k];

    int correct = 0;
    double noise2 = 0;
    for (int i = 0; i < test.n; i++) {
        const float *x = test.images + (size_t)i * d;
        int best = -1;
        double best_dist = 0;
        for (int k = 0; k < classes; k++) {
            double dist = 0;
            for (int j = 0; j < d; j++)
                dist += (x[j] - mean[k * d + j]) * (x[j] - mean[k * d + j]);
            if (best < 0 || dist < best_dist) {
                best = k;
                best_dist = dist;
            }
            if (k == test.labels[i])
                noise2 += dist;
        }
        correct += best == test.labels[i];
    }
    double accuracy = (double)correct / test.n;
    double noise_std = sqrt(noise2 / ((double)test.n * d));
    printf("synthetic: nearest-class-mean test accuracy %.3f (chance %.3f), noise std %.3f\n",
           accuracy, 1.0 / classes, noise_std);
    CHECK(accuracy > 0.8, "nearest-class-mean accuracy %.3f", accuracy);
    CHECK(noise_std > 0.1, "noise std %.3f per pixel", noise_std);
    free(mean);
    dataset_free(&train);
    dataset_free(&test);
}

int main(void)
{
    test_init("synthetic");
    test_shape_and_determinism();
    test_learnable();
    return test_main_end();
}
