__device__ bool full(bool p){ return __popcll(__ballot(p)) == 64; }
