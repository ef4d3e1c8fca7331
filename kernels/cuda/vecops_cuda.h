/* CUDA versions of the vector ops, ReLU and dropout of backend.h. Same
 * arguments and meaning as there, with a stream in place of the context and an
 * error buffer at the end; every pointer (except vec_mean's array of input
 * pointers, which is on the host) is device memory. The work is queued on
 * `s`; a 0 return means it was launched, and a later cuda_stream_sync reports
 * any failure while it ran. Callable from C. */
#ifndef PARLE_VECOPS_CUDA_H
#define PARLE_VECOPS_CUDA_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>
#include "backend.h"
#include "philox.h"

#ifdef __cplusplus
extern "C" {
#endif

/* vec_mean takes its input pointers as a kernel argument; this bounds them. */
#define CUDA_VEC_MEAN_MAX_INPUTS 128

int cuda_vec_axpby(cudaStream_t s, size_t n, float a, const float *x, float b, float *y,
                   char *err, size_t errlen);
int cuda_vec_scale(cudaStream_t s, size_t n, float a, float *x, char *err, size_t errlen);
/* xs: host array of k device pointers, 1 <= k <= CUDA_VEC_MEAN_MAX_INPUTS;
 * out may alias one of them. */
int cuda_vec_mean(cudaStream_t s, size_t n, const float *const *xs, int k, float *out, char *err,
                  size_t errlen);
/* sum_i (a_i - b_i)^2 in double into scratch[0]; scratch is device memory of
 * CUDA_VEC_DIST2_SCRATCH doubles. The caller copies the sum back. */
#define CUDA_VEC_DIST2_BLOCKS 1024
#define CUDA_VEC_DIST2_SCRATCH (CUDA_VEC_DIST2_BLOCKS + 1)
int cuda_vec_dist2(cudaStream_t s, size_t n, const float *a, const float *b, double *scratch,
                   char *err, size_t errlen);
int cuda_vec_sgd_momentum(cudaStream_t s, size_t n, float lr, float mu, float wd, int nesterov,
                          float *w, float *v, const float *g, char *err, size_t errlen);
int cuda_vec_parle_inner(cudaStream_t s, size_t n, float eta, float mu, float lambda, float gamma,
                         float alpha, float *y, float *z, float *v, const float *g,
                         const float *xhat, char *err, size_t errlen);
/* x and xhat may alias. */
int cuda_vec_parle_outer(cudaStream_t s, size_t n, float eta, float mu, float rho, float *x,
                         float *u, const float *xhat, const float *z, const float *zbar,
                         char *err, size_t errlen);
int cuda_vec_elastic_step(cudaStream_t s, size_t n, float eta, float mu, float lambda, float rho,
                          float *x, float *u, const float *g, const float *xbar, char *err,
                          size_t errlen);

/* ReLU and dropout take activations of type `act` (bf16 ones as bit
 * patterns behind the float pointers, backend.h). */
int cuda_relu_forward(cudaStream_t s, enum backend_dtype act, size_t count, const float *x,
                      float *y, char *err, size_t errlen);
/* dx may alias dy. */
int cuda_relu_backward(cudaStream_t s, enum backend_dtype act, size_t count, const float *y,
                       const float *dy, float *dx, char *err, size_t errlen);
/* The mask is the CPU's: element i kept iff philox_uniform_at(key, counter, i) >= p. */
int cuda_dropout_forward(cudaStream_t s, enum backend_dtype act, size_t count, float p,
                         philox_key key, uint64_t counter, const float *x, float *y, char *err,
                         size_t errlen);
int cuda_dropout_backward(cudaStream_t s, enum backend_dtype act, size_t count, float p,
                          philox_key key, uint64_t counter, const float *dy, float *dx, char *err,
                          size_t errlen);

#ifdef __cplusplus
}
#endif

#endif
