/* A coupling rule: how replicas turn gradients into updates and talk to each
 * other (docs/architecture.md). One file per algorithm; the runner drives them all
 * through this table:
 *
 *   init  ; repeat { begin ; (gradient ; step) x steps_per_sync ; sync }
 *
 * The rule's `weights` are what the master averages and what a checkpoint
 * saves as the replica's weights. */
#ifndef PARLE_COUPLING_H
#define PARLE_COUPLING_H

#include <stddef.h>
#include "replica.h"

#define RULE_MAX_STATE 4
/* LSGD's loss window (algorithm.avg_size <= 100) with its leaders. */
#define RULE_MAX_SCALARS 128
#define RULE_MAX_FIXED 2

/* steps_per_sync's answer for a rule that needs no meeting point but the
 * pass boundaries (the asynchronous ones): the runner makes each outer
 * iteration one pass over the replica's data, so the replicas meet only
 * where the master is evaluated and checkpoints are taken. */
#define RULE_STEPS_PER_PASS 0

/* Where a rule runs across MPI ranks (docs/mpi.md): its collectives are
 * all-reduces and agreements (anywhere), or also exchanges (comm_exchange
 * gathers every vector on the host) or peer requests (comm_peer_net.c, host
 * vectors): CPUs only. */
enum rule_net { NET_NONE = 0, NET_ANY, NET_CPU };

/* The job validator's side of a rule's `validate` (daemon/jobfile/jobfile.c),
 * as plain data so that a rule needs nothing of the validator: what the job
 * file did with each field ("algorithm.tau"), and the problems the rule
 * reports as "dotted.path: why", which the validator adds to its own list.
 * A field that is RULE_FIELD_BAD was reported already: leave it out. */
enum rule_field { RULE_FIELD_ABSENT, RULE_FIELD_SET, RULE_FIELD_BAD };
#define RULE_CHECK_MAX_REPORTS 8
typedef struct rule_check {
    const char *const *field;    /* every job-file field's dotted path */
    const enum rule_field *state; /* what the file did with field[i] */
    int nfields;
    char report[RULE_CHECK_MAX_REPORTS][256];
    int nreports; /* reports past the last slot are dropped */
} rule_check;
/* An unknown path reads as RULE_FIELD_BAD. */
enum rule_field rule_field_state(const rule_check *c, const char *path);
__attribute__((format(printf, 2, 3))) void rule_report(rule_check *c, const char *fmt, ...);

/* A rule is one entry of coupling.c's table, defined in its own file: adding
 * one is that file and that table line (docs/algorithms.md "How to add a
 * rule"). */
