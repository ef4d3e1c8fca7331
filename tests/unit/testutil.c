#include "testjob.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int test_checks, test_failures;
static uint64_t rng_state, rng_seed;
static const char *test_name;

void test_init(const char *name)
{
    const char *env = getenv("PARLE_TEST_SEED");
    rng_seed = env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)clock() << 20);
    rng_state = rng_seed ? rng_seed : 1;
    test_name = name;
    printf("%s: PARLE_TEST_SEED=%llu\n", name, (unsigned long long)rng_seed);
}

uint64_t test_seed(void) { return rng_seed; }

/* xorshift64*: test inputs only; the product uses Philox. */
static uint64_t next_u64(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}

double test_uniform(double lo, double hi)
{
    return lo + (hi - lo) * (double)(next_u64() >> 11) * (1.0 / 9007199254740992.0);
}

void test_fill_uniform(float *x, size_t n, double lo, double hi)
{
    for (size_t i = 0; i < n; i++)
        x[i] = (float)test_uniform(lo, hi);
}

int test_forget_failures(int before)
{
    int failed = test_failures > before;
    test_failures = before;
    return failed;
}

int test_main_end(void)
{
    printf("%s: %d checks, %d failed\n", test_name, test_checks, test_failures);
    return test_failures ? 1 : 0;
}

/* ---- testjob.h: jobs through the runner ---- */

void test_synthetic_job(job_config *cfg, const char *arch, int replicas, int epochs,
                        uint64_t seed)
{
    job_config_defaults(cfg);
    snprintf(cfg->model.arch, sizeof cfg->model.arch, "%s", arch);
    strcpy(cfg->data.dataset, "synthetic");
    cfg->data.train_limit = 512;
    cfg->data.test_limit = 256;
    strcpy(cfg->algorithm.name, "parle");
    cfg->algorithm.replicas = replicas;
    cfg->algorithm.L = 3;
    cfg->optim.lr = 0.05;
    cfg->optim.batch = 32;
    cfg->epochs = epochs;
    cfg->seed = seed;
}

/* Called on replica threads: the counts and the stop are atomic; the main
 * thread reads the rest after run_job returns. */
static void watch_event(void *user, const run_event *ev)
{
    test_watch *w = user;
    if (ev->kind == RUN_EV_EVAL) {
        int i = __atomic_fetch_add(&w->evals, 1, __ATOMIC_RELAXED);
        if (i < TEST_MAX_EVALS) {
            w->eval_epoch[i] = ev->epoch;
            w->eval_step[i] = ev->step;
            w->eval_error[i] = ev->test_error;
        }
        snprintf(w->rule_json, sizeof w->rule_json, "%s", ev->rule);
        w->eval_s = ev->eval_s;
        w->eval_elapsed_s = ev->elapsed_s;
        if (w->stop_after_eval > 0 && ev->epoch == w->stop_after_eval)
            __atomic_store_n(&w->stop, RUN_STOP_CHECKPOINT, __ATOMIC_RELAXED);
        if (w->print_evals)
            printf("    epoch %.6g/%d: test error %.2f%%, loss %.4f, %.1f s\n", ev->epoch,
                   ev->epochs, 100 * ev->test_error, ev->test_loss, ev->elapsed_s);
    }
    if (ev->kind == RUN_EV_RESUME)
        __atomic_fetch_add(&w->resumes, 1, __ATOMIC_RELAXED);
    if (ev->kind == RUN_EV_PROGRESS) {
        __atomic_store_n(&w->reseeds, ev->reseeds, __ATOMIC_RELAXED);
        w->steps_over_rate += (double)(ev->step - w->progress_step) / ev->images_per_sec;
        w->progress_step = ev->step;
        w->busy_s = ev->compute_s + ev->sync_s + ev->wait_s;
    }
    if ((ev->kind == RUN_EV_LOG || ev->kind == RUN_EV_SAVE) && strstr(ev->message, "failed") &&
        __atomic_fetch_add(&w->failures_logged, 1, __ATOMIC_RELAXED) == 0)
        snprintf(w->first_failure, sizeof w->first_failure, "%s", ev->message);
}

