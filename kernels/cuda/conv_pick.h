/* Which of cuDNN's candidate algorithms a convolution runs, as a pure
 * function of the candidates (no cuDNN types), so that the rule is tested
 * on any machine (tests/unit/test_conv_pick.c). */
#ifndef PARLE_CONV_PICK_H
#define PARLE_CONV_PICK_H

#include <stddef.h>

/* Algorithms asking for more workspace than this are passed over while a
 * leaner one is on offer: several replicas share one GPU's memory. */
#define CONV_WORKSPACE_MAX ((size_t)512 << 20)

/* One candidate of cuDNN's heuristics, best first, whichever direction. */
typedef struct algo_offer {
    int algo;
    int runs;          /* cuDNN's status for it was SUCCESS */
    size_t memory;     /* workspace bytes */
    int deterministic; /* CUDNN_DETERMINISTIC */
    int fma;           /* math type CUDNN_FMA_MATH: no TF32, no reduced precision */
} algo_offer;

/* The first candidate that runs, is deterministic if asked (a promise of
 * bit-for-bit repeats and resumes, so never dropped silently), is plain FMA
 * math if fp32 is asked, and fits `limit`; failing the limit, the leanest of
 * the others, so a shape whose every algorithm wants more still runs.
 * Returns its index, or -1 when none qualifies (the caller fails with a
 * message naming the shape, direction, precision and determinism). */
int conv_pick(const algo_offer *offers, int count, int deterministic, int need_fma,
              size_t limit);

#endif
