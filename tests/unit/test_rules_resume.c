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
#include "testjob.h"
#include "jobfile.h"

static int run_job_in(const job_config *cfg, const char *dir, test_watch *w)
{
    char err[512];
    run_result res;
    int rc = test_run_job(cfg, NULL, dir, w, &res, err, sizeof err);
    if (rc != 0)
        printf("run_job: %s\n", err);
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
    test_watch a = {0}, b = {.stop_after_eval = 2}, b2 = {0};
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
