/* The checks that tie a job file's fields together, once each is read:
 * the required fields, the defaults that depend on the architecture,
 * dataset or algorithm, each rule's fixed fields and own checks
 * (coupling.h's `validate`), the dataset's root, devices and after. */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "dataset_table.h"
#include "jobfile_impl.h"
#include "user_text.h"

static int is_name(const char *have, const char *want) { return !strcmp(have, want); }

static int rule_reads(const coupling_rule *rule, const char *path)
{
    for (const char *const *f = rule->fields; f && *f; f++)
        if (!strcmp(*f, path))
            return 1;
    return 0;
}

/* The rule's own checks, on what the parser saw; its reports join ours. */
static void rule_validate(parser *p, const coupling_rule *rule)
{
    const char *paths[NFIELDS];
    for (int i = 0; i < NFIELDS; i++)
        paths[i] = fields[i].path;
    rule_check c = {.field = paths, .state = p->state, .nfields = NFIELDS};
    rule->validate(p->cfg, &c);
    for (int i = 0; i < c.nreports; i++)
        report(p, "%s", c.report[i]);
}

/* algorithm.L by whether the rule takes inner steps, and the fields the
 * rule fixes; the fields that only some rules read, given for another; then
 * the rule's own checks. */
static void finish_rule(parser *p)
{
    job_config *cfg = p->cfg;
    const char *alg = cfg->algorithm.name;
    const coupling_rule *rule = coupling_find(alg); /* NULL: absent or reported */
    if (state_of(p, "algorithm.L") == RULE_FIELD_ABSENT)
        cfg->algorithm.L = rule && rule->inner_steps ? 25 : 0;
    else if (rule && !rule->inner_steps && state_of(p, "algorithm.L") == RULE_FIELD_SET &&
             cfg->algorithm.L != 0)
        report(p, "algorithm.L: must be 0 for %s", alg);
    if (!rule)
        return;
    for (int k = 0; k < RULE_MAX_FIXED && rule->fixed[k].path; k++) {
        int i = field_index(rule->fixed[k].path);
        char *at = (char *)cfg + fields[i].offset;
        double want = rule->fixed[k].value;
        double have = fields[i].kind == K_INT ? *(int *)at : *(double *)at;
        if (p->state[i] == RULE_FIELD_ABSENT && fields[i].kind == K_INT)
            *(int *)at = (int)want;
        else if (p->state[i] == RULE_FIELD_ABSENT)
            *(double *)at = want;
        else if (p->state[i] == RULE_FIELD_SET && have != want)
            report(p, "%s: must be %g for %s", fields[i].path, want, alg);
    }
    for (int i = 0; i < NFIELDS; i++) {
        if (p->state[i] != RULE_FIELD_SET || rule_reads(rule, fields[i].path))
            continue;
        char owners[256] = "";
        for (size_t r = 0; coupling_rule_at(r); r++)
            if (rule_reads(coupling_rule_at(r), fields[i].path) &&
                strlen(owners) + strlen(coupling_rule_at(r)->name) + 2 < sizeof owners)
                strcat(strcat(owners, " "), coupling_rule_at(r)->name);
        if (*owners)
            report(p, "%s: only for%s, not %s", fields[i].path, owners, alg);
    }
    if (rule->validate)
        rule_validate(p, rule);
}

/* The rules between fields, and the defaults that depend on another field.
 * A field that is RULE_FIELD_BAD was already reported and is left out here. */
