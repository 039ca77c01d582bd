"""rocprofv3 kernel traces (AMD, platform `rocm`): command line and output parsing.

NOT RUN ON HARDWARE: no AMD GPU was reachable while this was written. It follows ROCm's
documented behaviour of rocprofv3 (rocprofiler-sdk, ROCm 6.2+):

    rocprofv3 --kernel-trace --output-format csv -d OUT_DIR -o NAME -- python script.py ...

writes ``OUT_DIR/NAME_kernel_trace.csv`` (``-o`` unset: ``%hostname%/%pid%_kernel_trace.csv``)
with the columns ``"Kind","Agent_Id","Queue_Id","Stream_Id","Thread_Id","Dispatch_Id","Kernel_Id",
"Kernel_Name","Correlation_Id","Start_Timestamp","End_Timestamp",...`` (timestamps in ns, kernel
names demangled); ``--output-format json`` writes ``NAME_results.json`` with
``{"rocprofiler-sdk-tool": [{"kernel_symbols": [...], "buffer_records": {"kernel_dispatch": [
{"dispatch_info": {"kernel_id": ..., "dispatch_id": ...}, "start_timestamp": ..., "end_timestamp":
...}, ...]}}]}``. Older releases name some columns differently (e.g. ``Kernel-Name``), so the
parser matches column names loosely. rocprofv3 wraps a whole process, so it times a script run
for the purpose (benchmarks/timing_fidelity.py can use it on ROCm), not the warm worker processes;
inside workers the torch.profiler method (roctracer/rocprofiler-sdk through kineto) is used.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
import os
import re
import shutil
import statistics
from pathlib import Path
from typing import Any, Iterable, Sequence


@dataclasses.dataclass(frozen=True)
class KernelRecord:
    name: str
    start_ns: int
    end_ns: int
    dispatch_id: int | None = None
    agent: str | None = None
    queue: int | None = None
    correlation_id: int | None = None

    @property
    def duration_ns(self) -> int:
        return self.end_ns - self.start_ns


def find_rocprofv3() -> str | None:
    """Path of rocprofv3 (PATH, then $ROCM_PATH/bin, then /opt/rocm/bin), or None."""
    found = shutil.which("rocprofv3")
    if found:
        return found
    for root in (os.environ.get("ROCM_PATH"), "/opt/rocm"):
        if root and os.access(os.path.join(root, "bin", "rocprofv3"), os.X_OK):
            return os.path.join(root, "bin", "rocprofv3")
    return None


def build_command(argv: Sequence[str], out_dir: str, *, output_name: str = "amdkv",
                  output_format: str = "csv", kernel_include_regex: str | None = None,
                  kernel_exclude_regex: str | None = None, rocprofv3: str | None = None,
                  extra: Sequence[str] = ()) -> list[str]:
    """The rocprofv3 command line that traces every kernel dispatch of `argv`."""
    if output_format not in ("csv", "json"):
        raise ValueError("output_format must be csv or json (the formats parse_kernel_trace reads)")
    if not argv:
        raise ValueError("argv (the program to trace) is empty")
    cmd = [rocprofv3 or find_rocprofv3() or "rocprofv3", "--kernel-trace", "--output-format", output_format,
           "-d", str(out_dir), "-o", output_name]
    if kernel_include_regex:
        cmd += ["--kernel-include-regex", kernel_include_regex]
    if kernel_exclude_regex:
        cmd += ["--kernel-exclude-regex", kernel_exclude_regex]
    return cmd + list(extra) + ["--"] + list(argv)


def find_trace_files(out_dir: str | os.PathLike[str]) -> list[Path]:
    """Kernel-trace outputs under `out_dir` (rocprofv3 may add hostname/pid sub-folders)."""
    root = Path(out_dir)
    files = sorted(root.rglob("*kernel_trace.csv")) + sorted(root.rglob("*results.json"))
    return files


def _norm(col: str) -> str:
    return re.sub(r"[^a-z]", "", col.lower())


def _int(x: Any) -> int | None:
    try:
        return int(str(x).strip())
    except (TypeError, ValueError):
        return None


def parse_kernel_trace_csv(text_or_path: str | os.PathLike[str]) -> list[KernelRecord]:
    """KernelRecords from a rocprofv3 `*_kernel_trace.csv` (a path or the CSV text)."""
    text = str(text_or_path)
    if "\n" not in text and os.path.exists(text):
        text = Path(text).read_text()
    reader = csv.reader(io.StringIO(text))
    rows = [r for r in reader if r]
    if not rows:
        return []
    cols = {_norm(c): i for i, c in enumerate(rows[0])}

    def col(*names: str) -> int | None:
        for n in names:
            if n in cols:
                return cols[n]
        return None

    i_name = col("kernelname")
    i_start = col("starttimestamp", "beginns", "start")
    i_end = col("endtimestamp", "endns", "end")
    if i_name is None or i_start is None or i_end is None:
        raise ValueError(f"not a rocprofv3 kernel trace: columns {rows[0]}")
    i_kind, i_disp, i_agent = col("kind"), col("dispatchid"), col("agentid")
    i_queue, i_corr = col("queueid"), col("correlationid")
    out = []
    for r in rows[1:]:
        if i_kind is not None and r[i_kind] not in ("KERNEL_DISPATCH", ""):
            continue
        start, end = _int(r[i_start]), _int(r[i_end])
        if start is None or end is None:
            continue
        out.append(KernelRecord(r[i_name], start, end,
                                _int(r[i_disp]) if i_disp is not None else None,
                                r[i_agent] if i_agent is not None else None,
                                _int(r[i_queue]) if i_queue is not None else None,
                                _int(r[i_corr]) if i_corr is not None else None))
    return sorted(out, key=lambda k: (k.start_ns, k.dispatch_id or 0))


def parse_kernel_trace_json(data_or_path: Any) -> list[KernelRecord]:
    """KernelRecords from rocprofv3's `*_results.json` (a path, the JSON text or the loaded dict)."""
    data = data_or_path
    if isinstance(data, (str, os.PathLike)):
        text = str(data)
        data = json.loads(Path(text).read_text() if os.path.exists(text) else text)
    out = []
    for tool in data.get("rocprofiler-sdk-tool", []):
        names: dict[Any, str] = {}
        symbols = tool.get("kernel_symbols", [])
        if isinstance(symbols, dict):
            symbols = list(symbols.values())
        for sym in symbols:
            names[sym.get("kernel_id")] = (sym.get("formatted_kernel_name") or sym.get("truncated_kernel_name")
                                           or sym.get("kernel_name") or "")
        for rec in (tool.get("buffer_records") or {}).get("kernel_dispatch", []):
            info = rec.get("dispatch_info") or {}
            kid = info.get("kernel_id", rec.get("kernel_id"))
            corr = rec.get("correlation_id")
            if isinstance(corr, dict):
                corr = corr.get("internal")
            out.append(KernelRecord(names.get(kid, f"kernel_{kid}"), int(rec["start_timestamp"]),
                                    int(rec["end_timestamp"]), info.get("dispatch_id"),
                                    str(info.get("agent_id", {}).get("handle")) if isinstance(info.get("agent_id"), dict)
                                    else info.get("agent_id"), None,
                                    corr if isinstance(corr, int) else None))
    return sorted(out, key=lambda k: (k.start_ns, k.dispatch_id or 0))


def parse_kernel_trace(path: str | os.PathLike[str]) -> list[KernelRecord]:
    p = str(path)
    return parse_kernel_trace_json(p) if p.endswith(".json") else parse_kernel_trace_csv(p)


def per_call_ms(records: Iterable[KernelRecord], marker_regex: str, *, skip: int = 0) -> list[float]:
    """Per-call kernel time in ms from a trace where each call is preceded by a marker kernel
    (the cache flush): the kernels between two markers are one call; markers are not counted.
    `skip` drops the first calls (warm-up)."""
    pat = re.compile(marker_regex)
    calls: list[float] = []
    current: float | None = None
    for k in sorted(records, key=lambda r: r.start_ns):
        if pat.search(k.name):
            if current is not None:
                calls.append(current)
            current = 0.0
        elif current is not None:
            current += k.duration_ns / 1e6
    if current is not None:
        calls.append(current)
    return calls[skip:]


def summarize(samples: list[float]) -> dict[str, Any]:
    if not samples:
        return {"ms": None, "samples": 0}
    med = statistics.median(samples)
    return {"ms": med, "mean_ms": statistics.fmean(samples), "samples": len(samples),
            "method": "rocprofv3_kernel_trace+l2_flush"}
