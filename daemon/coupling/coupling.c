#include "coupling.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

extern const coupling_rule coupling_sgd, coupling_parle, coupling_elastic_sgd,
    coupling_entropy_sgd;
extern const coupling_rule coupling_allreduce, coupling_dpsgd, coupling_sgp, coupling_osgp,
    coupling_lsgd;
extern const coupling_rule coupling_easgd, coupling_adpsgd, coupling_gossip, coupling_gosgd;

/* Every rule, one line each, in the order the validator lists their names.
 * sgd, elastic-sgd and entropy-sgd are exact special cases of Parle
 * (docs/algorithms.md): Parle's code, their own validation. */
static const coupling_rule *const rules[] = {
    &coupling_sgd,
    &coupling_parle,
    &coupling_elastic_sgd,
    &coupling_entropy_sgd,
    &coupling_allreduce,
    &coupling_dpsgd,
    &coupling_sgp,
    &coupling_osgp,
    &coupling_lsgd,
    &coupling_easgd,
    &coupling_adpsgd,
    &coupling_gossip,
    &coupling_gosgd,
};
#define NRULES (sizeof rules / sizeof rules[0])

const coupling_rule *coupling_find(const char *name)
{
    for (size_t i = 0; i < NRULES; i++)
        if (strcmp(rules[i]->name, name) == 0)
            return rules[i];
    return NULL;
}

const coupling_rule *coupling_rule_at(size_t i) { return i < NRULES ? rules[i] : NULL; }

static const char *names[NRULES + 1];

static void fill_names(void)
{
    for (size_t i = 0; i < NRULES; i++)
        names[i] = rules[i]->name;
}

const char *const *coupling_names(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, fill_names);
    return names;
}

const coupling_rule *coupling_family(const coupling_rule *rule)
{
    return rule && rule->family ? rule->family : rule;
}

int coupling_sync_steps(const coupling_rule *rule, const job_config *cfg, long batches_per_pass)
{
    int S = rule->steps_per_sync(cfg);
    return S == RULE_STEPS_PER_PASS ? (int)batches_per_pass : S;
}

int coupling_runs_across_ranks(const coupling_rule *rule, int on_gpus)
{
    if (!rule || rule->net == NET_NONE)
        return 0;
    return rule->net == NET_ANY || !on_gpus;
}

void coupling_gpu_net_names(int members, char *out, size_t len)
{
    const coupling_rule *heads[NRULES];
    size_t nheads = 0, at = 0;
    for (size_t i = 0; i < NRULES; i++) {
        const coupling_rule *head = coupling_family(rules[i]);
        size_t h = 0;
        while (h < nheads && heads[h] != head)
            h++;
        if (rules[i]->net == NET_ANY && h == nheads)
            heads[nheads++] = head;
    }
    out[0] = '\0';
    for (size_t h = 0; h < nheads; h++) {
        at += (size_t)snprintf(out + at, at < len ? len - at : 0, "%s%s",
                               h == 0 ? "" : h + 1 == nheads ? " and " : ", ", heads[h]->name);
        int nmembers = 0;
        for (size_t i = 0; members && i < NRULES; i++)
            if (rules[i] != heads[h] && coupling_family(rules[i]) == heads[h])
                at += (size_t)snprintf(out + at, at < len ? len - at : 0, "%s%s",
                                       nmembers++ ? ", " : " (and ", rules[i]->name);
        if (nmembers)
            at += (size_t)snprintf(out + at, at < len ? len - at : 0, ")");
    }
}
