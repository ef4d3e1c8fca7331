/* Every kind of bad field in a job file is reported by its dotted path, once
 * (one problem, one message), and text fields take printable UTF-8 only. */
#include <string.h>

#include "jobconfig_check.h"
#include "testutil.h"

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

int main(void)
{
    test_init("jobconfig_fields");
    test_bad_fields();
    test_text_fields();
    return test_main_end();
}
