/* The synchronous graph and leader rules through the runner (MLP, synthetic
 * data, 4 replicas on 2 cores): a run stopped with a checkpoint after its
 * second epoch and resumed ends with the master of a run never stopped, bit
 * for bit (osgp with a push in flight at the stop, LSGD mid-window with
 * leaders and pull targets: their host numbers go through the checkpoint's
 * metadata); the rule's own quantities reach the events as JSON. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner.h"
#include "testutil.h"

typedef struct watch {
    float *final;
    size_t n;
    int stop_after_eval;
    volatile int stop;
    int resumes;
    char rule_json[1024];
} watch;

static void on_event(void *user, const run_event *ev)
{
    watch *w = user;
    if (ev->kind == RUN_EV_EVAL && ev->epoch == w->stop_after_eval)
        __atomic_store_n(&w->stop, RUN_STOP_CHECKPOINT, __ATOMIC_RELAXED);
    if (ev->kind == RUN_EV_RESUME)
        w->resumes++;
    if (ev->kind == RUN_EV_EVAL)
        snprintf(w->rule_json, sizeof w->rule_json, "%s", ev->rule);
}

static void on_master(void *user, const model *master, const float *params, const float *stats,
                      int epochs_done, int last)
{
    (void)stats, (void)epochs_done;
    watch *w = user;
    if (!last)
        return;
    w->n = master->nparams;
    w->final = malloc(w->n * sizeof(float));
    memcpy(w->final, params, w->n * sizeof(float));
}

static int run_job_in(const job_config *cfg, const char *dir, watch *w)
{
    char err[512];
    dataset tr, te;
    run_result res;
    if (run_load_data(cfg, &tr, &te, err, sizeof err) != 0)
        return -1;
    int cores[2] = {0, 1};
    run_hooks hooks = {.on_event = on_event, .on_master = on_master, .user = w, .stop = &w->stop,
                       .checkpoint_dir = dir};
    int rc = run_job(cfg, &tr, &te, &(run_devices){.cores = cores, .ncores = 2}, &hooks, &res,
                     err, sizeof err);
    if (rc != 0)
        printf("run_job: %s\n", err);
    dataset_free(&tr);
    dataset_free(&te);
    return rc;
}

static void check_resume(const char *rule, const char *json_fields, const char *root)
{
    char text[1024], err[1024], da[256], db[256];
    snprintf(text, sizeof text,
             "{\"model\": {\"arch\": \"mlp\", \"dropout\": 0.2}, \"data\": {\"dataset\": "
             "\"synthetic\", \"train_limit\": 256, \"test_limit\": 64}, \"algorithm\": "
             "{\"name\": \"%s\", \"replicas\": 4%s}, \"optim\": {\"lr\": 0.05, \"batch\": 32}, "
             "\"epochs\": 3, \"seed\": %llu}",
             rule, json_fields, (unsigned long long)(test_seed() % 1000));
    job_config cfg;
    if (job_config_parse(text, strlen(text), &cfg, err, sizeof err) != 0) {
        CHECK(0, "%s: %s", rule, err);
        return;
    }
    snprintf(da, sizeof da, "%s/%s-a", root, rule);
    snprintf(db, sizeof db, "%s/%s-b", root, rule);
    watch a = {.stop_after_eval = -1}, b = {.stop_after_eval = 2}, b2 = {.stop_after_eval = -1};
    CHECK(run_job_in(&cfg, da, &a) == 0 && a.final, "%s: uninterrupted run", rule);
    CHECK(run_job_in(&cfg, db, &b) == 0 && !b.final, "%s: stopped run", rule);
    CHECK(run_job_in(&cfg, db, &b2) == 0 && b2.final && b2.resumes == 1, "%s: resumed run", rule);
    CHECK(a.final && b2.final && a.n == b2.n &&
              memcmp(a.final, b2.final, a.n * sizeof(float)) == 0,
          "%s: the resumed run's master differs from the uninterrupted one's", rule);
    /* The rule's own numbers reach the events as a JSON object. */
    int wants_json = !strcmp(rule, "sgp") || !strcmp(rule, "osgp") || !strcmp(rule, "lsgd");
    CHECK(!wants_json || (a.rule_json[0] == '{' && a.rule_json[strlen(a.rule_json) - 1] == '}'),
          "%s: rule quantities \"%s\"", rule, a.rule_json);
    printf("%s: resume checked; rule quantities %s\n", rule, a.rule_json);
    free(a.final);
    free(b2.final);
}

int main(void)
{
    test_init("rules_resume");
    char root[] = "/tmp/parle-rules-XXXXXX";
    CHECK(mkdtemp(root) != NULL, "mkdtemp");
    check_resume("allreduce", "", root);
    check_resume("dpsgd", ", \"graph\": \"bipartite-exponential\"", root);
    check_resume("sgp", "", root);
    check_resume("osgp", ", \"synch_freq\": 1", root);
    check_resume("lsgd", ", \"group_size\": 2, \"tau\": 3, \"tau_global\": 5, \"p1\": 0.2, "
                 "\"p2\": 0.3, \"avg_size\": 4", root);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", root);
    CHECK(system(cmd) == 0, "cleanup");
    return test_main_end();
}
