/* Job files: the shipped configs parse, defaults follow the arch, dataset and
 * algorithm, every kind of bad field is reported by its dotted path (all of
 * them at once), the error list truncates safely, job_lr_at_epoch follows the
 * schedule, and mangled job files never crash the parser. */
#include <stdlib.h>
#include <string.h>

#include "jobfile.h"
#include "parle_config.h"
#include "testutil.h"

/* The common valid sections, spliced into the cases below. */
#define MODEL "\"model\": {\"arch\": \"lenet\"}"
#define DATA "\"data\": {\"dataset\": \"synthetic\"}"
#define SGD "\"algorithm\": {\"name\": \"sgd\"}"
#define BASE MODEL ", " DATA ", " SGD
#define JOB(...) "{" BASE ", " __VA_ARGS__ "}"

/* Messages are joined by "; " (which also introduces an enum's known values). */
static int count_messages(const char *err)
{
    int n = *err != '\0';
    for (const char *s = err; (s = strstr(s, "; ")); s += 2)
        n += strncmp(s, "; known: ", 9) != 0;
    return n;
}

static int parse(const char *json, job_config *cfg, char *err, size_t errlen)
{
    return job_config_parse(json, strlen(json), cfg, err, errlen);
}

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

typedef struct bad_case {
    const char *json;
    const char *want; /* a substring of the error */
} bad_case;

