#define TILE 64
__global__ void copy(const float* a, float* b, int n){ __shared__ float t[TILE]; int i = blockIdx.x * TILE + threadIdx.x; if (i < n) { t[threadIdx.x] = a[i]; __syncthreads(); b[i] = t[threadIdx.x]; } }
