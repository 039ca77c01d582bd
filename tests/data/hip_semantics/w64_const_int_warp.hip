__global__ void k(float* x){ const int WAVE = 64; const int warp_size = 64; x[threadIdx.x % warp_size] = 0; float v = __shfl_xor(x[0], 1); x[1] = v; }
