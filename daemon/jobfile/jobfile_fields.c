/* The job file's fields: every one with its type and range (fields[]),
 * the choices of its string fields, and the list of problems found while
 * reading them (report), each by its dotted path (docs/config.md). */
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "dataset_table.h"
#include "jobfile_impl.h"

#define SEED_MAX 9007199254740992.0 /* 2^53: every integer up to it is exact in a double */

static const char *const archs[] = {"lenet", "allcnn", "wrn", "mlp", NULL};
static const char *const normalizations[] = {"none", "channel", "zca", NULL};
static const char *const samplings[] = {"shuffle", "replacement", NULL};
static const char *const graphs[] = {"ring", "bipartite-exponential", NULL};
static const char *const inits[] = {"same", "independent", NULL};
static const char *const variants[] = {"sync", "async", NULL};
static const char *const interpolations[] = {"constant", "clock", "loss", NULL};
static const char *const bn_modes[] = {"recompute", "average", "replica0", NULL};
static const char *const precisions[] = {"fp32", "tf32", "bf16", NULL};
static const char *const conv_algorithm_choices[] = {"auto", "timed", "heuristic", NULL};
static const char *const gpu_batchnorms[] = {"classic", "split", NULL};
static const char *const failure_modes[] = {"fail", "reseed", NULL};

/* data.dataset's choices: the table's names, NULL-terminated, made once. */
static const char *dataset_name_list[DATASET_KINDS + 1];

static void fill_dataset_names(void)
{
    for (int i = 0; i < DATASET_KINDS; i++)
        dataset_name_list[i] = dataset_kinds[i].name;
}

const char *const *dataset_names(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, fill_dataset_names);
    return dataset_name_list;
}

#define F(path, kind, member, lo, hi, open, choices)                                          \
    {path, kind, offsetof(job_config, member), sizeof(((job_config *)0)->member), lo, hi, open, \
     choices}
#define INT(path, member, lo, hi) F(path, K_INT, member, lo, hi, 0, NULL)
#define NUM(path, member, lo, hi, open) F(path, K_NUM, member, lo, hi, open, NULL)
#define STR(path, member, choices) F(path, K_STR, member, 0, 0, 0, choices)
#define BOOL(path, member) F(path, K_BOOL, member, 0, 0, 0, NULL)

