"""Ingestion of outside corpora of PyTorch modules (KernelBook's layout, KernelBench-style folders)
into checked, licensed, de-duplicated task files: `amdkv tasks ingest SOURCE --out DIR`.

Heavier dependencies (`datasets` to read tables, `datasketch` for near duplicates) load inside the
functions that need them; importing this package imports only the standard library.
"""

from amdkv.tasks.ingest.licences import DEFAULT_ALLOWED
from amdkv.tasks.ingest.pipeline import REPORT_FILE, IngestSettings, ingest

__all__ = ["DEFAULT_ALLOWED", "REPORT_FILE", "IngestSettings", "ingest"]
