__device__ void wait(){ asm volatile("s_waitcnt vmcnt(0)" ::: "memory"); }
