// amdkv HIP-on-CUDA compatibility layer: hip/hip_runtime.h (project-owned; not HIP's header).
//
// Lets HIP kernels written for AMD GPUs compile with nvcc and run on an NVIDIA GPU, so that the
// verifier can judge their *results* there (platform `cuda`, never reported as AMD numbers).
// It maps the HIP runtime API subset that generated kernels use onto the CUDA runtime, and the
// HIP device intrinsics onto their CUDA forms. What it cannot emulate (docs/hip.md): a 64-lane
// wavefront (warpSize is 32 here), AMD-only builtins (__builtin_amdgcn_*, MFMA), FNUZ fp8, the LDS
// size limit, and what __launch_bounds__ means on AMD. amdkv.verify.backends.hip_semantics flags
// candidates whose meaning depends on those before they are built.
#pragma once
#ifndef AMDKV_HIP_COMPAT_RUNTIME_H
#define AMDKV_HIP_COMPAT_RUNTIME_H

#include <cuda_runtime.h>
// cuda_fp16.h / cuda_bf16.h implement their own __shfl*_sync overloads: include them before the
// mask-less __shfl* macros below, or the macros would rewrite CUDA's own definitions.
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cstdint>
#include <cstddef>

#ifndef __HIP_PLATFORM_NVIDIA__
#define __HIP_PLATFORM_NVIDIA__ 1
#endif
#ifndef __HIP_PLATFORM_NVCC__
#define __HIP_PLATFORM_NVCC__ 1
#endif
#ifndef __HIPCC__
#define __HIPCC__ 1
#endif
#if defined(__CUDA_ARCH__) && !defined(__HIP_DEVICE_COMPILE__)
#define __HIP_DEVICE_COMPILE__ 1
#endif

// With AMDKV_HIP_TORCH_STREAM (set by amdkv's build step for torch extensions) HIP's null stream
// means torch's current stream, as PyTorch code expects and as CUDA-graph timing needs (a launch
// on the legacy default stream breaks stream capture).
#if defined(AMDKV_HIP_TORCH_STREAM)
#include <c10/cuda/CUDAStream.h>
static inline cudaStream_t amdkv_hip_stream(cudaStream_t s) {
  return s ? s : c10::cuda::getCurrentCUDAStream().stream();
}
#else
static inline cudaStream_t amdkv_hip_stream(cudaStream_t s) { return s; }
#endif

// ---------------------------------------------------------------- types and constants
typedef cudaError_t hipError_t;
typedef cudaStream_t hipStream_t;
typedef cudaEvent_t hipEvent_t;
typedef cudaDeviceProp hipDeviceProp_t;
typedef cudaMemcpyKind hipMemcpyKind;
typedef cudaFuncAttributes hipFuncAttributes;
typedef cudaDeviceAttr hipDeviceAttribute_t;
typedef cudaGraph_t hipGraph_t;
typedef cudaGraphExec_t hipGraphExec_t;
#define hipSuccess cudaSuccess
#define hipErrorInvalidValue cudaErrorInvalidValue
#define hipErrorOutOfMemory cudaErrorMemoryAllocation
#define hipErrorNotReady cudaErrorNotReady
#define hipErrorInvalidDevice cudaErrorInvalidDevice
#define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#define hipMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define hipMemcpyDeviceToDevice cudaMemcpyDeviceToDevice
#define hipMemcpyHostToHost cudaMemcpyHostToHost
#define hipMemcpyDefault cudaMemcpyDefault
#define hipStreamDefault cudaStreamDefault
#define hipStreamNonBlocking cudaStreamNonBlocking
#define hipEventDefault cudaEventDefault
#define hipEventDisableTiming cudaEventDisableTiming
#define hipHostMallocDefault cudaHostAllocDefault
#define hipFuncAttributeMaxDynamicSharedMemorySize cudaFuncAttributeMaxDynamicSharedMemorySize
#define hipFuncCachePreferShared cudaFuncCachePreferShared
#define hipDeviceAttributeMultiprocessorCount cudaDevAttrMultiProcessorCount
#define hipDeviceAttributeMaxSharedMemoryPerBlock cudaDevAttrMaxSharedMemoryPerBlock
#define hipDeviceAttributeMaxThreadsPerBlock cudaDevAttrMaxThreadsPerBlock
#define hipDeviceAttributeWarpSize cudaDevAttrWarpSize
#define hipDeviceAttributeL2CacheSize cudaDevAttrL2CacheSize
#define hipDeviceAttributeClockRate cudaDevAttrClockRate
#define hipDeviceAttributeMaxRegistersPerBlock cudaDevAttrMaxRegistersPerBlock
// hipDeviceProp_t field spelled differently in CUDA's cudaDeviceProp.
#define maxSharedMemoryPerMultiProcessor sharedMemPerMultiprocessor

