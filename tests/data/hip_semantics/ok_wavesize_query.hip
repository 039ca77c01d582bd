int wave(){ int w; hipDeviceGetAttribute(&w, hipDeviceAttributeWarpSize, 0); return w; }
__device__ float g(float v){ return __shfl(v, 0); }