/* Every field a job file may hold; a section is any prefix before a dot. */
const field fields[] = {
    STR("name", name, NULL),
    STR("model.arch", model.arch, archs),
    INT("model.depth", model.depth, 10, 1000),
    INT("model.width", model.width, 1, 64),
    F("model.dropout", K_FLOAT, model.dropout, 0, 1, HI_OPEN, NULL),
    INT("model.classes", model.classes, 0, 100000),
    F("data.dataset", K_DATASET, data.dataset, 0, 0, 0, NULL),
    STR("data.root", data.root, NULL),
    INT("data.train_limit", data.train_limit, 0, INT_MAX),
    INT("data.test_limit", data.test_limit, 0, INT_MAX),
    STR("data.normalize", data.normalize, normalizations),
    BOOL("data.augment", data.augment),
    STR("data.sampling", data.sampling, samplings),
    BOOL("data.split", data.split),
    F("algorithm.name", K_RULE, algorithm.name, 0, 0, 0, NULL),
    INT("algorithm.replicas", algorithm.replicas, 1, 64),
    INT("algorithm.L", algorithm.L, 0, 100000),
    NUM("algorithm.gamma", algorithm.gamma, 0, INFINITY, 0),
    NUM("algorithm.rho", algorithm.rho, 0, INFINITY, 0),
    NUM("algorithm.gamma_max", algorithm.gamma_max, 0, INFINITY, 0),
    NUM("algorithm.rho_max", algorithm.rho_max, 0, INFINITY, 0),
    NUM("algorithm.growth", algorithm.growth, 0, INFINITY, 0),
    NUM("algorithm.alpha", algorithm.alpha, 0, 1, HI_OPEN),
    NUM("algorithm.inner_lr", algorithm.inner_lr, 0, INFINITY, 0),
    STR("algorithm.init", algorithm.init, inits),
    STR("algorithm.graph", algorithm.graph, graphs),
    BOOL("algorithm.mix_after_step", algorithm.mix_after_step),
    INT("algorithm.peers", algorithm.peers, 1, 6),
    INT("algorithm.synch_freq", algorithm.synch_freq, 0, 1000),
    INT("algorithm.group_size", algorithm.group_size, 1, 64),
    INT("algorithm.tau", algorithm.tau, 1, INT_MAX),
    INT("algorithm.tau_global", algorithm.tau_global, 1, INT_MAX),
    INT("algorithm.avg_size", algorithm.avg_size, 1, 100),
    NUM("algorithm.c1", algorithm.c1, 0, 1, 0),
    NUM("algorithm.c2", algorithm.c2, 0, 1, 0),
    NUM("algorithm.p1", algorithm.p1, 0, 1, 0),
    NUM("algorithm.p2", algorithm.p2, 0, 1, 0),
    NUM("algorithm.beta", algorithm.beta, 0, 1, LO_OPEN),
    STR("algorithm.variant", algorithm.variant, variants),
    NUM("algorithm.fetch_probability", algorithm.fetch_probability, 0, 1, 0),
    STR("algorithm.interpolation", algorithm.interpolation, interpolations),
    NUM("algorithm.value", algorithm.value, 0, 1, LO_OPEN),
    NUM("algorithm.divergence_threshold", algorithm.divergence_threshold, 0, INFINITY, 0),
    INT("algorithm.timeout_ms", algorithm.timeout_ms, 0, 10000000),
    NUM("algorithm.p", algorithm.p, 0, 1, 0),
    STR("algorithm.on_replica_failure", algorithm.on_replica_failure, failure_modes),
    INT("algorithm.max_reseeds", algorithm.max_reseeds, 0, 1000000),
    NUM("optim.lr", optim.lr, 0, INFINITY, LO_OPEN),
    F("optim.lr_schedule", K_SCHEDULE, optim.schedule, 0, 0, 0, NULL),
    NUM("optim.momentum", optim.momentum, 0, 1, HI_OPEN),
    BOOL("optim.nesterov", optim.nesterov),
    NUM("optim.weight_decay", optim.weight_decay, 0, INFINITY, 0),
    INT("optim.batch", optim.batch, 1, 4096),
    INT("epochs", epochs, 1, 100000),
    F("seed", K_SEED, seed, 0, SEED_MAX, 0, NULL),
    STR("devices", devices, NULL),
    STR("precision", precision, precisions),
    BOOL("deterministic", deterministic),
    STR("conv_algorithms", conv_algorithms, conv_algorithm_choices),
    STR("gpu_batchnorm", gpu_batchnorm, gpu_batchnorms),
    INT("priority", priority, JOB_PRIORITY_MIN, JOB_PRIORITY_MAX),
    NUM("gpu_share", gpu_share, 0.01, 1, 0),
    F("time_limit", K_DURATION, time_limit, 0, 0, 0, NULL),
    STR("after", after, NULL),
    BOOL("after_any", after_any),
    NUM("comm.timeout_s", comm.timeout_s, 0, 1e7, LO_OPEN),
    INT("checkpoint.every_epochs", checkpoint.every_epochs, 0, INT_MAX),
    INT("checkpoint.keep", checkpoint.keep, 1, 1000),
    STR("eval.bn", eval.bn, bn_modes),
    NUM("eval.every_passes", eval.every_passes, 0, 1e6, 0),
    INT("log_every", log_every, 1, INT_MAX),
};
_Static_assert(sizeof fields / sizeof fields[0] == NFIELDS,
               "NFIELDS (jobfile_impl.h) counts fields[]");

__attribute__((format(printf, 2, 3))) void report(parser *p, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    p->nerrors++;
    if (p->full || p->errlen == 0)
        return;
    const char *sep = p->used ? "; " : "";
    size_t need = strlen(sep) + strlen(msg);
    snprintf(p->err + p->used, p->errlen - p->used, "%s%s", sep, msg);
    if (p->used + need < p->errlen) {
        p->used += need;
        return;
    }
    /* Did not fit: snprintf kept what did; its last bytes become "...". */
    size_t end = p->errlen - 1, dots = end < 3 ? end : 3;
    memset(p->err + end - dots, '.', dots);
    p->used = end;
    p->full = 1;
}

int field_index(const char *path)
{
    for (int i = 0; i < NFIELDS; i++)
        if (!strcmp(fields[i].path, path))
            return i;
    return -1;
}

enum rule_field state_of(const parser *p, const char *path)
{
    return p->state[field_index(path)];
}