static const bad_case bad_cases[] = {
    {JOB("\"optim\": {\"lr\": 0}"), "optim.lr: must be > 0"},
    {JOB("\"optim\": {\"lr\": \"fast\"}"), "optim.lr: must be a number"},
    {"{" MODEL ", " DATA ", \"algorithm\": {\"name\": \"parel\"}}",
     "algorithm.name: unknown \"parel\"; known: sgd, parle, elastic-sgd, entropy-sgd"},
    {"{\"model\": {\"arch\": \"lenet\", \"foo\": 1}, " DATA ", " SGD "}", "model.foo: unknown field"},
    {JOB("\"foo\": {\"bar\": 1}"), "foo: unknown field"},
    {JOB("\"Epochs\": 2"), "Epochs: unknown field"},
    {JOB("\"model.arch\": \"lenet\""), "model.arch: unknown field"},
    {JOB("\"optim\": {\"lr\": 0.1, \"x\\u0001y\": 1}"), "optim.x?y: unknown field"},
    {JOB("\"epochs\": 0"), "epochs: must be an integer in 1..100000"},
    {JOB("\"epochs\": 2.5"), "epochs: must be an integer in 1..100000"},
    {JOB("\"epochs\": \"2\""), "epochs: must be an integer in 1..100000"},
    {JOB("\"epochs\": 3e9"), "epochs: must be an integer in 1..100000"},
    {JOB("\"epochs\": 1e999"), "epochs: must be an integer in 1..100000"},
    {JOB("\"epochs\": 2, \"epochs\": 3"), "epochs: given twice"},
    {JOB("\"optim\": {\"lr_schedule\": [[2, 0.1], [1, 0.02]]}"),
     "optim.lr_schedule[1]: epochs must increase"},
    {JOB("\"optim\": {\"lr_schedule\": [[1, 0.1], [1, 0.02]]}"),
     "optim.lr_schedule[1]: epochs must increase"},
    {JOB("\"optim\": {\"lr_schedule\": [[0, 0.1]]}"),
     "optim.lr_schedule[0]: epoch must be an integer >= 1"},
    {JOB("\"optim\": {\"lr_schedule\": [[1.5, 0.1]]}"),
     "optim.lr_schedule[0]: epoch must be an integer >= 1"},
    {JOB("\"optim\": {\"lr_schedule\": [[1, 0.1], [2, -0.1]]}"),
     "optim.lr_schedule[1]: lr must be > 0"},
    {JOB("\"optim\": {\"lr_schedule\": [[1, 0.1], [2]]}"), "optim.lr_schedule[1]: must be [epoch, lr]"},
    {JOB("\"optim\": {\"lr_schedule\": [3]}"), "optim.lr_schedule[0]: must be [epoch, lr]"},
    {JOB("\"optim\": {\"lr_schedule\": 0.1}"), "optim.lr_schedule: must be an array"},
    {JOB("\"optim\": {\"lr_schedule\": [[1,1],[2,1],[3,1],[4,1],[5,1],[6,1],[7,1],[8,1],[9,1],"
         "[10,1],[11,1],[12,1],[13,1],[14,1],[15,1],[16,1],[17,1]]}"),
     "optim.lr_schedule: at most 16 entries"},
    {"{" MODEL ", \"data\": {\"dataset\": \"synthetic\", \"split\": \"yes\"}, " SGD "}",
     "data.split: must be a boolean"},
    {"{" MODEL ", \"data\": {\"dataset\": \"synthetic\", \"augment\": 1}, " SGD "}",
     "data.augment: must be a boolean"},
    {JOB("\"optim\": {\"nesterov\": null}"), "optim.nesterov: must be a boolean"},
    {JOB("\"devices\": 0"), "devices: must be a string"},
    {"{\"model\": 3, " DATA ", " SGD "}", "model: must be an object"},
    {"{" BASE ", " MODEL "}", "model: given twice"},
    {"{\"model\": {\"arch\": \"lenet\"}, \"model\": {\"arch\": \"mlp\"}, " DATA ", " SGD "}",
     "model: given twice"},
    {"{\"model\": {}, " DATA ", " SGD "}", "model.arch: required"},
    {"{" MODEL ", \"data\": {}, " SGD "}", "data.dataset: required"},
    {"{" MODEL ", " DATA "}", "algorithm.name: required"},
    {"{\"model\": {\"arch\": \"resnet\"}, " DATA ", " SGD "}", "model.arch: unknown \"resnet\"; known: lenet, allcnn, wrn, mlp"},
    {"{\"model\": {\"arch\": \"lenet\", \"depth\": 28}, " DATA ", " SGD "}",
     "model.depth: only for arch wrn"},
    {"{\"model\": {\"arch\": \"mlp\", \"width\": 2}, " DATA ", " SGD "}",
     "model.width: only for arch wrn"},
    {"{\"model\": {\"arch\": \"wrn\", \"depth\": 18}, " DATA ", " SGD "}",
     "model.depth: must be 6k+4"},
    {"{\"model\": {\"arch\": \"wrn\", \"depth\": 4}, " DATA ", " SGD "}",
     "model.depth: must be an integer in 10..1000"},
    {"{\"model\": {\"arch\": \"wrn\", \"width\": 0}, " DATA ", " SGD "}",
     "model.width: must be an integer in 1..64"},
    {"{\"model\": {\"arch\": \"lenet\", \"dropout\": 1}, " DATA ", " SGD "}",
     "model.dropout: must be in [0, 1)"},
    {"{\"model\": {\"arch\": \"lenet\", \"dropout\": 0.99999999999}, " DATA ", " SGD "}",
     "model.dropout: must be in [0, 1)"},
    {"{\"model\": {\"arch\": \"lenet\", \"dropout\": -1}, " DATA ", " SGD "}",
     "model.dropout: must be in [0, 1)"},
    {"{\"model\": {\"arch\": \"lenet\", \"classes\": -3}, " DATA ", " SGD "}",
     "model.classes: must be an integer in 0..100000"},
    {"{" MODEL ", \"data\": {\"dataset\": \"mnist\"}, " SGD "}", "data.root: required for dataset mnist"},
    {"{" MODEL ", \"data\": {\"dataset\": \"cifar10\", \"root\": \"\"}, " SGD "}",
     "data.root: required for dataset cifar10"},
    {"{" MODEL ", \"data\": {\"dataset\": \"imagenet\"}, " SGD "}",
     "data.dataset: unknown \"imagenet\"; known: mnist, fashion-mnist, cifar10, cifar100, synthetic"},
    {"{" MODEL ", \"data\": {\"dataset\": \"synthetic\", \"train_limit\": -1}, " SGD "}",
     "data.train_limit: must be an integer >= 0"},
    {"{" MODEL ", \"data\": {\"dataset\": \"synthetic\", \"normalize\": \"pca\"}, " SGD "}",
     "data.normalize: unknown \"pca\"; known: none, channel, zca"},
    {"{" MODEL ", \"data\": {\"dataset\": \"synthetic\", \"sampling\": \"random\"}, " SGD "}",
     "data.sampling: unknown \"random\"; known: shuffle, replacement"},
    {"{" MODEL ", " DATA ", \"algorithm\": {\"name\": \"parle\", \"replicas\": 0}}",
     "algorithm.replicas: must be an integer in 1..64"},
    {"{" MODEL ", " DATA ", \"algorithm\": {\"name\": \"parle\", \"replicas\": 65}}",
     "algorithm.replicas: must be an integer in 1..64"},
    {"{" MODEL ", " DATA ", \"algorithm\": {\"name\": \"sgd\", \"replicas\": 2}}",
     "algorithm.replicas: must be 1 for sgd"},
    {"{" MODEL ", " DATA ", \"algorithm\": {\"name\": \"entropy-sgd\", \"replicas\": 3}}",
     "algorithm.replicas: must be 1 for entropy-sgd"},
    {"{" MODEL ", " DATA ", \"algorithm\": {\"name\": \"sgd\", \"L\": 5}}",
     "algorithm.L: must be 0 for sgd"},
    {"{" MODEL ", " DATA ", \"algorithm\": {\"name\": \"elastic-sgd\", \"L\": 1}}",
     "algorithm.L: must be 0 for elastic-sgd"},
    {"{" MODEL ", " DATA ", \"algorithm\": {\"name\": \"parle\", \"L\": -1}}",
     "algorithm.L: must be an integer in 0..100000"},
    {"{" MODEL ", " DATA ", \"algorithm\": {\"name\": \"entropy-sgd\", \"rho\": 1}}",
     "algorithm.rho: must be 0 for entropy-sgd"},
    {"{" MODEL ", " DATA ", \"algorithm\": {\"name\": \"parle\", \"alpha\": 1}}",
     "algorithm.alpha: must be in [0, 1)"},
    {"{" MODEL ", " DATA ", \"algorithm\": {\"name\": \"sgd\", \"gamma\": -0.1}}",
     "algorithm.gamma: must be >= 0"},
    {"{" MODEL ", " DATA ", \"algorithm\": {\"name\": \"parle\", \"gamma\": 2}}",
     "algorithm.gamma_max: must be >= algorithm.gamma"},
    {"{" MODEL ", " DATA ", \"algorithm\": {\"name\": \"parle\", \"rho_max\": 0.5}}",
     "algorithm.rho_max: must be >= algorithm.rho"},
    {"{" MODEL ", " DATA ", \"algorithm\": {\"name\": \"parle\", \"growth\": -1}}",
     "algorithm.growth: must be >= 0"},
    {"{" MODEL ", " DATA ", \"algorithm\": {\"name\": \"parle\", \"inner_lr\": -1}}",
     "algorithm.inner_lr: must be >= 0"},
    {"{" MODEL ", " DATA ", \"algorithm\": {\"name\": \"parle\", \"init\": \"random\"}}",
     "algorithm.init: unknown \"random\"; known: same, independent"},
    {JOB("\"optim\": {\"momentum\": 1}"), "optim.momentum: must be in [0, 1)"},
    {JOB("\"optim\": {\"weight_decay\": -1e-4}"), "optim.weight_decay: must be >= 0"},
    {JOB("\"optim\": {\"batch\": 0}"), "optim.batch: must be an integer in 1..4096"},
    {JOB("\"optim\": {\"batch\": 4097}"), "optim.batch: must be an integer in 1..4096"},
    {JOB("\"seed\": -1"), "seed: must be an integer in 0..9007199254740992"},
    {JOB("\"seed\": 1.5"), "seed: must be an integer in 0..9007199254740992"},
    {JOB("\"seed\": \"42\""), "seed: must be an integer in 0..9007199254740992"},
    {JOB("\"seed\": 1e17"), "seed: must be an integer in 0..9007199254740992"},
    {JOB("\"devices\": \"gpus\""), "devices: \"gpus\" is not"},
    {JOB("\"devices\": \"cuda:\""), "devices: \"cuda:\" is not"},
    {JOB("\"devices\": \"cuda:1,1\""), "devices: \"cuda:1,1\" is not"},
    {JOB("\"devices\": \"63\""), "devices: \"63\" is not"},
    {JOB("\"precision\": \"fp16\""), "precision: unknown \"fp16\"; known: fp32, tf32, bf16"},
    {JOB("\"deterministic\": 1"), "deterministic: must be a boolean"},
    {JOB("\"priority\": 1001"), "priority: must be an integer in -1000..1000"},
    {JOB("\"gpu_share\": 0"), "gpu_share: must be in [0.01, 1]"},
    {JOB("\"gpu_share\": 1e-10"), "gpu_share: must be in [0.01, 1]"},
    {JOB("\"gpu_share\": 1.5"), "gpu_share: must be in [0.01, 1]"},
    {JOB("\"priority\": 0.5"), "priority: must be an integer in -1000..1000"},
    {JOB("\"conv_algorithms\": \"fastest\""),
     "conv_algorithms: unknown \"fastest\"; known: auto, timed, heuristic"},
    {JOB("\"gpu_batchnorm\": \"cudnn\""), "gpu_batchnorm: unknown \"cudnn\"; known: classic, split"},
    {JOB("\"comm\": {\"timeout_s\": 0}"), "comm.timeout_s: must be"},
    {JOB("\"devices\": \"0,,1\""), "devices: \"0,,1\" is not"},
    {JOB("\"devices\": \"0,0\""), "devices: \"0,0\" is not"},
    {JOB("\"devices\": \"1,\""), "devices: \"1,\" is not"},
    {JOB("\"devices\": \"\""), "devices: \"\" is not"},
    {JOB("\"devices\": \"256\""), "devices: \"256\" is not"},
    {JOB("\"devices\": \"rank1:cpu\""), "devices: \"rank1:cpu\": must include rank0"},
    {JOB("\"devices\": \"cpu:0\""), "devices: \"cpu:0\": cpu:K takes K of the daemon's cores, K in 1..4096"},
    {JOB("\"devices\": \"cpu:\""), "devices: \"cpu:\": cpu:K takes K"},
    {JOB("\"devices\": \"cpu:2x\""), "devices: \"cpu:2x\": cpu:K takes K"},
    {JOB("\"devices\": \"cpu:99999999999\""), "devices: \"cpu:99999999999\": cpu:K takes K"},
    {JOB("\"devices\": \"rank0:cpu,rank0:cpu\""), "devices: \"rank0:cpu,rank0:cpu\": rank0 is named twice"},
    {JOB("\"devices\": \"rank0:cpu,rank64:cpu\""), "devices: \"rank0:cpu,rank64:cpu\": MPI ranks are 0..63"},
    {JOB("\"devices\": \"rank0:0\""), "devices: \"rank0:0\": rank0 must be followed by \":cpu\""},
    {JOB("\"devices\": \"rank0\""), "devices: \"rank0\": rank0 must be followed by \":cpu\""},
    {JOB("\"devices\": \"rank0:cpu,\""), "devices: \"rank0:cpu,\": ends with a comma"},
    {JOB("\"devices\": \"rank0:cpu,1\""), "devices: \"rank0:cpu,1\": expected rankN:cpu or rankN:gpu items"},
    {JOB("\"devices\": \"rank:cpu\""), "devices: \"rank:cpu\": expected rankN:cpu or rankN:gpu items"},
    {JOB("\"devices\": \"rank0:cpu\\u0001\""), "devices: byte 9 (0x01) is a control character"},
    {JOB("\"checkpoint\": {\"every_epochs\": -1}"),
     "checkpoint.every_epochs: must be an integer >= 0"},
    {JOB("\"checkpoint\": {\"keep\": 0}"), "checkpoint.keep: must be an integer in 1..1000"},
    {JOB("\"eval\": {\"bn\": \"mean\"}"), "eval.bn: unknown \"mean\"; known: recompute, average, replica0"},
    {JOB("\"eval\": {\"every_passes\": -0.5}"), "eval.every_passes: must be in [0, 1e+06]"},
    {JOB("\"log_every\": 0"), "log_every: must be an integer >= 1"},
    {JOB("\"name\": \"\""), "name: must be non-empty printable text"},
    /* Out of range, not a divisor: reported once, never divided by. */
    {"{" MODEL ", " DATA ", \"algorithm\": {\"name\": \"lsgd\", \"replicas\": 4, "
     "\"group_size\": 0}}", "algorithm.group_size: must be an integer in 1..64"},
    {JOB("\"name\": \"a\\nb\""), "name: byte 1 (0x0a) is a control character"},
    {"{\"model\": }", "JSON syntax error at byte 10"},
    {"", "JSON syntax error at byte 0"},
    {"{" BASE "} {}", "text after the job"},
    {"[1, 2]", "job: must be a JSON object"},
    {"\"job\"", "job: must be a JSON object"},
};

