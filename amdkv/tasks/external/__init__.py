"""Loaders of external benchmarks into amdkv tasks (docs/benchmarks.md).

| suite spec | benchmark | what a candidate is |
|---|---|---|
| `kernelbench:PATH` | KernelBench problem folders (level1-4) | `ModelNew` (Triton, or HIP/CUDA `load_inline`) |
| `pytorch2hip:PATH`, `pytorch2hip:builtin` | the same problems / amdkv's bundled suites, HIP only | `ModelNew` in HIP |
| `tritonbench-g:PATH` | TritonBench-G (thunlp/TritonBench, or GEAK-eval's revised copy) | the kernel code above the separator |
| `rocmbench:PATH` | GEAK-eval's ROCm set | the kernel code above the separator |

PATH is always a local checkout the user already has; loaders never download. Every task keeps its
licence and provenance (repository, file, commit, sha256). The registry is
`amdkv.tasks.suites.SUITE_LOADERS`. Standard library (and torch, for task files) only.
"""
