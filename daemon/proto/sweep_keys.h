/* The dotted keys of a sweep's grid and of parlectl's --set name fields of a
 * job ("optim.lr"); both sides check that no two of them set the same field. */
#ifndef PARLE_SWEEP_KEYS_H
#define PARLE_SWEEP_KEYS_H

#include <stddef.h>
#include <string.h>

/* Whether dotted keys a (alen bytes) and b (blen bytes) set the same field:
 * the same key, or one holding the other ("optim" and "optim.lr"). Two grid
 * keys, or a grid key and parlectl's --set, may not. */
static inline int sweep_keys_overlap(const char *a, size_t alen, const char *b, size_t blen)
{
    size_t n = alen < blen ? alen : blen;
    return memcmp(a, b, n) == 0 && (alen == blen || (alen < blen ? b[n] : a[n]) == '.');
}

#endif
