/* The CPU backend's sums that several of its ops share (cpu_util.h): a
 * bias gradient's row sum, and per-thread partial gradients added up in
 * thread order. */
#include "cpu_util.h"

CPU_HOT float cpu_row_sum(size_t count, const float *x)
{
    float s = 0.0f;
#pragma omp simd reduction(+ : s)
    for (size_t j = 0; j < count; j++)
        s += x[j];
    return s;
}

void cpu_sum_thread_blocks(int threads, const float *blocks, size_t stride, size_t n1,
                           float *out1, size_t n2, float *out2)
{
    for (size_t j = 0; j < n1 + (out2 ? n2 : 0); j++) {
        float sum = blocks[j];
        for (int t = 1; t < threads; t++)
            sum += blocks[stride * t + j];
        if (j < n1)
            out1[j] = sum;
        else
            out2[j - n1] = sum;
    }
}
