__device__ float bcast(float v){ return __shfl(v, 0, 64); }
