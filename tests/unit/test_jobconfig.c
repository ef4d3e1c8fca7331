/* Job files: the shipped configs parse, defaults follow the arch, dataset and
 * algorithm, all the problems of a file are reported at once, the error list
 * truncates safely, job_lr_at_epoch follows the schedule, and mangled job
 * files never crash the parser (bad fields: test_jobconfig_fields.c; the
 * rules' checks: test_jobconfig_rules.c; devices and scheduling fields:
 * test_jobconfig_devices.c). */
#include <stdlib.h>
#include <string.h>

#include "jobconfig_check.h"
#include "parle_config.h"
#include "testutil.h"

static char *read_text(const char *name, size_t *len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/configs/%s", PARLE_SOURCE_ROOT, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = malloc(1 << 16);
    *len = fread(buf, 1, (1 << 16) - 1, f);
    buf[*len] = '\0';
    fclose(f);
    return buf;
}

static void test_shipped_configs(void)
{
    job_config cfg;
    char err[1024];
    size_t len;

    char *text = read_text("lenet-fmnist-sgd.json", &len);
    CHECK(text, "configs/lenet-fmnist-sgd.json unreadable");
    if (text) {
        CHECK(job_config_parse(text, len, &cfg, err, sizeof err) == 0, "%s", err);
        CHECK(!strcmp(cfg.name, "lenet-fmnist-sgd"), "%s", cfg.name);
        CHECK(!strcmp(cfg.model.arch, "lenet") && !strcmp(cfg.algorithm.name, "sgd"), "arch/alg");
        CHECK(!strcmp(cfg.data.dataset, "fashion-mnist"), "%s", cfg.data.dataset);
        CHECK(!strcmp(cfg.data.root, "/usr/share/datasets/fashion-mnist"), "%s", cfg.data.root);
        CHECK(cfg.algorithm.replicas == 1 && cfg.algorithm.L == 0, "n %d L %d",
              cfg.algorithm.replicas, cfg.algorithm.L);
        CHECK(cfg.optim.nschedule == 2 && cfg.optim.schedule[0][0] == 1 &&
                  cfg.optim.schedule[0][1] == 0.1 && cfg.optim.schedule[1][0] == 2 &&
                  cfg.optim.schedule[1][1] == 0.02,
              "schedule");
        CHECK(cfg.optim.lr == 0.1 && cfg.optim.momentum == 0.9 && cfg.optim.nesterov &&
                  cfg.optim.batch == 128 && cfg.optim.weight_decay == 0,
              "optim");
        CHECK(cfg.epochs == 2 && cfg.seed == 42 && !strcmp(cfg.devices, "cpu"), "top level");
        free(text);
    }

    text = read_text("lenet-fmnist-parle.json", &len);
    CHECK(text, "configs/lenet-fmnist-parle.json unreadable");
    if (text) {
        CHECK(job_config_parse(text, len, &cfg, err, sizeof err) == 0, "%s", err);
        CHECK(!strcmp(cfg.algorithm.name, "parle") && cfg.algorithm.replicas == 3 &&
                  cfg.algorithm.L == 25,
              "parle n %d L %d", cfg.algorithm.replicas, cfg.algorithm.L);
        CHECK(cfg.algorithm.gamma == 0.01 && cfg.algorithm.rho == 1, "gamma rho");
        CHECK(!strcmp(cfg.algorithm.init, "independent"), "%s", cfg.algorithm.init);
        CHECK(cfg.optim.nschedule == 2 && cfg.epochs == 2, "schedule, epochs");
        free(text);
    }

    text = read_text("mlp-synthetic-sgd.json", &len);
    CHECK(text, "configs/mlp-synthetic-sgd.json unreadable");
    if (text) {
        CHECK(job_config_parse(text, len, &cfg, err, sizeof err) == 0, "%s", err);
        CHECK(!strcmp(cfg.model.arch, "mlp") && !strcmp(cfg.data.dataset, "synthetic"), "mlp");
        CHECK(cfg.epochs == 2 && cfg.data.train_limit > 0, "small and short");
        free(text);
    }
}

