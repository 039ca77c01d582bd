#define WARP_SIZE 64
__global__ void k(float* x){ int lane = threadIdx.x % WARP_SIZE; x[lane] = 0; }
