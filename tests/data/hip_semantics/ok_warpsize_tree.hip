__device__ float wsum(float v){ for (int o = warpSize / 2; o > 0; o >>= 1) v += __shfl_down(v, o); return v; }