static void test_defaults(void)
{
    job_config cfg;
    char err[1024];

    CHECK(parse("{\"model\": {\"arch\": \"wrn\"}, " DATA ", \"algorithm\": {\"name\": \"parle\"}}",
                &cfg, err, sizeof err) == 0,
          "%s", err);
    CHECK(!strcmp(cfg.name, "wrn-synthetic-parle"), "%s", cfg.name);
    CHECK(cfg.model.depth == 16 && cfg.model.width == 4, "wrn %d-%d", cfg.model.depth,
          cfg.model.width);
    CHECK(cfg.model.dropout == -1 && cfg.model.classes == 0, "dropout, classes");
    CHECK(!strcmp(cfg.data.root, "") && cfg.data.train_limit == 0 && cfg.data.test_limit == 0,
          "data");
    CHECK(!strcmp(cfg.data.normalize, "none") && !cfg.data.augment &&
              !strcmp(cfg.data.sampling, "shuffle") && !cfg.data.split,
          "data options");
    CHECK(cfg.algorithm.replicas == 1 && cfg.algorithm.L == 25, "n %d L %d",
          cfg.algorithm.replicas, cfg.algorithm.L);
    CHECK(cfg.algorithm.gamma == 0.01 && cfg.algorithm.rho == 1 && cfg.algorithm.gamma_max == 1 &&
              cfg.algorithm.rho_max == 10 && cfg.algorithm.growth == 0.5 &&
              cfg.algorithm.alpha == 0.75 && cfg.algorithm.inner_lr == 0,
          "parle constants");
    CHECK(!strcmp(cfg.algorithm.init, "independent"), "%s", cfg.algorithm.init);
    CHECK(cfg.optim.lr == 0.1 && cfg.optim.nschedule == 0 && cfg.optim.momentum == 0.9 &&
              cfg.optim.nesterov && cfg.optim.batch == 128,
          "optim");
    CHECK(cfg.optim.weight_decay == 5e-4, "wrn weight decay %g", cfg.optim.weight_decay);
    CHECK(cfg.epochs == 10 && cfg.seed == 42 && !strcmp(cfg.devices, "cpu"), "top level");
    CHECK(cfg.checkpoint.every_epochs == 1 && cfg.checkpoint.keep == 2, "checkpoint");
    CHECK(!strcmp(cfg.eval.bn, "recompute") && cfg.eval.every_passes == 0 && cfg.log_every == 20,
          "eval, log_every");

    CHECK(parse("{\"model\": {\"arch\": \"allcnn\"}, \"data\": {\"dataset\": \"fashion-mnist\"}, "
                "\"algorithm\": {\"name\": \"entropy-sgd\"}}",
                &cfg, err, sizeof err) == 0,
          "%s", err);
    CHECK(cfg.optim.weight_decay == 1e-3, "allcnn weight decay %g", cfg.optim.weight_decay);
    CHECK(!strcmp(cfg.data.root, "/usr/share/datasets/fashion-mnist"), "%s", cfg.data.root);
    CHECK(cfg.algorithm.L == 25 && cfg.algorithm.rho == 0, "entropy-sgd L %d rho %g",
          cfg.algorithm.L, cfg.algorithm.rho);
    CHECK(!strcmp(cfg.algorithm.init, "independent"), "%s", cfg.algorithm.init);

    CHECK(parse("{" MODEL ", " DATA ", \"algorithm\": {\"name\": \"elastic-sgd\", \"replicas\": 4}}",
                &cfg, err, sizeof err) == 0,
          "%s", err);
    CHECK(cfg.algorithm.L == 0 && cfg.algorithm.replicas == 4, "elastic-sgd L %d",
          cfg.algorithm.L);
    CHECK(!strcmp(cfg.algorithm.init, "independent"), "%s", cfg.algorithm.init);
    CHECK(cfg.optim.weight_decay == 0, "lenet weight decay %g", cfg.optim.weight_decay);

    CHECK(parse("{" BASE "}", &cfg, err, sizeof err) == 0, "%s", err);
    CHECK(cfg.algorithm.L == 0 && !strcmp(cfg.algorithm.init, "same"), "sgd L %d init %s",
          cfg.algorithm.L, cfg.algorithm.init);

    /* Values at the edges of their ranges, and the other legal forms. */
    const char *valid[] = {
        JOB("\"seed\": 0, \"checkpoint\": {\"every_epochs\": 0, \"keep\": 1}"),
        JOB("\"seed\": 9007199254740992, \"devices\": \"auto\""),
        JOB("\"devices\": \"0,1,7\""),
        JOB("\"devices\": \"cuda:0,62\", \"precision\": \"fp32\", \"deterministic\": true, "
            "\"conv_algorithms\": \"heuristic\", \"priority\": -1000, "
            "\"gpu_batchnorm\": \"split\""),
        JOB("\"devices\": \"gpu\", \"precision\": \"bf16\", \"comm\": {\"timeout_s\": 0.5}"),
        JOB("\"optim\": {\"lr_schedule\": [], \"momentum\": 0, \"batch\": 4096}"),
        "{\"model\": {\"arch\": \"wrn\", \"depth\": 28, \"width\": 10, \"dropout\": 0}, " DATA
        ", " SGD "}",
        "{" MODEL ", \"data\": {\"dataset\": \"cifar100\", \"root\": \"/d\", \"normalize\": "
        "\"zca\", \"augment\": true, \"sampling\": \"replacement\", \"split\": true}, "
        "\"algorithm\": {\"name\": \"parle\", \"replicas\": 64, \"L\": 0, \"alpha\": 0, "
        "\"init\": \"same\", \"gamma\": 0, \"rho\": 0}}",
        JOB("\"devices\": \"rank0:cpu\""),
        JOB("\"devices\": \"rank0:cpu,rank63:cpu,rank2:cpu\""),
        JOB("\"devices\": \"gpu\", \"gpu_share\": 0.25"),
        JOB("\"devices\": \"cpu:3\""),
    };
    for (size_t i = 0; i < sizeof valid / sizeof valid[0]; i++)
        CHECK(parse(valid[i], &cfg, err, sizeof err) == 0, "valid[%zu]: %s", i, err);
    CHECK(parse(valid[1], &cfg, err, sizeof err) == 0 && cfg.seed == 9007199254740992ull, "seed");
    CHECK(parse(valid[3], &cfg, err, sizeof err) == 0 && cfg.deterministic &&
              job_precision(&cfg) == PRECISION_FP32 &&
              strcmp(cfg.conv_algorithms, "heuristic") == 0 && cfg.priority == -1000 &&
              strcmp(cfg.gpu_batchnorm, "split") == 0,
          "precision fp32, deterministic, conv_algorithms, priority, gpu_batchnorm");
    CHECK(parse(valid[4], &cfg, err, sizeof err) == 0 && cfg.comm.timeout_s == 0.5 &&
              job_precision(&cfg) == PRECISION_BF16, "precision bf16, comm.timeout_s");
    CHECK(parse(valid[0], &cfg, err, sizeof err) == 0 && !cfg.deterministic &&
              cfg.comm.timeout_s == 1800 && job_precision(&cfg) == PRECISION_TF32 &&
              strcmp(cfg.conv_algorithms, "auto") == 0 && cfg.priority == 0 &&
              strcmp(cfg.gpu_batchnorm, "classic") == 0 &&
              cfg.gpu_share == 1.0,
          "defaults");
    CHECK(parse(valid[sizeof valid / sizeof valid[0] - 2], &cfg, err, sizeof err) == 0 &&
              cfg.gpu_share == 0.25, "gpu_share");
    CHECK(parse(valid[sizeof valid / sizeof valid[0] - 1], &cfg, err, sizeof err) == 0 &&
              cfg.device_spec.kind == DEVICES_CPU && cfg.device_spec.cores == 3,
          "cpu:3");
    CHECK(parse(valid[6], &cfg, err, sizeof err) == 0 && cfg.model.depth == 28 &&
              cfg.model.width == 10 && cfg.model.dropout == 0,
          "wrn-28-10");
}

