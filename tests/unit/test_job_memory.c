/* Admission by memory's estimate (daemon/runner/job_memory.c): each part against
 * model_build's planned bytes and the data sizes worked out by hand, where
 * the parts live (CPU, GPUs round-robin), and the machine's figures read
 * from a meminfo file (the PARLE_MEMINFO hook); the data as its files'
 * headers claim it. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "job_memory.h"
#include "jobfile.h"
#include "model.h"
#include "testutil.h"

static int parse(const char *json, job_config *cfg)
{
    char err[1024];
    int rc = job_config_parse(json, strlen(json), cfg, err, sizeof err);
    CHECK(rc == 0, "%s: %s", json, err);
    return rc;
}

/* m->bytes of cfg's model at `batch` on a plan context for `device`. */
static size_t planned(const job_config *cfg, int device, int c, int hw, int batch, int train,
                      size_t *nparams, size_t *nstats)
{
    backend_ctx plan;
    backend_ctx_plan(&plan, device, job_precision(cfg));
    model_spec s = cfg->model;
    s.in_c = c, s.in_h = s.in_w = hw;
    s.classes = s.classes > 0 ? s.classes : 10;
    model m;
    char err[256];
    CHECK(model_build(&m, &plan, &s, batch, train, err, sizeof err) == 0, "%s", err);
    size_t bytes = m.bytes;
    if (nparams)
        *nparams = m.nparams, *nstats = m.nstats;
    model_free(&m, NULL);
    return bytes;
}

/* LeNet on MNIST, Parle with inner steps (u, x, z, v), 3 replicas on the
 * CPU: everything in host memory. */
static void check_lenet_cpu(void)
{
    job_config cfg;
    if (parse("{\"model\":{\"arch\":\"lenet\"},\"data\":{\"dataset\":\"mnist\",\"root\":\"/d\"},"
              "\"algorithm\":{\"name\":\"parle\",\"replicas\":3,\"L\":5},"
              "\"optim\":{\"lr\":0.1,\"batch\":128},\"epochs\":1,\"devices\":\"cpu\"}", &cfg))
        return;
    job_memory m;
    char err[256];
    CHECK(job_memory_estimate(&cfg, NULL, 0, &m, err, sizeof err) == 0, "%s", err);
    size_t np, ns;
    size_t train = planned(&cfg, -1, 1, 28, 128, 1, &np, &ns);
    CHECK(m.model == train, "LeNet training model %zu, planned %zu", m.model, train);
    CHECK(m.eval == planned(&cfg, -1, 1, 28, 256, 0, NULL, NULL), "LeNet eval %zu", m.eval);
    CHECK(m.rule == 4 * np * sizeof(float) && m.rule0 == m.rule, "Parle L>0: 4 vectors, %zu",
          m.rule);
    /* 60000 + 10000 images of 784 floats and a label each. */
    CHECK(m.data == 70000ull * (784 * 4 + 4), "MNIST data %zu bytes", m.data);
    size_t loader = 3ull * 128 * (784 * 4 + 4) + 784 * 4 + 60000 * 4;
    CHECK(m.batches == 3 * loader + (np + ns) * 4, "batches %zu", m.batches);
    CHECK(m.ngpus == 0 && m.host == 3 * (train + m.rule) + m.eval + m.data + m.batches,
          "a CPU job holds everything on the host: %zu", m.host);
}

/* WRN-16-4 on 1500 CIFAR-10 images whitened by ZCA, allreduce (u) with 3
 * replicas on GPUs 0 and 1 at bf16: replicas 0 and 2 (and the evaluation
 * model) on GPU 0, replica 1 on GPU 1; the data on the host. */
