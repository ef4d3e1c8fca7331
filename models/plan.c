/* Where a model's per-batch buffers live: one arena of context memory,
 * buffers whose lifetimes do not overlap sharing bytes.
 *
 * A pass is a sequence of steps: the batch is staged at step 0, layer i's
 * forward runs at 1 + i, the loss at L + 1 (L layers) and layer i's backward
 * at 2 L + 1 - i. A buffer lives from the step that first writes it to the
 * last that reads it, both included, so a layer's inputs and outputs never
 * share. In training every activation is read again in backward, so the
 * activations all stay; what is saved is the gradients': dy of layer i lives
 * only from its last consumer's backward to its own, and takes the place of
 * activations already read for the last time. An evaluation model keeps no
 * gradients, and an activation lives only until its last consumer's forward.
 *
 * Activations and their gradients take the model's activation type (2 bytes
 * at bf16); then the fp32 batch is staged, converted at step 0, and only
 * the converted copy lives on. A training model also has its batch slots,
 * alive across passes (the next batch is staged into one while the current
 * pass reads the other), so they never share. */
#include <stdint.h>
#include <stdlib.h>

#include "layers.h"

enum buf_kind { BUF_Y, BUF_DY, BUF_ARGMAX, BUF_SAVE_MEAN, BUF_SAVE_INVSTD, BUF_INPUT,
                BUF_INPUT_ACT, BUF_LABELS, BUF_GRAD_SCRATCH, BUF_SLOT_X, BUF_SLOT_Y };

typedef struct buf {
    enum buf_kind kind;
    int layer;
    size_t bytes;
    int first, last; /* steps */
    int slot;
} buf;

static int fwd_step(int i) { return 1 + i; }
static int loss_step(const model *m) { return m->nlayers + 1; }
static int bwd_step(const model *m, int i) { return 2 * m->nlayers + 1 - i; }
static int imax(int a, int b) { return a > b ? a : b; }
static int imin(int a, int b) { return a < b ? a : b; }

/* The last step that reads layer s's output (s = -1: the model's input). */
static int last_read(const model *m, int s)
{
    int last = s == m->nlayers - 1 ? loss_step(m) : fwd_step(s);
    if (s >= 0 && m->train && (layer_backward_reads(m, s) & READS_OUTPUT))
        last = imax(last, bwd_step(m, s));
    for (int j = s + 1; j < m->nlayers; j++) {
        const layer *l = &m->layers[j];
        if (l->src != s && l->src2 != s)
            continue;
        last = imax(last, fwd_step(j));
        if (m->train && (layer_backward_reads(m, j) & READS_INPUT))
            last = imax(last, bwd_step(m, j));
    }
    return last;
}

/* The step that first writes layer i's dy: its last consumer's backward
 * delivers into it (the loss, for the last layer). */
static int first_grad(const model *m, int i)
{
    int first = i == m->nlayers - 1 ? loss_step(m) : bwd_step(m, i);
    for (int j = i + 1; j < m->nlayers; j++)
        if (m->layers[j].src == i || m->layers[j].src2 == i)
            first = imin(first, bwd_step(m, j));
    return first;
}

static void add(buf *bufs, int *n, enum buf_kind kind, int index, size_t bytes, int first,
                int last)
{
    bufs[(*n)++] = (buf){.kind = kind, .layer = index, .bytes = bytes, .first = first,
                         .last = last};
}

/* Every per-batch buffer of m, with its lifetime. */
static int list_buffers(const model *m, buf *bufs)
{
    const size_t nb = (size_t)m->max_batch;
    const int end = bwd_step(m, 0);
    const size_t in_size = (size_t)m->spec.in_c * m->spec.in_h * m->spec.in_w;
    const size_t act = m->act == DTYPE_BF16 ? 2 : sizeof(float);
    const int f32 = m->act == DTYPE_F32;
    int n = 0;
    add(bufs, &n, BUF_INPUT, -1, nb * in_size * sizeof(float), 0, f32 ? last_read(m, -1) : 0);
    if (!f32)
        add(bufs, &n, BUF_INPUT_ACT, -1, nb * in_size * act, 0, last_read(m, -1));
    add(bufs, &n, BUF_LABELS, -1, nb * sizeof(int32_t), 0, loss_step(m));
    for (int s = 0; m->train && s < BACKEND_STAGE_SLOTS; s++) {
        add(bufs, &n, BUF_SLOT_X, s, nb * in_size * sizeof(float), 0, end);
        add(bufs, &n, BUF_SLOT_Y, s, nb * sizeof(int32_t), 0, end);
    }
    size_t scratch = 0;
    int scratch_first = end, scratch_last = 0;
    for (int i = 0; i < m->nlayers; i++) {
        const layer *l = &m->layers[i];
        const size_t out_bytes = nb * l->out_size * act;
        const int by = layer_fused_into(m, i); /* writes y first, reads dy last */
        add(bufs, &n, BUF_Y, i, out_bytes, fwd_step(by), last_read(m, i));
        if (m->train)
            add(bufs, &n, BUF_DY, i, out_bytes, first_grad(m, i), bwd_step(m, by));
        if (l->kind == LAYER_MAXPOOL)
            add(bufs, &n, BUF_ARGMAX, i, nb * l->out_size * sizeof(int32_t), fwd_step(by),
                m->train ? bwd_step(m, by) : fwd_step(i));
        if (l->kind == LAYER_BN) {
            /* Per channel, so small: kept for the whole pass. */
            add(bufs, &n, BUF_SAVE_MEAN, i, (size_t)l->out_c * sizeof(float), 0, end);
            add(bufs, &n, BUF_SAVE_INVSTD, i, (size_t)l->out_c * sizeof(float), 0, end);
        }
        /* A layer whose input has several consumers writes its dx here. */
        if (m->train && l->kind != LAYER_ADD && l->src >= 0 && m->layers[l->src].consumers > 1) {
            const size_t bytes = nb * m->layers[l->src].out_size * act;
            scratch = bytes > scratch ? bytes : scratch;
            scratch_first = imin(scratch_first, bwd_step(m, i));
            scratch_last = imax(scratch_last, bwd_step(m, i));
        }
    }
    if (scratch)
        add(bufs, &n, BUF_GRAD_SCRATCH, -1, scratch, scratch_first, scratch_last);
    return n;
}

