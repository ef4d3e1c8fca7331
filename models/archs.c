/* The networks, layer by layer, with PyTorch-style tensor names. */
#include <stdio.h>
#include <string.h>

#include "layers.h"

/* LeNet of the Parle reference: two conv-BN-ReLU-pool-dropout blocks, then
 * linear-BN-ReLU-dropout and the classifier (132,220 parameters). */
static void build_lenet(net_builder *b, float p)
{
    nb_conv(b, "conv1", 20, 5, 1, 0, 1);
    nb_bn(b, "bn1");
    nb_relu(b);
    nb_maxpool(b, 3, 3);
    nb_dropout(b, p);
    nb_conv(b, "conv2", 50, 5, 1, 0, 1);
    nb_bn(b, "bn2");
    nb_relu(b);
    nb_maxpool(b, 2, 2);
    nb_dropout(b, p);
    nb_linear(b, "fc1", 500);
    nb_bn(b, "bn3");
    nb_relu(b);
    nb_dropout(b, p);
    nb_linear(b, "fc2", b->m->spec.classes);
}

/* A small MLP for fast tests: linear-BN-ReLU-dropout-linear. */
static void build_mlp(net_builder *b, float p)
{
    nb_linear(b, "fc1", 128);
    nb_bn(b, "bn1");
    nb_relu(b);
    nb_dropout(b, p);
    nb_linear(b, "fc2", b->m->spec.classes);
}

int arch_build(net_builder *b, const model_spec *spec, char *err, size_t errlen)
{
    if (strcmp(spec->arch, "lenet") == 0) {
        if (spec->in_h < 28 || spec->in_w < 28) {
            snprintf(err, errlen, "model.arch: lenet needs inputs of at least 28x28, got %dx%d",
                     spec->in_h, spec->in_w);
            return -1;
        }
        build_lenet(b, spec->dropout < 0 ? 0.25f : spec->dropout);
    } else if (strcmp(spec->arch, "mlp") == 0) {
        build_mlp(b, spec->dropout < 0 ? 0.0f : spec->dropout);
    } else {
        snprintf(err, errlen, "model.arch: \"%s\" is not built yet; available: lenet, mlp",
                 spec->arch);
        return -1;
    }
    return 0;
}
