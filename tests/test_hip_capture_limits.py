"""The HIP capture process's limits: one intra-op thread, and a data-segment memory cap for a CPU or a
GPU capture.

On a 16-core H100 host (2026-12-05) the capture of the bundled `l2_rope` HIP reference died with
"libgomp: Thread creation failed" (its `__init__` builds cos/sin tables with a large CPU op, so
libgomp started a thread per core under the capture's 16-GiB address-space cap), and a correct
solution became `compile_error`. The candidate below writes what its process sees into the source
it hands to `load_inline`, and the capture report carries that source back: real capture
processes, forked or exec'd as the verifier starts them, nothing mocked."""

from __future__ import annotations

import re
import resource
import textwrap
from pathlib import Path

import pytest

from amdkv.verify.backends.hip import CAPTURE_MEMORY_BYTES, capture_hip_sources

PROBE = textwrap.dedent('''
    import resource
    import torch
    import torch.nn as nn
    from torch.utils.cpp_extension import load_inline

    class ModelNew(nn.Module):
        def __init__(self):
            super().__init__()
            # a CPU op large enough for torch to go parallel, as l2_rope's __init__ does
            torch.cos(torch.arange(1 << 20, dtype=torch.float64))
            seen = (f"threads={torch.get_num_threads()} as={resource.getrlimit(resource.RLIMIT_AS)[0]} "
                    f"data={resource.getrlimit(resource.RLIMIT_DATA)[0]}")
            self.ext = load_inline(name="probe", cpp_sources="// " + seen, functions=["f"])
''')
TASK = textwrap.dedent('''
    def get_init_inputs():
        return []
''')


def _seen(tmp_path: Path, gpu: bool, sandbox: str) -> dict[str, int]:
    cand, task = tmp_path / "probe.py", tmp_path / "task.py"
    cand.write_text(PROBE)
    task.write_text(TASK)
    cap = capture_hip_sources(cand, task, gpu=gpu, sandbox=sandbox)
    assert cap.worker_error is None, cap.worker_error
    assert cap.report.init_error is None, cap.report.init_error
    sources = " ".join(str(c.get("cpp_sources")) for c in cap.report.captures)
    found = dict(re.findall(r"(threads|as|data)=(-?\d+)", sources))
    assert set(found) == {"threads", "as", "data"}, sources
    return {k: int(v) for k, v in found.items()}


@pytest.mark.parametrize("gpu", [False, True], ids=["cpu-capture", "gpu-capture"])
def test_capture_runs_the_candidate_with_one_thread(tmp_path: Path, gpu: bool) -> None:
    assert _seen(tmp_path, gpu, "off")["threads"] == 1


@pytest.mark.parametrize("gpu, sandbox", [(False, "off"), (True, "auto"), (True, "off")],
                         ids=["cpu-capture", "gpu-capture", "gpu-capture-sandbox-off"])
def test_capture_caps_data_not_address_space(tmp_path: Path, gpu: bool, sandbox: str) -> None:
    """The cap is the data segment (RLIMIT_DATA), CPU or GPU capture, sandbox on or off: no address-space
    cap, which GPU runtimes' reserved ranges and CUDA torch's libraries fill before a candidate runs
    (session 28). The address-space limit is the one this test process has (none set by amdkv)."""
    seen = _seen(tmp_path, gpu, sandbox)
    assert seen["as"] == resource.getrlimit(resource.RLIMIT_AS)[0]
    assert seen["data"] == CAPTURE_MEMORY_BYTES