static void test_bad_fields(void)
{
    job_config cfg;
    char err[2048];
    for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
        const bad_case *c = &bad_cases[i];
        int rc = parse(c->json, &cfg, err, sizeof err);
        CHECK(rc == -1 && strstr(err, c->want), "case %zu: want \"%s\", got rc %d \"%s\"", i,
              c->want, rc, err);
        /* One problem, one message: nothing else piles on. */
        CHECK(count_messages(err) == 1, "case %zu: extra errors in \"%s\"", i, err);
    }

    /* Strings longer than their buffers. */
    char big[4096], json[8192];
    memset(big, 'a', 3000);
    big[3000] = '\0';
    snprintf(json, sizeof json, JOB("\"name\": \"%.200s\""), big);
    CHECK(parse(json, &cfg, err, sizeof err) == -1 && strstr(err, "name: too long (at most 127 bytes)"),
          "%s", err);
    snprintf(json, sizeof json, "{" MODEL ", \"data\": {\"dataset\": \"cifar10\", \"root\": \"%s\"}, "
             SGD "}", big);
    CHECK(parse(json, &cfg, err, sizeof err) == -1 &&
              strstr(err, "data.root: too long (at most 1023 bytes)") && count_messages(err) == 1,
          "%s", err);
    snprintf(json, sizeof json, JOB("\"devices\": \"%.64s\""), big);
    CHECK(parse(json, &cfg, err, sizeof err) == -1 && strstr(err, "devices: too long (at most 63 bytes)"),
          "%s", err);
    /* An unknown key is shown clipped. */
    snprintf(json, sizeof json, JOB("\"%s\": 1"), big);
    CHECK(parse(json, &cfg, err, sizeof err) == -1 && strstr(err, "...: unknown field") &&
              strlen(err) < 100,
          "%s", err);

    /* A NUL inside the given length is an error, not an early end. */
    static const char with_nul[] = "{\"epochs\": 2}\0garbage";
    CHECK(job_config_parse(with_nul, sizeof with_nul - 1, &cfg, err, sizeof err) == -1 &&
              strstr(err, "NUL byte"),
          "%s", err);
    /* Only len bytes are read: a valid job followed by junk beyond len parses. */
    static const char prefix[] = "{" BASE "}xxxx";
    CHECK(job_config_parse(prefix, sizeof prefix - 5, &cfg, err, sizeof err) == 0, "%s", err);
}

