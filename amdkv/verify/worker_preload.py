"""Imported once by the worker fork server (fork_server.py): what every spare needs and an exec'd
spare pays for on each start (torch, Triton, the job code). Nothing here may initialise a GPU,
start threads or read per-worker settings: every forked worker inherits this state."""

import torch  # noqa: F401
import triton  # noqa: F401
import triton.language  # noqa: F401

from amdkv.verify import worker, worker_jobs  # noqa: F401
