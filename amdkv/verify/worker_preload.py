"""Imported once by the worker fork server (fork_server.py): what every spare needs and an exec'd
spare pays for on each start (torch, Triton, the job code). Nothing here may initialise a GPU,
start threads or read per-worker settings: every forked worker inherits this state."""

import os

import torch  # noqa: F401
import triton  # noqa: F401
import triton.language  # noqa: F401

# torch.profiler's first session runs `hasattr(torch, "_inductor")`, which imports the whole of
# torch._inductor (~900 modules: sympy, mpmath, ...). Every GPU spare pre-warms the profiler, and
# that import was 5.3 of the 11.4 host CPU-seconds a forked spare used per candidate on the H200
# (docs/gpu.md, Throughput). Imported here once, it is inherited by every forked worker. The
# import initialises no GPU (torch.cuda.is_initialized() stays False; forked GPU workers ran).
# A server for the CPU interpreter (TRITON_INTERPRET, fork_server.shared) skips it: nothing
# profiles there, and it would add 1.5 s to the server's start and 7 ms to every fork.
if not os.environ.get("TRITON_INTERPRET"):
    import torch._inductor  # noqa: F401