/* Text fields reach logs and terminals: control characters and invalid
 * UTF-8 are refused naming the field and the byte; printable UTF-8 passes. */
static void test_text_fields(void)
{
    /* \\n, \\t and \\uNNNN are JSON escapes that cJSON decodes; \xNN are raw bytes. */
    static const struct {
        const char *root, *want;
    } cases[] = {
        {"/data\\n2026-11-26 parled: info: forged", "data.root: byte 5 (0x0a) is a control character"},
        {"/data/\\u001b[31mred", "data.root: byte 6 (0x1b) is a control character"},
        {"/data/\\u007f", "data.root: byte 6 (0x7f) is a control character"},
        {"/data/\\u0085", "data.root: byte 6 (0xc2) is a control character"}, /* C1 NEL */
        {"/data/\\t", "data.root: byte 6 (0x09) is a control character"},
        {"/data/\xff", "data.root: byte 6 (0xff) is not valid UTF-8"},
        {"/data/\xc0\xaf", "data.root: byte 6 (0xc0) is not valid UTF-8"},     /* overlong '/' */
        {"/data/\xed\xa0\x80", "data.root: byte 6 (0xed) is not valid UTF-8"}, /* surrogate */
        {"/data/\xe2\x82", "data.root: byte 6 (0xe2) is not valid UTF-8"},     /* cut short */
        {"/data/\xf4\x90\x80\x80", "data.root: byte 6 (0xf4) is not valid UTF-8"}, /* > U+10FFFF */
    };
    job_config cfg;
    char err[2048], json[1024];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(json, sizeof json, "{" MODEL ", \"data\": {\"dataset\": \"cifar10\", "
                 "\"root\": \"%s\"}, " SGD "}", cases[i].root);
        CHECK(parse(json, &cfg, err, sizeof err) == -1 && strstr(err, cases[i].want) &&
                  count_messages(err) == 1 && !strchr(err, '\n') && !strchr(err, 0x1b),
              "case %zu: want \"%s\", got \"%s\"", i, cases[i].want, err);
    }
    snprintf(json, sizeof json, "{" MODEL ", \"data\": {\"dataset\": \"cifar10\", "
             "\"root\": \"/données/ℝ/数据/🙂\"}, " SGD "}");
    CHECK(parse(json, &cfg, err, sizeof err) == 0 && !strcmp(cfg.data.root, "/données/ℝ/数据/🙂"),
          "printable UTF-8 refused: %s", err);
    CHECK(parse(JOB("\"devices\": \"cpu\\r\""), &cfg, err, sizeof err) == -1 &&
              strstr(err, "devices: byte 3 (0x0d) is a control character"),
          "%s", err);
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