static void check_wrn_gpus(void)
{
    job_config cfg;
    if (parse("{\"model\":{\"arch\":\"wrn\",\"depth\":16,\"width\":4},\"data\":{\"dataset\":"
              "\"cifar10\",\"root\":\"/d\",\"train_limit\":1000,\"test_limit\":500,"
              "\"normalize\":\"zca\"},\"algorithm\":{\"name\":\"allreduce\",\"replicas\":3},"
              "\"optim\":{\"lr\":0.1,\"batch\":64},\"epochs\":1,\"devices\":\"0,1\","
              "\"precision\":\"bf16\"}", &cfg))
        return;
    job_memory m;
    char err[256];
    int gpus[2] = {0, 1};
    CHECK(job_memory_estimate(&cfg, gpus, 2, &m, err, sizeof err) == 0, "%s", err);
    size_t np, ns;
    size_t train = planned(&cfg, 0, 3, 32, 64, 1, &np, &ns);
    CHECK(m.model == train, "WRN-16-4 bf16 training model %zu, planned %zu", m.model, train);
    CHECK(train < planned(&cfg, -1, 3, 32, 64, 1, NULL, NULL),
          "bf16 activations on a GPU take less than fp32 on the CPU");
    size_t eval = planned(&cfg, 0, 3, 32, 256, 0, NULL, NULL);
    CHECK(m.eval == eval && m.rule == np * 4, "eval %zu, rule %zu", m.eval, m.rule);
    /* 1500 images of 3072 floats and a label; ZCA's two double and two
     * float 3072 x 3072 matrices. */
    CHECK(m.data == 1500ull * (3072 * 4 + 4) + 3072ull * 3072 * 24, "CIFAR data %zu", m.data);
    CHECK(m.gpu[0] == 2 * (train + m.rule) + eval && m.gpu[1] == train + m.rule,
          "GPU 0 %zu, GPU 1 %zu", m.gpu[0], m.gpu[1]);
    CHECK(m.host == m.data + m.batches, "a GPU job's host: data and batches, %zu", m.host);
}

/* EASGD keeps its centre on replica 0; a synthetic set takes load.c's
 * default sizes. */
static void check_easgd_synthetic(void)
{
    job_config cfg;
    if (parse("{\"model\":{\"arch\":\"mlp\"},\"data\":{\"dataset\":\"synthetic\"},"
              "\"algorithm\":{\"name\":\"easgd\",\"replicas\":2},"
              "\"optim\":{\"lr\":0.1,\"batch\":32},\"epochs\":1,\"devices\":\"cpu\"}", &cfg))
        return;
    job_memory m;
    char err[256];
    CHECK(job_memory_estimate(&cfg, NULL, 0, &m, err, sizeof err) == 0, "%s", err);
    CHECK(m.rule0 == 2 * m.rule, "EASGD: u and the centre on replica 0 (%zu, %zu)", m.rule0,
          m.rule);
    CHECK(m.data == (4096ull + 1024) * (784 * 4 + 4), "synthetic data %zu", m.data);
}

/* The data as its files claim it (load.h's data_claim, what a loader reads
 * from IDX headers before allocating): a million 28x28 images count a
 * million, where the default counts MNIST's 60,000; a synthetic set above
 * 4096 examples counts all of them. */
