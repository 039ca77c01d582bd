__global__ void k(const float* x, float* y, unsigned long long n){ unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = x[i] * 2.f; }