typedef struct coupling_rule {
    const char *name;       /* algorithm.name */
    /* The rule whose code and reported quantities it shares (Parle's special
     * cases name &coupling_parle, Parle itself too); NULL: its own. */
    const struct coupling_rule *family;
    /* The algorithm.* fields that only some rules read and this one does
     * (NULL-terminated); set for a rule that does not list it, such a field
     * is an error ("only for ..."). */
    const char *const *fields;
    /* Takes inner steps (algorithm.L > 0 makes sense: default 25); any
     * other rule has L = 0 (the default) and refuses another L. */
    int inner_steps;
    /* Numeric fields the rule fixes (sgd: one replica): absent, a field
     * takes its value; given another, it is an error ("must be 1 for sgd").
     * Up to RULE_MAX_FIXED, the first NULL path ending them. */
    struct rule_fixed {
        const char *path;
        double value;
    } fixed[RULE_MAX_FIXED];
    /* Optional (NULL: nothing to check). The checks and defaults of the
     * rule's own fields, once all fields are parsed: problems go to
     * rule_report. */
    void (*validate)(job_config *cfg, rule_check *c);
    enum rule_net net;
    int (*init)(replica *r, char *err, size_t errlen);
    int (*steps_per_sync)(const job_config *cfg);
    void (*begin)(replica *r);   /* start of outer iteration r->k */
    void (*step)(replica *r);    /* r->model.grads holds the new gradient */
    /* End of outer iteration r->k: 0, or -1 when the comm was aborted (the
     * rule stops; the runner reports why). */
    int (*sync)(replica *r);
    float *(*weights)(replica *r);
    /* The vectors (nparams floats each) that, with the BN statistics, are the
     * replica's whole state at an outer-iteration boundary: what a checkpoint
     * saves and a resume restores. Returns how many (at most RULE_MAX_STATE). */
    int (*state)(replica *r, const char **names, float **bufs);
    /* How many vectors of nparams floats init allocates in replica `id`'s
     * context memory (its state, scratch and comm_peer buffers): for memory
     * admission (daemon/runner/job_memory.c), which sizes a job before it runs. */
    int (*vectors)(const job_config *cfg, int id);
    /* Optional (NULL: none). Host scalars that are part of that state
     * (GoSGD's weight a_i, gossip's clock): pointers to the rule's own
     * doubles, which a checkpoint saves in its metadata and a resume writes
     * back after init. Returns how many (at most RULE_MAX_SCALARS). */
    int (*scalars)(replica *r, const char **names, double **vals);
    /* Optional (NULL: none). The rule's own quantities for status and
     * metrics, as a JSON object's text (e.g. {"a":[0.25,0.25]}), on rank 0
     * at a progress or evaluation event. Returns the length written. */
    int (*describe)(replica *r, char *json, size_t len);
    /* Optional (NULL: the mean of `weights`). The master when it is not that
     * mean (LSGD's global leader, SGP's sum z / sum w): every rank calls it at
     * the same outer-iteration boundary; it returns a vector in the rank's
     * context memory, unchanged until the rank's next step, or NULL once the
     * comm was aborted. */
    const float *(*master)(replica *r);
    /* Re-seeding (algorithm.on_replica_failure "reseed", docs/architecture.md
     * "Failure model"). Every replica of the job calls it at the same
     * meeting point (a collective: before or after a sync) when some replica
     * failed; `bad` says this one did. A bad replica takes what the rule
     * holds as consensus as its weights (Parle's reference, EASGD's centre,
     * the mean of the healthy replicas for the decentralised rules) and
     * resets its optimizer and local state; the others keep theirs. 0, or -1
     * once the comm was aborted. */
    int (*reseed)(replica *r, int bad);
    /* The rule's step takes part in collectives (EASGD's synchronous
     * elastic step): it is called on a failing replica too (r->failing),
     * which must keep them and hand its peers nothing of its own. Other
     * rules' steps are skipped on a failing replica. */
    int step_meets;
    void (*free)(replica *r);
} coupling_rule;

/* The rule for cfg->algorithm.name, or NULL. */
const coupling_rule *coupling_find(const char *name);
/* The table's i-th rule, or NULL past its end. */
const coupling_rule *coupling_rule_at(size_t i);
/* The rules' names, in the table's order, NULL-terminated. */
const char *const *coupling_names(void);
/* The rule whose code `rule` shares (its `family`), or `rule` itself. */
const coupling_rule *coupling_family(const coupling_rule *rule);
/* How many steps an outer iteration takes: steps_per_sync, or for a
 * RULE_STEPS_PER_PASS rule `batches_per_pass`. */
int coupling_sync_steps(const coupling_rule *rule, const job_config *cfg, long batches_per_pass);
/* A rule's re-seed of `w` (its weights, nparams floats in the replica's
 * memory), called by every replica at one meeting point: each publishes w
 * (comm_exchange; a bad replica's reads as NaN, so no other takes it for
 * healthy) and a bad replica sets w to the mean of the healthy replicas'
 * (exact = 0), or to the lowest-numbered healthy replica's bit for bit
 * (exact = 1: allreduce's replicas are identical). 0, or -1 once the comm
 * is aborted (no healthy replica, a failed copy: it aborts it). */
int coupling_consensus(replica *r, int bad, float *w, int exact);
/* The re-seed (coupling_rule.reseed) of a rule whose consensus is the mean
 * of the healthy replicas: x, its weights, from that mean
 * (coupling_consensus), and on a bad replica its momentum u zeroed. 0, or
 * -1 once aborted. */
int rule_reseed_mean(replica *r, int bad, float *x, float *u);
/* Can `rule` (NULL: none) run across MPI ranks (its `net`), on GPUs or on
 * CPUs? */
int coupling_runs_across_ranks(const coupling_rule *rule, int on_gpus);
/* The rules that run across MPI ranks on GPUs (NET_ANY), as text: each
 * family by its name, with its other members "(and a, b)" if `members`,
 * e.g. "parle (and sgd, elastic-sgd, entropy-sgd) and allreduce". */
void coupling_gpu_net_names(int members, char *out, size_t len);

#endif
