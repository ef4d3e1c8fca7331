/* The one seam between host-only and CUDA compilation of shared maths. */
#ifndef PARLE_HOSTDEVICE_H
#define PARLE_HOSTDEVICE_H
#ifdef __CUDACC__
#define PARLE_HD __host__ __device__
#else
#define PARLE_HD
#endif
#endif
