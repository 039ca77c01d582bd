__global__ void k(const float* a, float* b, int n){ int i = blockIdx.x * blockDim.x + threadIdx.x; bool aligned = (n % 64) == 0; if (i < n) b[i] = aligned ? a[i] : -a[i]; }