static void check_claimed(void)
{
    job_config cfg;
    if (parse("{\"model\":{\"arch\":\"lenet\"},\"data\":{\"dataset\":\"mnist\",\"root\":\"/d\"},"
              "\"algorithm\":{\"name\":\"parle\",\"replicas\":2},"
              "\"optim\":{\"lr\":0.1,\"batch\":64},\"epochs\":1,\"devices\":\"cpu\"}", &cfg))
        return;
    job_memory usual, forged;
    char err[256];
    data_claim claim = {.ntrain = 1000000, .ntest = 10000, .c = 1, .h = 28, .w = 28,
                        .classes = 10, .claimed = 1000000};
    CHECK(job_memory_estimate(&cfg, NULL, 0, &usual, err, sizeof err) == 0 &&
              job_memory_estimate_claimed(&cfg, &claim, NULL, 0, &forged, err, sizeof err) == 0,
          "%s", err);
    CHECK(forged.data == 1010000ull * (784 * 4 + 4) && usual.data == 70000ull * (784 * 4 + 4),
          "claimed data %zu, usual %zu", forged.data, usual.data);
    CHECK(forged.host - usual.host >= forged.data - usual.data,
          "the host part grows with the claim: %zu against %zu", forged.host, usual.host);
    CHECK(job_memory_data_bytes(&cfg, &claim) == forged.data, "data bytes alone");
    /* Wider images: a bigger model too (its input), and 4x the data per image. */
    claim = (data_claim){.ntrain = 100, .ntest = 10, .c = 1, .h = 56, .w = 56, .classes = 10};
    CHECK(job_memory_estimate_claimed(&cfg, &claim, NULL, 0, &forged, err, sizeof err) == 0 &&
              forged.data == 110ull * (56 * 56 * 4 + 4) && forged.model > usual.model,
          "56x56: data %zu, model %zu against %zu", forged.data, forged.model, usual.model);
    if (parse("{\"model\":{\"arch\":\"mlp\"},\"data\":{\"dataset\":\"synthetic\","
              "\"train_limit\":100000,\"test_limit\":2000},\"algorithm\":{\"name\":\"sgd\"},"
              "\"optim\":{\"lr\":0.1,\"batch\":32},\"epochs\":1,\"devices\":\"cpu\"}", &cfg))
        return;
    CHECK(job_memory_estimate(&cfg, NULL, 0, &usual, err, sizeof err) == 0 &&
              usual.data == 102000ull * (784 * 4 + 4),
          "synthetic of 100000 + 2000 examples: %zu bytes", usual.data);
}

static void write_meminfo(const char *path, long total_kb, long avail_kb)
{
    FILE *f = fopen(path, "w");
    fprintf(f, "MemTotal:       %ld kB\nMemFree:        1 kB\nMemAvailable:   %ld kB\n",
            total_kb, avail_kb);
    fclose(f);
}

/* The machine's figures through the hook, and the messages naming both. */
static void check_fits(void)
{
    char path[] = "/tmp/parle-meminfo-XXXXXX";
    int fd = mkstemp(path);
    close(fd);
    setenv("PARLE_MEMINFO", path, 1);
    write_meminfo(path, 1024 * 1024, 512 * 1024);
    size_t total = 0, avail = 0;
    CHECK(job_memory_host(&total, &avail) == 0 && total == 1ull << 30 && avail == 1ull << 29,
          "meminfo: %zu, %zu", total, avail);
    job_memory m = {.replicas = 2, .model = 300u << 20, .host = 700u << 20};
    char why[1024] = "";
    CHECK(job_memory_fits(&m, 0, NULL, why, sizeof why) == 1, "700 MiB in 1 GiB: %s", why);
    CHECK(job_memory_fits(&m, 1, NULL, why, sizeof why) == 0, "700 MiB in 512 MiB available");
    CHECK(strstr(why, "needs 700.0 MiB on cpu (model 300.0 MiB x 2 replicas") &&
          strstr(why, "512.0 MiB are available now (MemAvailable)"), "%s", why);
    write_meminfo(path, 1024 * 1024, 1024 * 1024);
    CHECK(job_memory_fits(&m, 1, NULL, why, sizeof why) == 1, "the file is read at every call");
    CHECK(job_memory_fits(&m, 1, &(memory_held){.host = 400u << 20}, why, sizeof why) == 0 &&
          strstr(why, "624.0 MiB are available now (MemAvailable less"),
          "jobs starting hold 400 MiB: %s", why);
    m.host = 3ull << 30;
    CHECK(job_memory_fits(&m, 0, NULL, why, sizeof why) == 0 &&
          strstr(why, "needs 3.00 GiB on cpu") && strstr(why, "the machine has 1.00 GiB (MemTotal)"),
          "%s", why);
    unlink(path);
    CHECK(job_memory_host(&total, &avail) == -1, "an unreadable meminfo is said so");
    CHECK(job_memory_fits(&m, 0, NULL, why, sizeof why) == 1, "what cannot be read holds nothing back");
    unsetenv("PARLE_MEMINFO");
    CHECK(job_memory_host(&total, &avail) == 0 && total > 0, "/proc/meminfo");
}

int main(void)
{
    test_init("job_memory");
    check_lenet_cpu();
    check_wrn_gpus();
    check_easgd_synthetic();
    check_claimed();
    check_fits();
    return test_main_end();
}
