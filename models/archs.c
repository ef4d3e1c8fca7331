/* The networks, layer by layer, with PyTorch-style tensor names. */
#include <math.h>
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

/* conv -> BN -> ReLU, as the Parle code's convbn. */
static void conv_bn_relu(net_builder *b, int index, int out_c, int k, int stride, int pad)
{
    char conv[16], bn[16];
    snprintf(conv, sizeof conv, "conv%d", index);
    snprintf(bn, sizeof bn, "bn%d", index);
    nb_conv(b, conv, out_c, k, stride, pad, 1);
    nb_bn(b, bn);
    nb_relu(b);
}

/* All-CNN of the Parle code: dropout 0.2 on the input, three blocks of
 * conv-BN-ReLU (96, 96, 96/2; 192, 192, 192/2; 192, 192, 1x1 to the classes)
 * with dropout p between blocks, then an 8x8 average pool. */
static void build_allcnn(net_builder *b, float p)
{
    int classes = b->m->spec.classes;
    nb_dropout(b, 0.2f);
    conv_bn_relu(b, 1, 96, 3, 1, 1);
    conv_bn_relu(b, 2, 96, 3, 1, 1);
    conv_bn_relu(b, 3, 96, 3, 2, 1);
    nb_dropout(b, p);
    conv_bn_relu(b, 4, 192, 3, 1, 1);
    conv_bn_relu(b, 5, 192, 3, 1, 1);
    conv_bn_relu(b, 6, 192, 3, 2, 1);
    nb_dropout(b, p);
    conv_bn_relu(b, 7, 192, 3, 1, 1);
    conv_bn_relu(b, 8, 192, 3, 1, 1);
    conv_bn_relu(b, 9, classes, 1, 1, 0);
    nb_avgpool(b, b->h, b->h);
}

/* He initialisation of the WRN code: N(0, sqrt(2 / (k k out))). */
static void wrn_conv(net_builder *b, const char *name, int out_c, int k, int stride, int pad)
{
    nb_conv(b, name, out_c, k, stride, pad, 0);
    b->m->layers[nb_here(b)].init_std = sqrtf(2.0f / (float)(k * k * out_c));
}

/* A pre-activation basic block: BN-ReLU-conv3x3-BN-ReLU-dropout-conv3x3 plus
 * the shortcut: the block input itself, or a 1x1 conv of its activation when
 * the width changes. */
static void wrn_block(net_builder *b, const char *prefix, int out_c, int stride, float p)
{
    char name[48];
    int input = nb_here(b), equal = b->c == out_c && stride == 1;
    snprintf(name, sizeof name, "%s.bn1", prefix);
    nb_bn(b, name);
    nb_relu(b);
    int act = nb_here(b);
    snprintf(name, sizeof name, "%s.conv1", prefix);
    wrn_conv(b, name, out_c, 3, stride, 1);
    snprintf(name, sizeof name, "%s.bn2", prefix);
    nb_bn(b, name);
    nb_relu(b);
    if (p > 0)
        nb_dropout(b, p);
    snprintf(name, sizeof name, "%s.conv2", prefix);
    wrn_conv(b, name, out_c, 3, 1, 1);
    int branch = nb_here(b), shortcut = input;
    if (!equal) {
        nb_from(b, act);
        snprintf(name, sizeof name, "%s.convShortcut", prefix);
        wrn_conv(b, name, out_c, 1, stride, 0);
        shortcut = nb_here(b);
        nb_from(b, branch);
    }
    nb_add(b, shortcut);
}

/* WRN-d-k (Zagoruyko and Komodakis): (d - 4) / 6 blocks per group, widths
 * 16k, 32k, 64k, strides 1, 2, 2, then BN-ReLU, 8x8 average pool, linear. */
static void build_wrn(net_builder *b, int depth, int width, float p)
{
    int blocks = (depth - 4) / 6, widths[3] = {16 * width, 32 * width, 64 * width};
    wrn_conv(b, "conv1", 16, 3, 1, 1);
    for (int g = 0; g < 3; g++)
        for (int i = 0; i < blocks; i++) {
            char prefix[32];
            snprintf(prefix, sizeof prefix, "block%d.layer.%d", g + 1, i);
            wrn_block(b, prefix, widths[g], i == 0 && g > 0 ? 2 : 1, p);
        }
    nb_bn(b, "bn1");
    nb_relu(b);
    nb_avgpool(b, b->h, b->h);
    nb_linear(b, "fc", b->m->spec.classes);
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
    } else if (strcmp(spec->arch, "allcnn") == 0 || strcmp(spec->arch, "wrn") == 0) {
        /* Three stride-2 stages end at 8x8 only from 32x32 (CIFAR). */
        if (spec->in_h != 32 || spec->in_w != 32) {
            snprintf(err, errlen, "model.arch: %s needs 32x32 inputs (CIFAR), got %dx%d",
                     spec->arch, spec->in_h, spec->in_w);
            return -1;
        }
        if (spec->arch[0] == 'a')
            build_allcnn(b, spec->dropout < 0 ? 0.5f : spec->dropout);
        else if (spec->depth < 10 || (spec->depth - 4) % 6 != 0 || spec->width < 1) {
            snprintf(err, errlen, "model.depth: WRN needs depth 6n+4 >= 10 and width >= 1, got "
                     "%d-%d", spec->depth, spec->width);
            return -1;
        } else
            build_wrn(b, spec->depth, spec->width, spec->dropout < 0 ? 0.0f : spec->dropout);
    } else {
        snprintf(err, errlen, "model.arch: unknown \"%s\"; known: lenet, mlp, allcnn, wrn",
                 spec->arch);
        return -1;
    }
    return 0;
}
