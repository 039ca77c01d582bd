"""What spilling a candidate's outputs costs per checked call (verify/output_spill.py), against the
memory it saves.

    python benchmarks/output_spill.py [--sizes-mib 64,256,1024] [--repeat 3] [--digest-threads 1,default]
                                      [--out DIR] [--json]

For each size, one call's outputs (float32 tensors) go through the worker's side (`OutputSpill.keep`:
torch.save without zip checksums, then the file's SHA-256) and the parent's (`resolve_spilled`: the
file's SHA-256 again, then the memory-mapped load) and are read once whole as the judge reads them.
The baseline is what the judge paid before spilling for the same bytes: the outputs held in memory,
saved once at the end (`save_for_parent`) and mapped by the parent. Medians of `--repeat`. Writes
`output_spill.json` and `output_spill.md` under --out when given; prints the table. CPU and disk of
this machine only; no GPU is involved (the worker copies outputs to the host before either path).
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from amdkv.verify.judging import load_tensor_file  # noqa: E402
from amdkv.verify import output_spill  # noqa: E402
from amdkv.verify.output_spill import OutputSpill, resolve_spilled  # noqa: E402
from amdkv.verify.worker_jobs import _tensor_bytes, save_for_parent  # noqa: E402


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return time.perf_counter() - t0, out


def _read_whole(outputs: Any) -> float:
    """Touch every byte the way a comparison does (a sum over each tensor)."""
    return float(sum(t.double().sum() for t in outputs["case"]["trials"][0] if isinstance(t, torch.Tensor)))


def measure(size_mib: int, folder: Path) -> dict[str, float]:
    leaves = [torch.randn(size_mib * 2 ** 20 // 4)]
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    # before: held, then saved once at the end and mapped by the parent
    save_s, _ = _timed(lambda: save_for_parent({"case": {"trials": [leaves]}}, str(folder / "held.pt")))
    load_s, held = _timed(lambda: load_tensor_file(folder / "held.pt"))
    read_held_s, _ = _timed(lambda: _read_whole(held))
    # after: spilled at once, hashed, then resolved (hash + map) by the parent
    spill = OutputSpill(str(folder / "spilled-outputs"), 0, save=save_for_parent, nbytes=_tensor_bytes)
    keep_s, marker = _timed(lambda: spill.keep(leaves))
    save_for_parent({"case": {"trials": [marker]}}, str(folder / "outputs.pt"))
    resolve_s, resolved = _timed(lambda: resolve_spilled(load_tensor_file(folder / "outputs.pt"),
                                                          str(folder / "spilled-outputs"), load_tensor_file))
    read_spilled_s, _ = _timed(lambda: _read_whole(resolved))
    assert torch.equal(resolved["case"]["trials"][0][0], leaves[0])
    return {"held_save_s": save_s, "held_load_s": load_s + read_held_s,
            "spill_worker_s": keep_s, "spill_parent_s": resolve_s + read_spilled_s}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes-mib", default="64,256,1024")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    ap.add_argument("--digest-threads", default="default",
                    help="comma-separated thread counts for the spill digest (output_spill.spill_digest), each "
                         "measured in turn; 'default' is what the verifier uses (this process's cores, at most 8); "
                         "1 is the single-threaded digest of session 22")
    args = ap.parse_args()
    rows = []
    real_threads = output_spill._digest_threads
    with tempfile.TemporaryDirectory(prefix="amdkv-spill-bench-") as tmp:
        for threads in args.digest_threads.split(","):
            output_spill._digest_threads = real_threads if threads == "default" else (lambda n=int(threads): n)
            for size in (int(s) for s in args.sizes_mib.split(",")):
                runs = [measure(size, Path(tmp) / "run") for _ in range(args.repeat)]
                med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
                extra = med["spill_worker_s"] + med["spill_parent_s"] - med["held_save_s"] - med["held_load_s"]
                rows.append({"size_mib": size, "digest_threads": output_spill._digest_threads(),
                             **{k: round(v, 3) for k, v in med.items()},
                             "extra_s": round(extra, 3), "extra_s_per_gib": round(extra * 1024 / size, 3)})
    output_spill._digest_threads = real_threads
    result = {"host": platform.node(), "cpus": __import__("os").cpu_count(), "python": platform.python_version(),
              "torch": torch.__version__, "repeat": args.repeat, "rows": rows}
    lines = ["| MiB per call | digest threads | held: save at end (s) | held: parent map + read (s) "
             "| spilled: worker save + digest (s) | spilled: parent digest + map + read (s) | extra (s) "
             "| extra per GiB (s) |", "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    lines += [f"| {r['size_mib']} | {r['digest_threads']} | {r['held_save_s']} | {r['held_load_s']} | "
              f"{r['spill_worker_s']} | {r['spill_parent_s']} | {r['extra_s']} | {r['extra_s_per_gib']} |"
              for r in rows]
    table = "\n".join(lines)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "output_spill.json").write_text(json.dumps(result, indent=2) + "\n")
        (args.out / "output_spill.md").write_text(table + "\n")
    print(json.dumps(result, indent=2) if args.json else table)


if __name__ == "__main__":
    main()
