__global__ void k(float* acc, const float* x){ unsafeAtomicAdd(acc, x[threadIdx.x]); }
