__device__ float seg(float v){ for (int o = 8; o > 0; o >>= 1) v += __shfl_xor(v, o, 16); return v; }