/* By first step, then larger first; a total order, so that every build
 * (and the dry run) lays out alike. */
static int by_first(const void *a, const void *b)
{
    const buf *x = a, *y = b;
    if (x->first != y->first)
        return x->first < y->first ? -1 : 1;
    if (x->bytes != y->bytes)
        return x->bytes > y->bytes ? -1 : 1;
    if (x->layer != y->layer)
        return x->layer < y->layer ? -1 : 1;
    return (int)x->kind - (int)y->kind;
}

/* Greedy by first step: each buffer takes the smallest free slot that holds
 * it, else the largest free slot (grown), else a new one. Returns the slot
 * count; sizes[] gets each slot's bytes. */
static int assign_slots(buf *bufs, int n, size_t *sizes, int *busy_until)
{
    int slots = 0;
    qsort(bufs, (size_t)n, sizeof *bufs, by_first);
    for (int i = 0; i < n; i++) {
        buf *b = &bufs[i];
        int fit = -1, largest = -1;
        for (int s = 0; s < slots; s++) {
            if (busy_until[s] >= b->first)
                continue;
            if (sizes[s] >= b->bytes && (fit < 0 || sizes[s] < sizes[fit]))
                fit = s;
            if (largest < 0 || sizes[s] > sizes[largest])
                largest = s;
        }
        const int s = fit >= 0 ? fit : largest >= 0 ? largest : slots++;
        if (sizes[s] < b->bytes)
            sizes[s] = b->bytes;
        busy_until[s] = b->last;
        b->slot = s;
    }
    return slots;
}

static void bind(model *m, const buf *b, char *p)
{
    /* A slot's index rides in `layer`. */
    layer *l = b->layer >= 0 && b->kind != BUF_SLOT_X && b->kind != BUF_SLOT_Y
                   ? &m->layers[b->layer] : NULL;
    switch (b->kind) {
    case BUF_Y: l->y = (float *)p; break;
    case BUF_DY: l->dy = (float *)p; break;
    case BUF_ARGMAX: l->argmax = (int32_t *)p; break;
    case BUF_SAVE_MEAN: l->save_mean = (float *)p; break;
    case BUF_SAVE_INVSTD: l->save_invstd = (float *)p; break;
    case BUF_INPUT: m->input = (float *)p; break;
    case BUF_INPUT_ACT: m->input_act = (float *)p; break;
    case BUF_SLOT_X: m->slot_x[b->layer] = (float *)p; break;
    case BUF_SLOT_Y: m->slot_y[b->layer] = (int32_t *)p; break;
    case BUF_LABELS: m->labels = (int32_t *)p; break;
    case BUF_GRAD_SCRATCH: m->grad_scratch = (float *)p; break;
    }
}

size_t model_layout(model *m, char *arena)
{
    /* At most y, dy and argmax or two BN saves per layer, four more and the
     * slots. */
    const int cap = 4 * m->nlayers + 4 + 2 * BACKEND_STAGE_SLOTS;
    buf *bufs = malloc((size_t)cap * sizeof *bufs);
    size_t *sizes = calloc((size_t)cap, sizeof *sizes);
    size_t *offsets = malloc((size_t)cap * sizeof *offsets);
    int *busy = malloc((size_t)cap * sizeof *busy);
    size_t total = SIZE_MAX;
    if (bufs && sizes && offsets && busy) {
        const int n = list_buffers(m, bufs), slots = assign_slots(bufs, n, sizes, busy);
        total = 0;
        for (int s = 0; s < slots; s++) {
            offsets[s] = total;
            /* Whole 256-byte blocks, so every buffer is as aligned as the
             * arena's base (cuDNN and vector loads like 256). */
            total += (sizes[s] + 255) & ~(size_t)255;
        }
        for (int i = 0; arena && i < n; i++)
            bind(m, &bufs[i], arena + offsets[bufs[i].slot]);
    }
    free(bufs);
    free(sizes);
    free(offsets);
    free(busy);
    return total;
}