// ---------------------------------------------------------------- runtime API
#define hipMalloc cudaMalloc
#define hipMallocManaged cudaMallocManaged
#define hipMallocAsync cudaMallocAsync
#define hipFree cudaFree
#define hipFreeAsync cudaFreeAsync
#define hipHostMalloc(p, n, ...) cudaMallocHost((p), (n))
#define hipHostFree cudaFreeHost
#define hipMemcpy cudaMemcpy
#define hipMemcpyAsync cudaMemcpyAsync
#define hipMemcpy2D cudaMemcpy2D
#define hipMemcpy2DAsync cudaMemcpy2DAsync
#define hipMemset cudaMemset
#define hipMemsetAsync cudaMemsetAsync
#define hipMemcpyToSymbol cudaMemcpyToSymbol
#define hipMemcpyToSymbolAsync cudaMemcpyToSymbolAsync
#define hipMemcpyFromSymbol cudaMemcpyFromSymbol
#define hipMemGetInfo cudaMemGetInfo
#define hipGetLastError cudaGetLastError
#define hipPeekAtLastError cudaPeekAtLastError
#define hipGetErrorString cudaGetErrorString
#define hipGetErrorName cudaGetErrorName
#define hipGetDevice cudaGetDevice
#define hipSetDevice cudaSetDevice
#define hipGetDeviceCount cudaGetDeviceCount
#define hipGetDeviceProperties cudaGetDeviceProperties
#define hipDeviceGetAttribute cudaDeviceGetAttribute
#define hipStreamCreate cudaStreamCreate
#define hipStreamCreateWithFlags cudaStreamCreateWithFlags
#define hipStreamDestroy cudaStreamDestroy
#define hipStreamWaitEvent cudaStreamWaitEvent
#define hipEventCreate cudaEventCreate
#define hipEventCreateWithFlags cudaEventCreateWithFlags
#define hipEventRecord cudaEventRecord
#define hipEventSynchronize cudaEventSynchronize
#define hipEventElapsedTime cudaEventElapsedTime
#define hipEventDestroy cudaEventDestroy
#define hipFuncSetAttribute(f, attr, v) cudaFuncSetAttribute((const void*)(f), (attr), (v))
#define hipFuncGetAttributes(a, f) cudaFuncGetAttributes((a), (const void*)(f))
#define hipOccupancyMaxActiveBlocksPerMultiprocessor cudaOccupancyMaxActiveBlocksPerMultiprocessor
#define hipOccupancyMaxPotentialBlockSize cudaOccupancyMaxPotentialBlockSize
#define hipLaunchKernel(f, g, b, args, shm, s) \
  cudaLaunchKernel((const void*)(f), (g), (b), (args), (shm), amdkv_hip_stream(s))
#define hipLaunchCooperativeKernel(f, g, b, args, shm, s) \
  cudaLaunchCooperativeKernel((const void*)(f), (g), (b), (args), (shm), amdkv_hip_stream(s))

// A device-wide synchronisation while a stream is being captured into a graph is an error in
// CUDA that invalidates the capture; HIP code calls it casually after launches. Inside a capture
// it is skipped (ordering within the captured stream is kept by the graph itself).
static inline cudaError_t hipDeviceSynchronize() {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(amdkv_hip_stream(0), &st) == cudaSuccess && st != cudaStreamCaptureStatusNone)
    return cudaSuccess;
  return cudaDeviceSynchronize();
}
static inline cudaError_t hipStreamSynchronize(cudaStream_t s) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  cudaStream_t real = amdkv_hip_stream(s);
  if (cudaStreamIsCapturing(real, &st) == cudaSuccess && st != cudaStreamCaptureStatusNone) return cudaSuccess;
  return cudaStreamSynchronize(real);
}

