__device__ int count_pos(float v){ return __popcll(__ballot(v > 0.f)); }