/* The synchronous graph and leader rules (allreduce, dpsgd, sgp, osgp, lsgd). */
#define RULE(...) "{" MODEL ", " DATA ", \"algorithm\": {" __VA_ARGS__ "}}"
static const bad_case sync_rule_cases[] = {
    {RULE("\"name\": \"allreduce\", \"replicas\": 4, \"init\": \"independent\""),
     "algorithm.init: allreduce needs \"same\""},
    {RULE("\"name\": \"dpsgd\", \"replicas\": 2"),
     "algorithm.replicas: dpsgd on a ring needs >= 3 replicas, got 2"},
    {RULE("\"name\": \"dpsgd\", \"replicas\": 5, \"graph\": \"bipartite-exponential\""),
     "algorithm.replicas: dpsgd on graph bipartite-exponential needs an even number"},
    {RULE("\"name\": \"dpsgd\", \"replicas\": 4, \"graph\": \"star\""),
     "algorithm.graph: unknown \"star\"; known: ring, bipartite-exponential"},
    {RULE("\"name\": \"dpsgd\", \"replicas\": 4, \"mix_after_step\": 1"),
     "algorithm.mix_after_step: must be a boolean"},
    {RULE("\"name\": \"sgp\", \"replicas\": 1"), "algorithm.replicas: sgp needs >= 2"},
    {RULE("\"name\": \"sgp\", \"replicas\": 4, \"peers\": 3"),
     "algorithm.peers: at most 2 for 4 replicas"},
    {RULE("\"name\": \"osgp\", \"replicas\": 4, \"peers\": 0"),
     "algorithm.peers: must be an integer in 1..6"},
    {RULE("\"name\": \"osgp\", \"replicas\": 4, \"synch_freq\": -1"),
     "algorithm.synch_freq: must be an integer in 0..1000"},
    {RULE("\"name\": \"sgp\", \"replicas\": 4, \"synch_freq\": 1"),
     "algorithm.synch_freq: only for osgp, not sgp"},
    {RULE("\"name\": \"parle\", \"replicas\": 4, \"graph\": \"ring\""),
     "algorithm.graph: only for dpsgd, not parle"},
    {RULE("\"name\": \"lsgd\", \"replicas\": 6, \"group_size\": 4"),
     "algorithm.group_size: must divide algorithm.replicas (6), got 4"},
    {RULE("\"name\": \"lsgd\", \"replicas\": 4, \"c1\": 1.5"),
     "algorithm.c1: must be in [0, 1]"},
    {RULE("\"name\": \"lsgd\", \"replicas\": 4, \"p2\": -0.1"),
     "algorithm.p2: must be in [0, 1]"},
    {RULE("\"name\": \"lsgd\", \"replicas\": 4, \"tau\": 0"),
     "algorithm.tau: must be an integer >= 1"},
    {RULE("\"name\": \"lsgd\", \"replicas\": 4, \"avg_size\": 101"),
     "algorithm.avg_size: must be an integer in 1..100"},
    {RULE("\"name\": \"dpsgd\", \"replicas\": 4, \"L\": 5"), "algorithm.L: must be 0 for dpsgd"},
};