static void watch_master(void *user, const model *master, const float *params, const float *stats,
                         double epochs_done, int last)
{
    (void)stats, (void)epochs_done;
    test_watch *w = user;
    if (!last)
        return;
    free(w->final);
    w->n = master->nparams;
    w->final = malloc(w->n * sizeof(float));
    if (w->final)
        memcpy(w->final, params, w->n * sizeof(float));
}

int test_run_job(const job_config *cfg, const run_devices *where, const char *checkpoint_dir,
                 test_watch *w, run_result *res, char *err, size_t errlen)
{
    dataset tr, te;
    err[0] = '\0';
    if (data_load_job(cfg, &tr, &te, NULL, err, errlen) != 0)
        return -1;
    int cores[2] = {0, 1};
    run_devices two_cores = {.cores = cores, .ncores = 2};
    run_hooks hooks = {.on_event = watch_event, .on_master = watch_master, .user = w,
                       .stop = &w->stop, .checkpoint_dir = checkpoint_dir};
    int rc = run_job(cfg, &tr, &te, where ? where : &two_cores, &hooks, res, err, errlen);
    dataset_free(&tr);
    dataset_free(&te);
    return rc;
}

/* ---- testjob.h: coupling rules on replica threads ---- */

void test_replica_init(replica *r, int rank, int n, const job_config *cfg, comm *c,
                       float *params, float *grads, int dim, const double *x0)
{
    *r = (replica){.rank = rank, .n = n, .id = rank, .cfg = cfg, .comm = c};
    r->model.nparams = dim;
    r->model.params = params;
    r->model.grads = grads;
    backend_ctx_init_cpu(&r->ctx, 1);
    for (int i = 0; i < dim; i++)
        params[i] = (float)x0[i];
}

void test_replica_free(replica *r, const coupling_rule *rule)
{
    rule->free(r);
    backend_ctx_free(&r->ctx);
}

void test_rule_config(job_config *cfg, const char *rule, int n, int L, double mu, double wd,
                      bool nesterov)
{
    job_config_defaults(cfg);
    snprintf(cfg->algorithm.name, sizeof cfg->algorithm.name, "%s", rule);
    cfg->algorithm.replicas = n;
    cfg->algorithm.L = L;
    cfg->optim.momentum = mu;
    cfg->optim.weight_decay = wd;
    cfg->optim.nesterov = nesterov;
}

typedef struct replica_arg {
    void (*fn)(void *ctx, int rank);
    void *ctx;
    int rank;
} replica_arg;

static void *replica_main(void *q)
{
    replica_arg *ra = q;
    ra->fn(ra->ctx, ra->rank);
    return NULL;
}

void test_run_replicas(comm *c, int n, size_t dim, void (*fn)(void *ctx, int rank), void *ctx)
{
    char err[256];
    if (comm_init(c, n, dim, err, sizeof err) != 0) {
        CHECK(0, "%s", err);
        return;
    }
    pthread_t *tid = malloc((size_t)n * sizeof *tid);
    replica_arg *args = malloc((size_t)n * sizeof *args);
    int started = 0;
    CHECK(tid && args, "out of memory for %d threads", n);
    for (; tid && args && started < n; started++) {
        args[started] = (replica_arg){fn, ctx, started};
        if (pthread_create(&tid[started], NULL, replica_main, &args[started]) != 0) {
            CHECK(0, "replica %d's thread did not start", started);
            comm_abort(c, "replica %d's thread did not start", started); /* frees the others */
            break;
        }
    }
    for (int a = 0; a < started; a++)
        pthread_join(tid[a], NULL);
    comm_free(c);
    free(tid);
    free(args);
}
