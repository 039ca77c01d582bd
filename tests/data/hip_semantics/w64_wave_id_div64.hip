__global__ void k(float* x){
  __shared__ float part[16];
  int wid = threadIdx.x / 64;
  float v = x[threadIdx.x];
  for (int o = warpSize/2; o > 0; o >>= 1) v += __shfl_down(v, o);
  part[wid] = v;
}
