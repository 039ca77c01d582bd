"""What the machine-wide disk admission costs a candidate (verify/disk_admission.py): one admission and
its release, with N other candidates' reservations living in the ledger.

    python benchmarks/disk_admission.py [--holders 0,10,80,320] [--repeat 200] [--ledger DIR] [--out DIR] [--json]

Each admission takes the ledger's lock, tries the lock of every reservation file (a living holder's
refuses it), reads the holders' needs, writes its own file and locks it; the release removes it. The
holders here are reservations held open by this process on other file descriptions, which `flock`
treats exactly as another process's. Free space is a stand-in large enough that nobody waits: this
measures the bookkeeping, not waiting. Median and 95th percentile over `--repeat` admissions per
holder count. The ledger goes under --ledger (default: a new folder in /dev/shm, where the real one
lives, else the temp folder). Writes `disk_admission.json` and `.md` under --out when given.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from amdkv.verify.disk_admission import DiskAdmission  # noqa: E402


def measure(holders: int, repeat: int, ledger_root: Path, folder: str) -> dict[str, Any]:
    admission = DiskAdmission(free=lambda _: 1 << 60, root=ledger_root)
    ledger = admission._ledger(os.stat(folder).st_dev)
    held = [ledger.reserve(1 << 20) for _ in range(holders)]
    try:
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            with admission.admitted(folder, 1 << 20, 0) as waited:
                assert waited < 1.0
            times.append(time.perf_counter() - t0)
        times.sort()
        return {"holders": holders, "admissions": repeat, "median_us": round(statistics.median(times) * 1e6, 1),
                "p95_us": round(times[int(0.95 * (len(times) - 1))] * 1e6, 1)}
    finally:
        for reservation in held:
            ledger.release(reservation)


def markdown(result: dict[str, Any]) -> str:
    lines = [f"Disk admission on {result['machine']} (ledger on {result['ledger_fs']}): one admission and its "
             "release, by the number of other living reservations.", "",
             "| other reservations | median µs | p95 µs |", "|---:|---:|---:|"]
    lines += [f"| {r['holders']} | {r['median_us']} | {r['p95_us']} |" for r in result["rows"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--holders", default="0,10,80,320")
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--ledger", type=Path, default=None)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    base = "/dev/shm" if os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()
    root = args.ledger or Path(tempfile.mkdtemp(prefix="amdkv-admission-bench-", dir=base))
    work = tempfile.mkdtemp(prefix="amdkv-admission-folder-")
    try:
        rows = [measure(int(h), args.repeat, root, work) for h in args.holders.split(",")]
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if args.ledger is None:
            shutil.rmtree(root, ignore_errors=True)
    result = {"machine": f"{platform.node()} ({os.cpu_count()} cores)", "ledger_fs": base if args.ledger is None
              else str(args.ledger), "python": platform.python_version(), "rows": rows}
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "disk_admission.json").write_text(json.dumps(result, indent=1))
        (args.out / "disk_admission.md").write_text(markdown(result))
    print(json.dumps(result) if args.json else markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
