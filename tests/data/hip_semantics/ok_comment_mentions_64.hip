// on CDNA a wavefront has 64 lanes: #define WARP_SIZE 64 would be wrong on NVIDIA
__device__ float f(float v){ for (int o = warpSize >> 1; o; o >>= 1) v += __shfl_xor(v, o); return v; }
