/* Convolution weights in the two layouts a backend may keep them in:
 * PyTorch's KCRS, [out][in][kh][kw], which checkpoints and exports always
 * hold, and KRSC, [out][kh][kw][in], which cuDNN's NHWC convolutions take.
 * The host half of an NHWC path on the GPU (not built yet): a model whose
 * device weights are KRSC converts them here on their way to and from
 * PyTorch's layout, so that checkpoints, exports and a resume on the CPU
 * stay as they are. */
#ifndef PARLE_PARAM_LAYOUT_H
#define PARLE_PARAM_LAYOUT_H

#include <stddef.h>

#include "model.h"

enum param_layout { PARAM_LAYOUT_KCRS, PARAM_LAYOUT_KRSC };

/* One weight of k x c x r x s from layout `from` into dst in the other;
 * src and dst must not overlap. */
void conv_weight_relayout(enum param_layout from, int k, int c, int r, int s, const float *src,
                          float *dst);

/* The floats of the model's largest convolution weight (0 without any). */
size_t model_conv_weight_floats(const model *m);

/* In a host vector laid out as params (m->nparams floats), every
 * convolution weight (the 4-D tensors) from layout `from` into the other,
 * in place through tmp (model_conv_weight_floats floats); every other
 * tensor and the padding untouched. */
void model_relayout_params(const model *m, enum param_layout from, float *v, float *tmp);

#endif
