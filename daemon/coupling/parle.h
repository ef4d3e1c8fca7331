/* Parle's per-replica state, exposed for tests that check every buffer. */
#ifndef PARLE_COUPLING_PARLE_H
#define PARLE_COUPLING_PARLE_H

#include "coupling.h"
#include "jobconfig.h"

typedef struct parle_state {
    float *x;   /* the replica's weights x^a; with L = 0 this is model.params */
    float *z;   /* running average of the inner iterate (L > 0) */
    float *v;   /* inner momentum (L > 0), never reset */
    float *u;   /* outer momentum, never reset */
} parle_state;

/* Parle's schedule (docs/algorithms.md): at outer iteration k, with nb outer
 * iterations an epoch, gamma_k = min(gamma (1 + growth/nb)^k, gamma_max) and
 * rho_k the same with rho and rho_max. The runner sets them on every rule's
 * replicas (replica.gamma, .rho); Parle and its special cases read them. */
void parle_schedule(const job_config *cfg, long nb, long k, float *gamma, float *rho);

/* What a job's events report as gamma and rho: the schedule's for Parle
 * (`rule`), 0 where it means nothing (gamma with L = 0, rho with one
 * replica, any other rule). */
void parle_report(const job_config *cfg, const coupling_rule *rule, int replicas, float gamma,
                  float rho, double *gamma_out, double *rho_out);

#endif