// hipLaunchKernelGGL(kernel, grid, block, dynamic_shared_bytes, stream, args...). A template
// kernel whose name contains commas must be wrapped in HIP_KERNEL_NAME(...), as with HIP itself.
#define HIP_KERNEL_NAME(...) __VA_ARGS__
#define HIP_SYMBOL(x) x
#define hipLaunchKernelGGL(kernel, grid, block, shmem, stream, ...) \
  kernel<<<(grid), (block), (shmem), amdkv_hip_stream(stream)>>>(__VA_ARGS__)
#define HIP_DYNAMIC_SHARED(type, var) extern __shared__ type var[];
#define HIP_DYNAMIC_SHARED_ATTRIBUTE

// Legacy HIP index spellings.
#define hipThreadIdx_x threadIdx.x
#define hipThreadIdx_y threadIdx.y
#define hipThreadIdx_z threadIdx.z
#define hipBlockIdx_x blockIdx.x
#define hipBlockIdx_y blockIdx.y
#define hipBlockIdx_z blockIdx.z
#define hipBlockDim_x blockDim.x
#define hipBlockDim_y blockDim.y
#define hipBlockDim_z blockDim.z
#define hipGridDim_x gridDim.x
#define hipGridDim_y gridDim.y
#define hipGridDim_z gridDim.z

// ---------------------------------------------------------------- cross-lane operations
// HIP's shuffles and votes take no mask: the whole wavefront takes part. CUDA 9+ has only the
// _sync forms, so the full 32-lane mask is used. warpSize is 32 here (64 on CDNA).
#define AMDKV_HIP_FULL_MASK 0xffffffffu
#define __shfl(...) __shfl_sync(AMDKV_HIP_FULL_MASK, __VA_ARGS__)
#define __shfl_up(...) __shfl_up_sync(AMDKV_HIP_FULL_MASK, __VA_ARGS__)
#define __shfl_down(...) __shfl_down_sync(AMDKV_HIP_FULL_MASK, __VA_ARGS__)
#define __shfl_xor(...) __shfl_xor_sync(AMDKV_HIP_FULL_MASK, __VA_ARGS__)
// HIP's __ballot returns a 64-bit mask (one bit per lane of a wave64); here the upper 32 bits are 0.
#define __ballot(p) ((unsigned long long)__ballot_sync(AMDKV_HIP_FULL_MASK, (p)))
#define __any(p) __any_sync(AMDKV_HIP_FULL_MASK, (p))
#define __all(p) __all_sync(AMDKV_HIP_FULL_MASK, (p))

__device__ static inline unsigned int __lane_id() {
  unsigned int id;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(id));
  return id;
}

// clang's non-temporal builtins (used by HIP code for streaming loads/stores): plain accesses.
#define __builtin_nontemporal_load(p) (*(p))
#define __builtin_nontemporal_store(v, p) (*(p) = (v))

// HIP provides float atomicMax/atomicMin; CUDA does not. Compare-and-swap emulation.
__device__ static inline float atomicMax(float* addr, float val) {
  int* a = reinterpret_cast<int*>(addr);
  int old = *a, assumed;
  do {
    assumed = old;
    if (__int_as_float(assumed) >= val) break;
    old = atomicCAS(a, assumed, __float_as_int(val));
  } while (assumed != old);
  return __int_as_float(old);
}
__device__ static inline float atomicMin(float* addr, float val) {
  int* a = reinterpret_cast<int*>(addr);
  int old = *a, assumed;
  do {
    assumed = old;
    if (__int_as_float(assumed) <= val) break;
    old = atomicCAS(a, assumed, __float_as_int(val));
  } while (assumed != old);
  return __int_as_float(old);
}
// HIP's relaxed float atomics; same result, ordinary atomics here.
#define atomicAddNoRet(p, v) ((void)atomicAdd((p), (v)))

#include "hip_fp16.h"
#include "hip_bf16.h"

#endif  // AMDKV_HIP_COMPAT_RUNTIME_H
