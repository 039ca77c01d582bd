"""`amdkv reverify`: real verification (CPU interpreter) of a built dataset's rows and of an outside
corpus in KernelBook's layout; the new verdicts are records beside the old ones."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from amdkv.config import VerifierConfig
from amdkv.data.api import build_dataset
from amdkv.data.demo import SolutionRecords
from amdkv.data.policy import BuildPolicy
from amdkv.data.reverify import reverify
from amdkv.data.store import RecordStore
from amdkv.errors import BadInputError

pytest.importorskip("datasets", reason="dataset builds need datasets (pip install 'amdkv[data]')")
REPO = Path(__file__).resolve().parent.parent
CPU = VerifierConfig.from_env(device="cpu", jobs=2, verdict_cache=False)

KERNELBOOK_PYTHON = '''import torch
import torch.nn as nn


class ScaleAdd(nn.Module):
    def __init__(self, scale=2.0):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        return x * self.scale + 1.0


def get_inputs():
    return [torch.rand([4, 4, 4, 4])]


def get_init_inputs():
    return [[], {'scale': 3.0}]
'''

KERNELBOOK_TRITON = '''import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def scale_add_kernel(in_ptr, out_ptr, scale, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(in_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * scale + 1.0, mask=mask)


class ScaleAddNew(nn.Module):
    def __init__(self, scale=2.0):
        super().__init__()
        self.scale = scale

    def forward(self, input_0):
        x = input_0.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        scale_add_kernel[(triton.cdiv(n, 256),)](x, out, self.scale, n, BLOCK=256)
        return out
'''


@pytest.mark.slow
def test_reverify_a_built_dataset_writes_new_verdicts_beside_the_old(tmp_path):
    from amdkv.tasks.builtin import solution_path
    from amdkv.tasks.suites import load_suite
    from amdkv.verify.scheduler import open_verifier

    tasks = [t for t in load_suite("builtin:train") if t.id in ("l1_relu", "l1_softmax")]
    store = SolutionRecords(tmp_path / "records")
    with open_verifier(CPU) as verifier:
        pairs = [(t, str(solution_path(t.id))) for t in tasks]
        verifier.verify_many(pairs, on_result=store.add)
    store.close()
    build_dataset("triton", tmp_path / "records", tmp_path / "ds", policy=BuildPolicy(splits=(("train", 1.0),)),
                  progress=False)
    summary = reverify(str(tmp_path / "ds"), tmp_path / "re", verifier_config=CPU, progress=False)
    assert summary["programs"] == 2 and summary["agreement"] == 1.0 and summary["platforms"] == {"cpu": 2}
    assert summary["transitions"] == [{"old": "ok@cpu", "new": "ok", "count": 2}]
    records = list(RecordStore(tmp_path / "re"))
    assert {r.task_id for r in records} == {"l1_relu", "l1_softmax"}
    for record in records:
        assert record.origin["old_verdict"]["status"] == "ok" and record.verdict["status"] == "ok"
        assert record.origin["reverify"]["which"] == "kernel" and record.verdict["platform"] == "cpu"
    # resumed: nothing is verified twice
    again = reverify(str(tmp_path / "ds"), tmp_path / "re", verifier_config=CPU, progress=False)
    assert again["verified_now"] == 0 and again["programs"] == 2
    # the new evidence builds a dataset again
    build_dataset("triton", tmp_path / "re", tmp_path / "ds2", policy=BuildPolicy(splits=(("train", 1.0),)),
                  progress=False)
    with pytest.raises(BadInputError, match="no config 'nope'"):
        reverify(str(tmp_path / "ds"), tmp_path / "re", config="nope", verifier_config=CPU, progress=False)


@pytest.mark.slow
def test_reverify_kernelbook_layout_rows(tmp_path):
    from datasets import Dataset

    rows = [{"entry_point": "ScaleAdd", "python_code": KERNELBOOK_PYTHON, "triton_code": KERNELBOOK_TRITON,
             "original_triton_code": "", "repo_name": "someone/repo", "module_name": "ScaleAdd", "synthetic": False,
             "uuid": 7, "licenses": ["MIT"], "stars": 3, "sha": "abc123", "repo_link": "https://example.org/repo"},
            {"entry_point": "TensorInit", "synthetic": False, "uuid": 8, "licenses": ["MIT"], "stars": 0,
             "python_code": KERNELBOOK_PYTHON.replace("class ScaleAdd", "class TensorInit").replace(
                 "[[], {'scale': 3.0}]", "[[torch.ones(2)], {}]"),
             "triton_code": KERNELBOOK_TRITON.replace("ScaleAddNew", "TensorInitNew"), "original_triton_code": "",
             "repo_name": "someone/repo", "module_name": "TensorInit", "sha": "abc123", "repo_link": ""}]
    Dataset.from_list(rows).to_parquet(str(tmp_path / "kernelbook.parquet"))
    proc = subprocess.run([sys.executable, "-m", "amdkv.cli", "reverify", str(tmp_path / "kernelbook.parquet"),
                           "--out", str(tmp_path / "re"), "--device", "cpu", "--json"],
                          env={**os.environ, "PYTHONPATH": str(REPO), "AMDKV_VERDICT_CACHE": "0"},
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert summary["layout"] == "kernelbook"
    assert summary["transitions"] == [{"old": "none", "new": "ok", "count": 1}]
    assert [u["row_id"] for u in summary["unsupported"]] == ["kernelbook/8_TensorInit"]
    assert "not plain literals" in summary["unsupported"][0]["error"]
    record = next(iter(RecordStore(tmp_path / "re")))
    assert record.licence == "MIT" and record.task["suite"] == "kernelbook"
    assert "class ModelNew(ScaleAddNew)" in record.candidate["source"] and "'scale': 3.0" in record.candidate["source"]
