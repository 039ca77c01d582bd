"""Static AMD targets: compile Triton kernels for gfx90a/gfx942/gfx950 and read their resources.

No AMD GPU is needed: Triton's wheel carries an LLVM with the AMDGPU backend. See docs/amd_compile.md.
"""
