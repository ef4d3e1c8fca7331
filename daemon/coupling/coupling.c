#include "coupling.h"

#include <string.h>

extern const coupling_rule coupling_parle;
extern const coupling_rule coupling_allreduce, coupling_dpsgd, coupling_sgp, coupling_osgp,
    coupling_lsgd;
extern const coupling_rule coupling_easgd, coupling_adpsgd, coupling_gossip, coupling_gosgd;

/* sgd, elastic-sgd and entropy-sgd are exact special cases of Parle
 * (docs/algorithms.md); the validator fixes their n, L and rho. */
static const struct { const char *name; const coupling_rule *rule; } rules[] = {
    {"parle", &coupling_parle},
    {"elastic-sgd", &coupling_parle},
    {"entropy-sgd", &coupling_parle},
    {"sgd", &coupling_parle},
    {"allreduce", &coupling_allreduce},
    {"dpsgd", &coupling_dpsgd},
    {"sgp", &coupling_sgp},
    {"osgp", &coupling_osgp},
    {"lsgd", &coupling_lsgd},
    {"easgd", &coupling_easgd},
    {"adpsgd", &coupling_adpsgd},
    {"gossip", &coupling_gossip},
    {"gosgd", &coupling_gosgd},
};

const coupling_rule *coupling_find(const char *name)
{
    for (size_t i = 0; i < sizeof rules / sizeof rules[0]; i++)
        if (strcmp(rules[i].name, name) == 0)
            return rules[i].rule;
    return NULL;
}

int coupling_runs_across_ranks(const job_config *cfg, int on_gpus)
{
    const coupling_rule *rule = coupling_find(cfg->algorithm.name);
    if (!rule || rule->net == NET_NONE)
        return 0;
    return rule->net == NET_ANY || !on_gpus;
}
