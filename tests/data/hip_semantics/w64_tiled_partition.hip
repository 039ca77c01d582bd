#include <hip/hip_cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void k(float* x){ auto t = cg::tiled_partition<64>(cg::this_thread_block()); x[t.thread_rank()] = 0; }
