/* Convolution weights between PyTorch's KCRS and KRSC (models/param_layout.h):
 * every element lands where the index formula says, for odd sizes and 1x1;
 * the round trip gives the same bits; over a whole model (WRN-16-4, LeNet)
 * every convolution weight moves, every other tensor and the padding stay. */
#include <stdlib.h>
#include <string.h>

#include "param_layout.h"
#include "testutil.h"

static void check_weight(int k, int c, int r, int s)
{
    const size_t n = (size_t)k * c * r * s;
    float *kcrs = malloc(n * sizeof(float)), *krsc = malloc(n * sizeof(float));
    float *back = malloc(n * sizeof(float));
    test_fill_uniform(kcrs, n, -1, 1);
    conv_weight_relayout(PARAM_LAYOUT_KCRS, k, c, r, s, kcrs, krsc);
    size_t bad = 0;
    for (int o = 0; o < k; o++)
        for (int i = 0; i < c; i++)
            for (int y = 0; y < r; y++)
                for (int x = 0; x < s; x++)
                    bad += krsc[(((size_t)o * r + y) * s + x) * c + i] !=
                           kcrs[(((size_t)o * c + i) * r + y) * s + x];
    CHECK(bad == 0, "%dx%dx%dx%d: %zu elements misplaced", k, c, r, s, bad);
    conv_weight_relayout(PARAM_LAYOUT_KRSC, k, c, r, s, krsc, back);
    CHECK(memcmp(back, kcrs, n * sizeof(float)) == 0, "%dx%dx%dx%d: round trip differs", k, c,
          r, s);
    free(kcrs);
    free(krsc);
    free(back);
}

static void check_model(const char *arch, int in_c, int hw, int depth, int width)
{
    model m;
    char err[256];
    model_spec spec = {.depth = depth, .width = width, .dropout = -1, .classes = 10,
                       .in_c = in_c, .in_h = hw, .in_w = hw};
    snprintf(spec.arch, sizeof spec.arch, "%s", arch);
    if (model_build(&m, NULL, &spec, 1, 1, err, sizeof err) != 0) {
        CHECK(0, "%s: %s", arch, err);
        return;
    }
    float *v = malloc(m.nparams * sizeof(float)), *orig = malloc(m.nparams * sizeof(float));
    float *tmp = malloc(model_conv_weight_floats(&m) * sizeof(float));
    test_fill_uniform(v, m.nparams, -1, 1);
    memcpy(orig, v, m.nparams * sizeof(float));
    model_relayout_params(&m, PARAM_LAYOUT_KCRS, v, tmp);
    int convs = 0, moved = 0, bad = 0;
    size_t covered = 0;
    for (int t = 0; t < m.ntensors; t++) {
        const tensor_info *ti = &m.tensors[t];
        if (ti->is_stat)
            continue;
        covered += ti->count;
        if (ti->ndim != 4) {
            bad += memcmp(v + ti->offset, orig + ti->offset, ti->count * sizeof(float)) != 0;
            continue;
        }
        convs++;
        conv_weight_relayout(PARAM_LAYOUT_KCRS, ti->shape[0], ti->shape[1], ti->shape[2],
                             ti->shape[3], orig + ti->offset, tmp);
        bad += memcmp(v + ti->offset, tmp, ti->count * sizeof(float)) != 0;
        moved += ti->shape[1] > 1 && ti->shape[2] * ti->shape[3] > 1 &&
                 memcmp(v + ti->offset, orig + ti->offset, ti->count * sizeof(float)) != 0;
    }
    CHECK(convs > 0 && moved > 0 && bad == 0, "%s: %d convolution weights, %d moved, %d tensors "
          "wrong", arch, convs, moved, bad);
    /* The padding between tensors: the vector outside the tensors. */
    size_t same = 0;
    for (size_t i = 0; i < m.nparams; i++)
        same += v[i] == orig[i];
    CHECK(same >= m.nparams - covered, "%s: padding changed", arch);
    model_relayout_params(&m, PARAM_LAYOUT_KRSC, v, tmp);
    CHECK(memcmp(v, orig, m.nparams * sizeof(float)) == 0, "%s: round trip differs", arch);
    free(v);
    free(orig);
    free(tmp);
    model_free(&m, NULL);
}

int main(void)
{
    test_init("param_layout");
    check_weight(1, 1, 1, 1);
    check_weight(5, 3, 3, 3);
    check_weight(7, 13, 1, 1);
    check_weight(4, 6, 5, 5);
    check_weight(3, 2, 2, 7);
    check_model("lenet", 1, 28, 0, 0);
    check_model("wrn", 3, 32, 16, 4);
    return test_main_end();
}