static void test_sync_rules(void)
{
    job_config cfg;
    char err[2048];
    for (size_t i = 0; i < sizeof sync_rule_cases / sizeof sync_rule_cases[0]; i++) {
        const bad_case *c = &sync_rule_cases[i];
        int rc = parse(c->json, &cfg, err, sizeof err);
        CHECK(rc == -1 && strstr(err, c->want) && count_messages(err) == 1,
              "sync rule case %zu: want \"%s\", got rc %d \"%s\"", i, c->want, rc, err);
    }
    /* Defaults: every rule but the Parle family starts equal; lsgd's tau and groups. */
    CHECK(parse(RULE("\"name\": \"lsgd\", \"replicas\": 4"), &cfg, err, sizeof err) == 0 &&
              !strcmp(cfg.algorithm.init, "same") && cfg.algorithm.tau == 256 &&
              cfg.algorithm.tau_global == 256 && cfg.algorithm.group_size == 4 &&
              cfg.algorithm.avg_size == 10 && cfg.algorithm.c1 == 0.5 && cfg.algorithm.c2 == 0.5 &&
              cfg.algorithm.p1 == 0 && cfg.algorithm.p2 == 0 && cfg.algorithm.L == 0,
          "lsgd defaults: %s", err);
    CHECK(parse(RULE("\"name\": \"dpsgd\", \"replicas\": 3"), &cfg, err, sizeof err) == 0 &&
              !strcmp(cfg.algorithm.graph, "ring") && !cfg.algorithm.mix_after_step &&
              !strcmp(cfg.algorithm.init, "same"),
          "dpsgd defaults: %s", err);
    CHECK(parse(RULE("\"name\": \"osgp\", \"replicas\": 8, \"peers\": 3, \"synch_freq\": 2"),
                &cfg, err, sizeof err) == 0 && cfg.algorithm.peers == 3 &&
              cfg.algorithm.synch_freq == 2,
          "osgp: %s", err);
    CHECK(parse(RULE("\"name\": \"dpsgd\", \"replicas\": 2, \"graph\": "
                     "\"bipartite-exponential\", \"mix_after_step\": true"),
                &cfg, err, sizeof err) == 0 && cfg.algorithm.mix_after_step,
          "dpsgd bipartite n = 2: %s", err);
    CHECK(parse(RULE("\"name\": \"allreduce\", \"replicas\": 4"), &cfg, err, sizeof err) == 0 &&
              !strcmp(cfg.algorithm.init, "same"),
          "allreduce: %s", err);
    CHECK(parse(RULE("\"name\": \"elastic-sgd\", \"replicas\": 4"), &cfg, err, sizeof err) == 0 &&
              !strcmp(cfg.algorithm.init, "independent"),
          "elastic-sgd starts independent: %s", err);
}

/* The asynchronous rules and EASGD. */
static const bad_case async_rule_cases[] = {
    {RULE("\"name\": \"gossip\", \"replicas\": 1"), "algorithm.replicas: gossip needs >= 2"},
    {RULE("\"name\": \"gosgd\""), "algorithm.replicas: gosgd needs >= 2 replicas, got 1"},
    {RULE("\"name\": \"adpsgd\", \"replicas\": 3"),
     "algorithm.replicas: adpsgd pairs replicas on a bipartite graph"},
    {RULE("\"name\": \"easgd\", \"replicas\": 4, \"beta\": 1.2"),
     "algorithm.beta: must be in (0, 1]"},
    {RULE("\"name\": \"easgd\", \"replicas\": 4, \"rho\": 5"),
     "algorithm.rho: easgd needs beta = replicas * lr * rho in (0, 1]"},
    {RULE("\"name\": \"easgd\", \"replicas\": 4, \"rho\": 1, \"beta\": 0.4"),
     "algorithm.rho: give easgd either beta or rho"},
    {RULE("\"name\": \"easgd\", \"replicas\": 4, \"variant\": \"hogwild\""),
     "algorithm.variant: unknown \"hogwild\"; known: sync, async"},
    {RULE("\"name\": \"gossip\", \"replicas\": 4, \"interpolation\": \"max\""),
     "algorithm.interpolation: unknown \"max\"; known: constant, clock, loss"},
    {RULE("\"name\": \"gossip\", \"replicas\": 4, \"fetch_probability\": 1.5"),
     "algorithm.fetch_probability: must be in [0, 1]"},
    {RULE("\"name\": \"gossip\", \"replicas\": 4, \"value\": 0"),
     "algorithm.value: must be in (0, 1]"},
    {RULE("\"name\": \"gossip\", \"replicas\": 4, \"timeout_ms\": -1"),
     "algorithm.timeout_ms: must be an integer in 0..10000000"},
    {RULE("\"name\": \"gossip\", \"replicas\": 4, \"divergence_threshold\": -1"),
     "algorithm.divergence_threshold: must be >= 0"},
    {RULE("\"name\": \"gosgd\", \"replicas\": 4, \"p\": 2"), "algorithm.p: must be in [0, 1]"},
    {RULE("\"name\": \"adpsgd\", \"replicas\": 4, \"p\": 0.1"),
     "algorithm.p: only for gosgd, not adpsgd"},
    {RULE("\"name\": \"gosgd\", \"replicas\": 4, \"tau\": 3"),
     "algorithm.tau: only for lsgd easgd, not gosgd"},
};

