/* The rules' shared set-up (coupling/rule_state.c): the state struct, its
 * vectors zeroed in the replica's memory, a vector the job does not use left
 * out, the first that cannot be made named with the rule and the context's
 * error, and everything freed again, whatever was made. */
#include <string.h>

#include "rule_state.h"
#include "testjob.h"

enum { DIM = 37 };

typedef struct toy_state {
    int mark;
    float *u, *tmp, *unused;
} toy_state;

static int all_zero(const float *v, int n)
{
    for (int i = 0; i < n; i++)
        if (v[i] != 0.0f)
            return 0;
    return 1;
}

int main(void)
{
    test_init("rule_state");
    job_config cfg;
    test_rule_config(&cfg, "parle", 1, 1, 0.9, 0, true);
    float params[DIM], grads[DIM];
    double x0[DIM] = {0};
    replica r;
    test_replica_init(&r, 0, 1, &cfg, NULL, params, grads, DIM, x0);
    char err[512] = "";

    toy_state *s = rule_state_new(&r, sizeof *s, "Toy", err, sizeof err);
    CHECK(s && r.rule_state == s && s->mark == 0 && !s->u && !s->tmp, "a zeroed state");
    CHECK(rule_state_vectors(&r, "Toy", RULE_VECTORS(&s->u, NULL, &s->tmp), err, sizeof err) == 0,
          "vectors: %s", err);
    CHECK(s->u && s->tmp && s->u != s->tmp && !s->unused, "two vectors, the unused one left out");
    CHECK(s->u && all_zero(s->u, DIM) && s->tmp && all_zero(s->tmp, DIM), "zeroed vectors");
    rule_state_free(&r, NULL, RULE_VECTORS(&s->u, &s->tmp, &s->unused));
    CHECK(r.rule_state == NULL, "the state is cleared");

    /* A context that has failed makes no more: the first vector made, the
     * second named with the context's error. */
    s = rule_state_new(&r, sizeof *s, "Toy", err, sizeof err);
    CHECK(rule_state_vectors(&r, "Toy", RULE_VECTORS(&s->u), err, sizeof err) == 0, "%s", err);
    rule_peers peers = {0};
    CHECK((peers.copy[0] = rule_vector(&r)) != NULL, "a peer's copy");
    backend_fail(&r.ctx, "out of device memory");
    CHECK(rule_state_vectors(&r, "Toy", RULE_VECTORS(&s->tmp), err, sizeof err) == -1,
          "a failed context made a vector");
    CHECK(strcmp(err, "replica 0: Toy's buffers: out of device memory") == 0, "message: %s", err);
    CHECK(s->u && !s->tmp, "the vector made before stays for the free");
    rule_state_free(&r, &peers, RULE_VECTORS(&s->u, &s->tmp));
    CHECK(r.rule_state == NULL && peers.copy[0] == NULL, "state and peer copies freed");

    backend_ctx_free(&r.ctx);
    return test_main_end();
}
