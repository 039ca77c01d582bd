"""The data stage (DESIGN.md section 4): records, record store, builders, Hub layout, cards, publishing.

    from amdkv.data import Record, RecordStore
    store = RecordStore("runs/triton")
    store.append(Record.from_verification(task, candidate, verdict))     # generation writes records
    from amdkv.data import build_dataset
    build_dataset("triton", "runs/triton", "build/amdkv-triton")        # records -> Hub-layout folder

Guide: docs/data.md. `Record` and `RecordStore` need only the standard library; the builders load
datasets, datasketch, huggingface_hub and pyarrow (the `data` extra) when used. The names below
load on first use (PEP 562), so `import amdkv.data` stays light.
"""

from __future__ import annotations

from amdkv._lazy import lazy_exports

_EXPORTS = {
    "Record": "amdkv.data.records",
    "RECORD_SCHEMA_VERSION": "amdkv.data.records",
    "work_key": "amdkv.data.records",
    "RecordStore": "amdkv.data.store",
    "BuildPolicy": "amdkv.data.policy",
    "Builder": "amdkv.data.builder",
    "DATASETS": "amdkv.data.schemas",
    "SCHEMA_VERSIONS": "amdkv.data.schemas",
    "features": "amdkv.data.schemas",
    "build_dataset": "amdkv.data.api",
    "load_built": "amdkv.data.api",
    "load_policy": "amdkv.data.api",
    "publish": "amdkv.data.publish",
    "reverify": "amdkv.data.reverify",
}

__all__ = sorted(_EXPORTS)
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
