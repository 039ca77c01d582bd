// amdkv HIP-on-CUDA compatibility layer: ATen/hip/HIPContext.h on a CUDA build of torch.
// ROCm torch spells these at::hip::* (hipified from at::cuda::*); here they are the CUDA ones.
#pragma once
#include <hip/hip_runtime.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAStream.h>
#include <c10/cuda/CUDAGuard.h>
namespace at { namespace hip {
using at::cuda::getCurrentDeviceProperties;
using at::cuda::getDeviceProperties;
inline c10::cuda::CUDAStream getCurrentHIPStream(c10::DeviceIndex d = -1) { return c10::cuda::getCurrentCUDAStream(d); }
inline c10::cuda::CUDAStream getCurrentHIPStreamMasqueradingAsCUDA(c10::DeviceIndex d = -1) {
  return c10::cuda::getCurrentCUDAStream(d);
}
inline c10::cuda::CUDAStream getDefaultHIPStream(c10::DeviceIndex d = -1) { return c10::cuda::getDefaultCUDAStream(d); }
using HIPStream = c10::cuda::CUDAStream;
using HIPGuard = c10::cuda::CUDAGuard;
using OptionalHIPGuard = c10::cuda::OptionalCUDAGuard;
using HIPGuardMasqueradingAsCUDA = c10::cuda::CUDAGuard;
using OptionalHIPGuardMasqueradingAsCUDA = c10::cuda::OptionalCUDAGuard;
}}  // namespace at::hip
namespace c10 { namespace hip {
using HIPStream = c10::cuda::CUDAStream;
using HIPGuard = c10::cuda::CUDAGuard;
using OptionalHIPGuard = c10::cuda::OptionalCUDAGuard;
using HIPStreamGuard = c10::cuda::CUDAStreamGuard;
inline c10::cuda::CUDAStream getCurrentHIPStream(c10::DeviceIndex d = -1) { return c10::cuda::getCurrentCUDAStream(d); }
inline c10::cuda::CUDAStream getDefaultHIPStream(c10::DeviceIndex d = -1) { return c10::cuda::getDefaultCUDAStream(d); }
}}  // namespace c10::hip
#ifndef C10_HIP_KERNEL_LAUNCH_CHECK
#define C10_HIP_KERNEL_LAUNCH_CHECK() C10_CUDA_KERNEL_LAUNCH_CHECK()
#endif
#ifndef C10_HIP_CHECK
#define C10_HIP_CHECK(x) C10_CUDA_CHECK(x)
#endif
