__device__ int f(int v){ return __builtin_amdgcn_readfirstlane(v); }