static void test_all_errors_at_once(void)
{
    job_config cfg;
    char err[2048];
    const char *json = "{\"model\": {\"arch\": \"lenet\", \"foo\": 1}, "
                       "\"data\": {\"dataset\": \"synthetic\", \"split\": 3}, "
                       "\"algorithm\": {\"name\": \"parle\", \"L\": -2}, "
                       "\"optim\": {\"lr\": -1, \"lr_schedule\": [[3, 0.1], [2, 0.1]]}, "
                       "\"epochs\": 0, \"bogus\": true}";
    const char *want[] = {"model.foo: unknown field", "data.split: must be a boolean",
                          "algorithm.L: must be an integer", "optim.lr: must be > 0",
                          "optim.lr_schedule[1]: epochs must increase",
                          "epochs: must be an integer", "bogus: unknown field"};
    int n = (int)(sizeof want / sizeof want[0]);
    CHECK(parse(json, &cfg, err, sizeof err) == -1, "should fail");
    for (int i = 0; i < n; i++)
        CHECK(strstr(err, want[i]), "missing \"%s\" in \"%s\"", want[i], err);
    CHECK(count_messages(err) == n, "%d messages in \"%s\"", count_messages(err), err);
}

static void test_truncation(void)
{
    /* Many errors: every unknown field is one. */
    char json[8192];
    size_t at = (size_t)snprintf(json, sizeof json, "{" BASE);
    for (int i = 0; i < 200; i++)
        at += (size_t)snprintf(json + at, sizeof json - at, ", \"unknown_%d\": %d", i, i);
    snprintf(json + at, sizeof json - at, "}");

    job_config cfg;
    static char full[65536];
    CHECK(parse(json, &cfg, full, sizeof full) == -1, "should fail");
    size_t full_len = strlen(full);
    CHECK(full_len > 4000 && strstr(full, "unknown_199: unknown field"), "full list %zu", full_len);

    char buf[600];
    for (size_t errlen = 0; errlen < 520; errlen++) {
        memset(buf, '#', sizeof buf);
        CHECK(parse(json, &cfg, buf, errlen) == -1, "errlen %zu", errlen);
        int guard_ok = 1;
        for (size_t i = errlen; i < sizeof buf; i++)
            guard_ok &= buf[i] == '#';
        CHECK(guard_ok, "errlen %zu: wrote past the buffer", errlen);
        if (errlen == 0)
            continue;
        size_t len = strnlen(buf, errlen);
        CHECK(len == errlen - 1, "errlen %zu: length %zu", errlen, len);
        size_t dots = errlen - 1 < 3 ? errlen - 1 : 3;
        CHECK(!memcmp(buf + len - dots, "...", dots), "errlen %zu: \"%s\"", errlen, buf);
        CHECK(!memcmp(buf, full, len - dots), "errlen %zu: not a prefix: \"%s\"", errlen, buf);
    }
    CHECK(parse(json, &cfg, NULL, 0) == -1, "no error buffer");
}

