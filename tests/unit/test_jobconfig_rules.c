/* The coupling rules' own checks on a job file (coupling.h's `validate`):
 * each bad case gets its one message, and each rule its defaults. */
#include <string.h>

#include "jobconfig_check.h"
#include "testutil.h"

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

int main(void)
{
    test_init("jobconfig_rules");
    test_sync_rules();
    test_async_rules();
    return test_main_end();
}
