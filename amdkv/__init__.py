"""amdkv: execution-verified GPU kernels for AMD Instinct GPUs.

The core subpackages (`amdkv.tasks`, `amdkv.verify`) import only the standard library, torch,
triton and numpy so that they run on a bare GPU machine; heavier stages load their own deps.
"""

__version__ = "0.1.0"