/* The lr of epoch e by a second route: walk the schedule from its end. */
static double lr_reference(const double (*schedule)[2], int n, int epoch)
{
    double lr = schedule[n - 1][1];
    for (int i = n - 1; i >= 0; i--)
        if (epoch < schedule[i][0])
            lr = schedule[i][1];
    return lr;
}

static void test_lr_at_epoch(void)
{
    job_config cfg;
    char err[1024];
    CHECK(parse(JOB("\"optim\": {\"lr\": 0.3}"), &cfg, err, sizeof err) == 0, "%s", err);
    CHECK(job_lr_at_epoch(&cfg, 0) == 0.3 && job_lr_at_epoch(&cfg, 50) == 0.3, "no schedule");

    CHECK(parse(JOB("\"optim\": {\"lr_schedule\": [[1, 0.1], [2, 0.02], [5, 0.004]]}"), &cfg, err,
                sizeof err) == 0,
          "%s", err);
    const double want[] = {0.1, 0.02, 0.004, 0.004, 0.004, 0.004, 0.004};
    for (int e = 0; e < 7; e++)
        CHECK(job_lr_at_epoch(&cfg, e) == want[e], "epoch %d: %g", e, job_lr_at_epoch(&cfg, e));

    /* Random schedules, written as JSON and parsed back. */
    for (int trial = 0; trial < 200; trial++) {
        int n = 1 + (int)test_uniform(0, JOB_MAX_SCHEDULE);
        double schedule[JOB_MAX_SCHEDULE][2];
        char json[2048], entries[1536];
        size_t at = 0;
        int epoch = 0;
        for (int i = 0; i < n; i++) {
            epoch += 1 + (int)test_uniform(0, 5);
            schedule[i][0] = epoch;
            schedule[i][1] = test_uniform(1e-4, 1);
            at += (size_t)snprintf(entries + at, sizeof entries - at, "%s[%d, %.17g]", i ? ", " : "",
                                   epoch, schedule[i][1]);
        }
        snprintf(json, sizeof json, JOB("\"optim\": {\"lr_schedule\": [%s]}"), entries);
        CHECK(parse(json, &cfg, err, sizeof err) == 0, "%s", err);
        CHECK(cfg.optim.nschedule == n, "n %d", cfg.optim.nschedule);
        for (int e = 0; e <= epoch + 2; e++)
            CHECK(job_lr_at_epoch(&cfg, e) == lr_reference(schedule, n, e), "trial %d epoch %d",
                  trial, e);
    }
}

