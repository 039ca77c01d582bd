constexpr int kWaveSize = 64;
__device__ float r(float v){ for(int o=kWaveSize/2;o>0;o>>=1) v+=__shfl_xor(v,o); return v; }