static void test_async_rules(void)
{
    job_config cfg;
    char err[2048];
    for (size_t i = 0; i < sizeof async_rule_cases / sizeof async_rule_cases[0]; i++) {
        const bad_case *c = &async_rule_cases[i];
        int rc = parse(c->json, &cfg, err, sizeof err);
        CHECK(rc == -1 && strstr(err, c->want) && count_messages(err) == 1,
              "async rule case %zu: want \"%s\", got rc %d \"%s\"", i, c->want, rc, err);
    }
    CHECK(parse(RULE("\"name\": \"easgd\", \"replicas\": 4"), &cfg, err, sizeof err) == 0 &&
              cfg.algorithm.tau == 10 && cfg.algorithm.beta == 0.43 &&
              !strcmp(cfg.algorithm.variant, "sync") && !strcmp(cfg.algorithm.init, "same"),
          "easgd defaults: %s", err);
    /* rho as in the paper: beta = n lr rho (lr 0.1 by default). */
    CHECK(parse(RULE("\"name\": \"easgd\", \"replicas\": 4, \"rho\": 2"), &cfg, err,
                sizeof err) == 0 && fabs(cfg.algorithm.beta - 0.8) < 1e-12,
          "easgd rho: %s (beta %g)", err, cfg.algorithm.beta);
    CHECK(parse(RULE("\"name\": \"gossip\", \"replicas\": 2"), &cfg, err, sizeof err) == 0 &&
              cfg.algorithm.fetch_probability == 1 && cfg.algorithm.value == 0.5 &&
              !strcmp(cfg.algorithm.interpolation, "constant") &&
              cfg.algorithm.divergence_threshold == 0 && cfg.algorithm.timeout_ms == 2500,
          "gossip defaults: %s", err);
    CHECK(parse(RULE("\"name\": \"gosgd\", \"replicas\": 3"), &cfg, err, sizeof err) == 0 &&
              cfg.algorithm.p == 0.01,
          "gosgd defaults: %s", err);
    CHECK(parse(RULE("\"name\": \"adpsgd\", \"replicas\": 2"), &cfg, err, sizeof err) == 0,
          "adpsgd n = 2: %s", err);
}

/* The ranks a `devices` names, against the bits written out by hand. */
/* conv_algorithms against precision and deterministic: "auto" times at fp32
 * and tf32 only, an explicit choice stands, deterministic never times. */
