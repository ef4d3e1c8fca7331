/* Launch shapes and block reductions shared by the .cu files (CUDA C++ only). */
#ifndef PARLE_LAUNCH_CUH
#define PARLE_LAUNCH_CUH

#include <stddef.h>
#include <cuda_runtime_api.h>

/* 4096 blocks of 256 threads (1M threads) fill even a 132-SM H100 several
 * times over; past that each thread loops instead of the grid growing. */
enum { THREADS_PER_BLOCK = 256, MAX_BLOCKS = 4096 };

template <typename F>
__global__ void for_each_index_kernel(size_t n, F f)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        f(i);
}

/* Run f(i) for every i in [0, n) on stream s, in one launch for any n. */
template <typename F>
static cudaError_t for_each_index(cudaStream_t s, size_t n, F f)
{
    if (n == 0)
        return cudaSuccess;
    size_t blocks = (n + THREADS_PER_BLOCK - 1) / THREADS_PER_BLOCK;
    if (blocks > MAX_BLOCKS)
        blocks = MAX_BLOCKS;
    for_each_index_kernel<<<(unsigned)blocks, THREADS_PER_BLOCK, 0, s>>>(n, f);
    return cudaGetLastError();
}

/* The sum of v over the block, in thread 0 (other threads get partial sums).
 * blockDim.x must be a multiple of 32, at most 1024. The order of the
 * additions is fixed by the launch shape, so results repeat bit for bit. */
template <typename T>
__device__ T block_sum(T v)
{
    __shared__ T warp_sums[32];
    const unsigned lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    for (int off = 16; off > 0; off /= 2)
        v += __shfl_down_sync(0xffffffffu, v, off);
    __syncthreads(); /* warp_sums may still be read by a previous call */
    if (lane == 0)
        warp_sums[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < blockDim.x / 32 ? warp_sums[lane] : T(0);
        for (int off = 16; off > 0; off /= 2)
            v += __shfl_down_sync(0xffffffffu, v, off);
    }
    return v;
}

#endif
