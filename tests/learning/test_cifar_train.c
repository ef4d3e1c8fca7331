/* End to end on CIFAR-format files: writes a small learnable CIFAR-10 set
 * (data_batch_1..5.bin, test_batch.bin: each class a coloured disc at a
 * random place on noise, so flips and crops keep it learnable), then trains
 * a job on it through data_load_job and run_job (CIFAR loader, per-channel
 * normalisation, flip + reflect-crop augmentation on the loader threads,
 * Parle with 2 replicas) and requires the master's test error to be below a
 * bound far under chance (90%).
 *   test_cifar_train ARCH MAX_ERROR TRAIN_LIMIT [DEPTH WIDTH] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner.h"

#define PER_FILE 160
#define TEST_N 320

static uint64_t rng = 88172645463325252ull;
static double uniform(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static int write_file(const char *path, int n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    unsigned char rec[1 + 3072];
    for (int i = 0; i < n; i++) {
        int k = i % 10, cx = 8 + (int)(uniform() * 16), cy = 8 + (int)(uniform() * 16);
        rec[0] = (unsigned char)k;
        for (int c = 0; c < 3; c++)
            for (int y = 0; y < 32; y++)
                for (int x = 0; x < 32; x++) {
                    int disc = (y - cy) * (y - cy) + (x - cx) * (x - cx) < 30;
                    int colour = 40 + (k * (c + 2) * 53) % 200;
                    double v = disc ? colour : 100;
                    rec[1 + (c * 32 + y) * 32 + x] = (unsigned char)(v + 40 * (uniform() - 0.5));
                }
        if (fwrite(rec, 1, sizeof rec, f) != sizeof rec) {
            fclose(f);
            return -1;
        }
    }
    return fclose(f);
}

int main(int argc, char **argv)
{
    if (argc != 4 && argc != 6) {
        fprintf(stderr, "usage: test_cifar_train ARCH MAX_ERROR TRAIN_LIMIT [DEPTH WIDTH]\n");
        return 2;
    }
    char dir[] = "/tmp/parle-cifar-XXXXXX", path[256], err[1024];
    if (!mkdtemp(dir))
        return 1;
    for (int b = 1; b <= 5; b++) {
        snprintf(path, sizeof path, "%s/data_batch_%d.bin", dir, b);
        if (write_file(path, PER_FILE) != 0)
            return 1;
    }
    snprintf(path, sizeof path, "%s/test_batch.bin", dir);
    if (write_file(path, TEST_N) != 0)
        return 1;

    job_config cfg;
    job_config_defaults(&cfg);
    snprintf(cfg.model.arch, sizeof cfg.model.arch, "%s", argv[1]);
    if (argc == 6)
        cfg.model.depth = atoi(argv[4]), cfg.model.width = atoi(argv[5]);
    cfg.data.train_limit = atoi(argv[3]);
    cfg.model.dropout = 0.0f;
    snprintf(cfg.data.dataset, sizeof cfg.data.dataset, "cifar10");
    snprintf(cfg.data.root, sizeof cfg.data.root, "%s", dir);
    snprintf(cfg.data.normalize, sizeof cfg.data.normalize, "channel");
    cfg.data.augment = true;
    snprintf(cfg.algorithm.name, sizeof cfg.algorithm.name, "parle");
    snprintf(cfg.algorithm.init, sizeof cfg.algorithm.init, "independent");
    cfg.algorithm.replicas = 2;
    cfg.algorithm.L = 3;
    cfg.optim.lr = 0.05;
    cfg.optim.batch = 32;
    cfg.epochs = 1;
    cfg.log_every = 1000;

    dataset tr, te;
    int rc = 1;
    if (data_load_job(&cfg, &tr, &te, NULL, err, sizeof err) != 0) {
        printf("%s\n", err);
        goto out;
    }
    int *cores, ncores = run_cpu_cores(&cores, err, sizeof err);
    run_result res;
    int ran = ncores >= 1 && run_job(&cfg, &tr, &te, &(run_devices){.cores = cores, .ncores = ncores}, NULL,
                                           &res, err, sizeof err) == 0;
    free(cores);
    if (!ran) {
        printf("%s\n", err);
    } else {
        double bound = atof(argv[2]);
        printf("%s on %d CIFAR-format images: test error %.2f%% (bound %.2f%%)\n", argv[1], tr.n,
               100 * res.test_error, 100 * bound);
        rc = res.test_error <= bound ? 0 : 1;
    }
    dataset_free(&tr);
    dataset_free(&te);
out:
    snprintf(path, sizeof path, "rm -rf %s", dir);
    if (system(path) != 0)
        rc = 1;
    return rc;
}