static void test_conv_algorithms(void)
{
    static const struct {
        const char *fields;
        int timed;
    } cases[] = {
        {"\"precision\": \"fp32\"", 1},
        {"\"precision\": \"tf32\"", 1},
        {"\"precision\": \"bf16\"", 0},
        {"\"precision\": \"bf16\", \"conv_algorithms\": \"auto\"", 0},
        {"\"precision\": \"tf32\", \"conv_algorithms\": \"auto\"", 1},
        {"\"precision\": \"bf16\", \"conv_algorithms\": \"timed\"", 1},
        {"\"precision\": \"tf32\", \"conv_algorithms\": \"heuristic\"", 0},
        {"\"precision\": \"fp32\", \"deterministic\": true", 0},
        {"\"precision\": \"bf16\", \"conv_algorithms\": \"timed\", \"deterministic\": true", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char json[512], err[512];
        job_config cfg;
        snprintf(json, sizeof json, "{" BASE ", %s}", cases[i].fields);
        CHECK(parse(json, &cfg, err, sizeof err) == 0, "conv_algorithms case %zu: %s", i, err);
        CHECK(job_times_conv_algorithms(&cfg) == cases[i].timed, "conv_algorithms case %zu (%s)",
              i, cases[i].fields);
    }
}

static void test_devices_ranks(void)
{
    static const struct { const char *s; int rc; uint64_t ranks; int gpu; } cases[] = {
        {"rank0:cpu", 1, 1, 0}, {"rank0:cpu,rank2:cpu", 1, 5, 0}, {"rank3:cpu,rank0:cpu", 1, 9, 0},
        {"rank0:cpu,rank63:cpu", 1, 1 | 1ull << 63, 0}, {"auto", 0, 0, 0}, {"cpu", 0, 0, 0},
        {"0,1", 0, 0, 0}, {"rank1:cpu", -1, 0, 0}, {"rank0:cpu,rank0:cpu", -1, 0, 0},
        {"rank0:gpu", 1, 1, 1}, {"rank2:gpu,rank0:gpu", 1, 5, 1},
        /* All on CPUs or all on GPUs; nothing but :cpu or :gpu. */
        {"rank0:gpu,rank1:cpu", -1, 0, 0}, {"rank0:cpu,rank1:gpu", -1, 0, 0},
        {"rank0:cuda:0", -1, 0, 0}, {"rank0:gpux", -1, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t ranks = 7;
        char why[200] = "";
        int rc = job_devices_ranks(cases[i].s, &ranks, why, sizeof why);
        CHECK(rc == cases[i].rc && (rc < 0 || ranks == cases[i].ranks) && (rc >= 0 || *why),
              "%s: rc %d ranks %#llx (%s)", cases[i].s, rc, (unsigned long long)ranks, why);
        job_device_spec spec = {.ids = 1};
        if (rc == 1)
            CHECK(job_devices_read(cases[i].s, &spec, why, sizeof why) == 0 &&
                      spec.kind == (cases[i].gpu ? DEVICES_GPU : DEVICES_CPU) && !spec.ids,
                  "%s is not a %s job", cases[i].s, cases[i].gpu ? "GPU" : "CPU");
        if (rc < 0 && strstr(cases[i].s, ":gpu") && strstr(cases[i].s, ":cpu"))
            CHECK(strstr(why, "CPUs everywhere or on GPUs everywhere") != NULL,
                  "%s: the mix is not named: %s", cases[i].s, why);
    }
}

/* "gpu:N" read and resolved (the daemon's candidates, a machine's lowest
 * N); time_limit's forms; after's ids. */
static void test_scheduling_fields(void)
{
    job_device_spec spec;
    char why[200] = "", err[200] = "";
    uint64_t out = 0;
    CHECK(job_devices_read("gpu:2", &spec, why, sizeof why) == 0 && spec.kind == DEVICES_GPU &&
              spec.count == 2, "gpu:2 read: %s", why);
    CHECK(job_devices_resolve(&spec, "gpu:2", 0xf, DEVICES_OF_DAEMON, &out, err, sizeof err) ==
              0 && out == 0xf, "gpu:2 on the daemon: any of its 4 GPUs (%#llx)",
          (unsigned long long)out);
    CHECK(job_devices_resolve(&spec, "gpu:2", 0xf, DEVICES_OF_MACHINE, &out, err, sizeof err) ==
              0 && out == 0x3, "gpu:2 on a machine: the first 2 (%#llx)", (unsigned long long)out);
    CHECK(job_devices_resolve(&spec, "gpu:2", 0x1, DEVICES_OF_DAEMON, &out, err, sizeof err) < 0 &&
              strstr(err, "asks for 2 GPUs, the daemon has 1"), "gpu:2 on one GPU: %s", err);
    static const char *const bad_devices[] = {"gpu:0", "gpu:", "gpu:64", "gpu:1x"};
    for (size_t i = 0; i < sizeof bad_devices / sizeof *bad_devices; i++)
        CHECK(job_devices_read(bad_devices[i], &spec, why, sizeof why) == -1 &&
                  strstr(why, "gpu:N takes any N"), "%s refused: %s", bad_devices[i], why);
    static const struct { const char *s; double seconds; } durations[] = {
        {"3600", 3600}, {"90.5", 90.5}, {"02:30:00", 9000}, {"1-12:00:00", 129600},
        {"0", 0}, {"25:00:00", -1}, {"1:2:3", 3723}, {"1:2", -1}, {"00:60:00", -1}, {"-5", -1}, {"", -1},
        {"1-", -1}, {"abc", -1}, {"99999-00:00:00", -1}};
    for (size_t i = 0; i < sizeof durations / sizeof *durations; i++) {
        double x = -7;
        const int rc = job_duration_read(durations[i].s, &x);
        CHECK(durations[i].seconds < 0 ? rc == -1 : rc == 0 && x == durations[i].seconds,
              "duration \"%s\": rc %d, %g s", durations[i].s, rc, x);
    }
    job_config cfg;
    CHECK(parse(JOB("\"time_limit\": \"1-00:00:00\", \"after\": \"j0001,s0002\", "
                    "\"after_any\": true"), &cfg, err, sizeof err) == 0 &&
              cfg.time_limit == 86400 && !strcmp(cfg.after, "j0001,s0002") && cfg.after_any,
          "time_limit, after, after_any: %s", err);
    CHECK(parse(JOB("\"time_limit\": 90"), &cfg, err, sizeof err) == 0 && cfg.time_limit == 90,
          "time_limit in seconds: %s", err);
    CHECK(parse(JOB("\"time_limit\": \"26:00:00\""), &cfg, err, sizeof err) != 0 &&
              strstr(err, "time_limit: must be seconds"), "a bad time_limit: %s", err);
    CHECK(parse(JOB("\"after\": \"j1,,j2\""), &cfg, err, sizeof err) != 0 &&
              strstr(err, "after: \"j1,,j2\": expected job ids"), "a bad after: %s", err);
    char ids[JOB_MAX_AFTER][16];
    CHECK(job_after_ids("j0003,s12", ids, why, sizeof why) == 2 && !strcmp(ids[0], "j0003") &&
              !strcmp(ids[1], "s12"), "after ids");
    CHECK(job_after_ids("j1,", ids, why, sizeof why) < 0, "a trailing comma refused");
}

int main(void)
{
    test_init("jobconfig");
    test_scheduling_fields();
    test_shipped_configs();
    test_defaults();
    test_bad_fields();
    test_text_fields();
    test_sync_rules();
    test_async_rules();
    test_all_errors_at_once();
    test_truncation();
    test_lr_at_epoch();
    test_mutations();
    test_devices_ranks();
    test_conv_algorithms();
    return test_main_end();
}
