__global__ void mm(const float* a, float* c){ int row = threadIdx.x / 64, col = threadIdx.x % 64; c[row * 64 + col] = a[col * 64 + row]; }
