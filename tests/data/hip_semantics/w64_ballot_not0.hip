__device__ bool all_pos(float v){ return __ballot(v > 0.f) == ~0ull; }
