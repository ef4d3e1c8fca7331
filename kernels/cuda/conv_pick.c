#include "conv_pick.h"

int conv_pick(const algo_offer *offers, int count, int deterministic, int need_fma,
              size_t limit)
{
    int best = -1, leanest = -1;
    for (int i = 0; i < count; i++) {
        const algo_offer *o = &offers[i];
        if (!o->runs || (deterministic && !o->deterministic) || (need_fma && !o->fma))
            continue;
        if (leanest < 0 || o->memory < offers[leanest].memory)
            leanest = i;
        if (best < 0 && o->memory <= limit)
            best = i;
    }
    return best >= 0 ? best : leanest;
}
