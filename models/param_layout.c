#include "param_layout.h"

#include <string.h>

void conv_weight_relayout(enum param_layout from, int k, int c, int r, int s, const float *src,
                          float *dst)
{
    const size_t rs = (size_t)r * s;
    for (int o = 0; o < k; o++)
        for (int i = 0; i < c; i++)
            for (size_t p = 0; p < rs; p++) {
                const size_t kcrs = ((size_t)o * c + i) * rs + p;
                const size_t krsc = ((size_t)o * rs + p) * c + i;
                if (from == PARAM_LAYOUT_KCRS)
                    dst[krsc] = src[kcrs];
                else
                    dst[kcrs] = src[krsc];
            }
}

static int is_conv_weight(const tensor_info *t) { return !t->is_stat && t->ndim == 4; }

size_t model_conv_weight_floats(const model *m)
{
    size_t most = 0;
    for (int i = 0; i < m->ntensors; i++)
        if (is_conv_weight(&m->tensors[i]) && m->tensors[i].count > most)
            most = m->tensors[i].count;
    return most;
}

void model_relayout_params(const model *m, enum param_layout from, float *v, float *tmp)
{
    for (int i = 0; i < m->ntensors; i++) {
        const tensor_info *t = &m->tensors[i];
        if (!is_conv_weight(t))
            continue;
        memcpy(tmp, v + t->offset, t->count * sizeof(float));
        conv_weight_relayout(from, t->shape[0], t->shape[1], t->shape[2], t->shape[3], tmp,
                             v + t->offset);
    }
}
