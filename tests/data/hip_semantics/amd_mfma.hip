typedef float floatx4 __attribute__((ext_vector_type(4)));
__device__ floatx4 f(float a, float b, floatx4 c){ return __builtin_amdgcn_mfma_f32_16x16x4f32(a, b, c, 0, 0, 0); }