/* Mangled job files: each mutation must end in 0 or -1 with a message, never
 * a crash or a read past the given length (ASan watches the exact-size copy). */
static void test_mutations(void)
{
    const char *names[] = {"lenet-fmnist-sgd.json", "lenet-fmnist-parle.json",
                           "mlp-synthetic-sgd.json"};
    job_config cfg;
    char err[512];
    int failed_parses = 0, runs = 0;
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        size_t len;
        char *text = read_text(names[k], &len);
        if (!text)
            continue;
        for (int trial = 0; trial < 3000; trial++) {
            char *m = malloc(len + 1);
            memcpy(m, text, len);
            size_t mlen = len;
            int edits = 1 + (int)test_uniform(0, 4);
            for (int e = 0; e < edits && mlen > 0; e++) {
                size_t pos = (size_t)test_uniform(0, (double)mlen);
                switch ((int)test_uniform(0, 4)) {
                case 0: /* delete a byte */
                    memmove(m + pos, m + pos + 1, mlen - pos - 1);
                    mlen--;
                    break;
                case 1: /* flip a byte to anything */
                    m[pos] = (char)(int)test_uniform(0, 256);
                    break;
                case 2: /* truncate */
                    mlen = pos;
                    break;
                default: /* a structural character somewhere */
                    m[pos] = "{}[]\",:0-e."[(int)test_uniform(0, 11)];
                }
            }
            char *exact = malloc(mlen ? mlen : 1);
            memcpy(exact, m, mlen);
            int rc = job_config_parse(exact, mlen, &cfg, err, sizeof err);
            runs++;
            CHECK(rc == 0 || (rc == -1 && err[0]), "rc %d err \"%s\"", rc, err);
            if (rc == 0)
                CHECK(cfg.epochs >= 1 && cfg.algorithm.replicas >= 1 && cfg.optim.batch >= 1 &&
                          cfg.optim.lr > 0 && cfg.model.arch[0] && cfg.name[0],
                      "accepted an invalid job");
            failed_parses += rc != 0;
            free(exact);
            free(m);
        }
        free(text);
    }
    CHECK(runs == 9000 && failed_parses > runs / 2, "%d of %d mutations rejected", failed_parses,
          runs);
}

int main(void)
{
    test_init("jobconfig");
    test_shipped_configs();
    test_defaults();
    test_all_errors_at_once();
    test_truncation();
    test_lr_at_epoch();
    test_mutations();
    return test_main_end();
}