void finish(parser *p)
{
    job_config *cfg = p->cfg;
    const char *arch = cfg->model.arch, *dataset = cfg->data.dataset, *alg = cfg->algorithm.name;
    char buf[48];

    if (state_of(p, "model.arch") == RULE_FIELD_ABSENT)
        report(p, "model.arch: required");
    if (state_of(p, "data.dataset") == RULE_FIELD_ABSENT)
        report(p, "data.dataset: required");
    if (state_of(p, "algorithm.name") == RULE_FIELD_ABSENT)
        report(p, "algorithm.name: required");

    if (*arch && !is_name(arch, "wrn")) {
        if (state_of(p, "model.depth") != RULE_FIELD_ABSENT)
            report(p, "model.depth: only for arch wrn, not %s", arch);
        if (state_of(p, "model.width") != RULE_FIELD_ABSENT)
            report(p, "model.width: only for arch wrn, not %s", arch);
    }
    if (is_name(arch, "wrn") && (cfg->model.depth - 4) % 6 != 0)
        report(p, "model.depth: must be 6k+4 (16, 22, 28, 40, ...) for wrn, got %d",
               cfg->model.depth);
    if (state_of(p, "optim.weight_decay") == RULE_FIELD_ABSENT)
        cfg->optim.weight_decay = is_name(arch, "allcnn") ? 1e-3 : is_name(arch, "wrn") ? 5e-4 : 0;

    const dataset_kind *data = dataset_kind_find(dataset);
    if (data && data->default_root && state_of(p, "data.root") == RULE_FIELD_ABSENT)
        snprintf(cfg->data.root, sizeof cfg->data.root, "%s", data->default_root);
    if (data && dataset_kind_needs_root(data) && !*cfg->data.root &&
        state_of(p, "data.root") != RULE_FIELD_BAD)
        report(p, "data.root: required for dataset %s", dataset);

    finish_rule(p);
    if (cfg->algorithm.gamma_max < cfg->algorithm.gamma &&
        state_of(p, "algorithm.gamma") != RULE_FIELD_BAD &&
        state_of(p, "algorithm.gamma_max") != RULE_FIELD_BAD)
        report(p, "algorithm.gamma_max: must be >= algorithm.gamma (%g)", cfg->algorithm.gamma);
    if (cfg->algorithm.rho_max < cfg->algorithm.rho &&
        state_of(p, "algorithm.rho") != RULE_FIELD_BAD &&
        state_of(p, "algorithm.rho_max") != RULE_FIELD_BAD)
        report(p, "algorithm.rho_max: must be >= algorithm.rho (%g)", cfg->algorithm.rho);
    if (strcmp(cfg->algorithm.on_replica_failure, "reseed") == 0 &&
        cfg->algorithm.replicas < 2 && state_of(p, "algorithm.replicas") != RULE_FIELD_BAD)
        report(p, "algorithm.on_replica_failure: \"reseed\" needs >= 2 replicas (a replica is "
               "restored from the others), got %d", cfg->algorithm.replicas);

    if (state_of(p, "name") == RULE_FIELD_ABSENT) {
        if (*arch && *dataset && *alg)
            snprintf(cfg->name, sizeof cfg->name, "%s-%s-%s", arch, dataset, alg);
    } else if (state_of(p, "name") == RULE_FIELD_SET) {
        const char *c = cfg->name;
        while (*c && isprint((unsigned char)*c))
            c++;
        if (!*cfg->name || *c)
            report(p, "name: must be non-empty printable text, got \"%s\"", user_text_shown(cfg->name, buf));
    }
    char why[200];
    int devices = state_of(p, "devices") == RULE_FIELD_SET
                      ? job_devices_read(cfg->devices, &cfg->device_spec, why, sizeof why)
                      : 0;
    if (devices == -1)
        report(p, "devices: \"%s\": %s", user_text_shown(cfg->devices, buf), why);
    else if (devices != 0)
        report(p, "devices: \"%s\" is not \"cpu\", \"cpu:K\", \"auto\", \"gpu\", \"gpu:N\" or "
               "distinct GPU ids like \"0,1\" or \"cuda:0,1\"",
               user_text_shown(cfg->devices, buf));
    char ids[JOB_MAX_AFTER][16];
    if (job_after_ids(cfg->after, ids, why, sizeof why) < 0)
        report(p, "after: \"%s\": %s", user_text_shown(cfg->after, buf), why);
}
