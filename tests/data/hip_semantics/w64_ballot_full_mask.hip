__device__ bool all_pos(float v){ unsigned long long m = __ballot(v > 0); return m == 0xFFFFFFFFFFFFFFFFull; }
