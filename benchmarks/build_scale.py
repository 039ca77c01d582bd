"""Scale benchmark of the corpus builder: `amdkv build triton` from N synthetic records.

    python benchmarks/build_scale.py --records 100000 --work /tmp/amdkv-scale [--json out.json]

1. Generate N records (amdkv.data.synthetic.iter_corpus: 2-8 KB programs, full verdicts of the
   real Verdict type, ~10% trajectories, planted exact and near duplicates, optimisation chains,
   builtin:eval copies) into a record store under --work (kept and reused when it already holds
   N records: generation is not part of what is measured).
2. Run `python -m amdkv.cli build triton --records ... --out ... --overwrite` as a child process
   (its progress bars per phase and its summary table are printed as they come), sampling the
   resident memory (RSS) of the child and every process it starts, every 0.2 s.
3. Print and optionally write as JSON: wall time, CPU time of the build's process tree (user +
   system: on a machine shared with other jobs wall time says little; with two free cores the
   wall time lies between CPU/2 and CPU), peak RSS (whole process tree, and the largest single
   process from getrusage), per-phase times, rows in, removed by each filter, rows out
   per config and split, output size.

The goal (issue 15): 100,000 records on the 2-core development machine in <= 5 minutes with a
peak memory <= 2 GB.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def generate(store_dir: Path, n: int, seed: int) -> dict:
    from tqdm import tqdm

    from amdkv.data.store import RecordStore
    from amdkv.data.synthetic import iter_corpus

    store = RecordStore(store_dir)
    planted: dict[str, int] = {}
    batch = []
    start = time.perf_counter()
    with tqdm(total=n, desc="generate records", unit="record", file=sys.stderr) as bar:
        for record in iter_corpus(n, n_tasks=max(1, n // 40), seed=seed, eval_plants=20, planted=planted):
            batch.append(record)
            if len(batch) == 500:
                store.extend(batch)
                bar.update(len(batch))
                batch = []
        store.extend(batch)
        bar.update(len(batch))
    store.close()
    info = {"seconds": round(time.perf_counter() - start, 1), "planted": planted, **RecordStore(store_dir).stats()}
    (store_dir / "synthetic.json").write_text(json.dumps(info, indent=2))
    return info


def _rss_split(pid: int) -> tuple[int, int]:
    """(RssAnon, RssFile) of a process in bytes, from /proc/<pid>/status (Linux)."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(("RssAnon:", "RssFile:")):
            name, value = line.split(":", 1)
            fields[name] = int(value.split()[0]) * 1024
    return fields.get("RssAnon", 0), fields.get("RssFile", 0)


def _pss(pid: int) -> int:
    """Proportional set size of a process in bytes (/proc/<pid>/smaps_rollup, Linux >= 4.14)."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) * 1024
    return 0


class TreeMemory:
    """Peak of the summed RSS of a process and its descendants, sampled every `interval` s."""

    def __init__(self, pid: int, interval: float = 0.2) -> None:
        import psutil  # not an amdkv dependency: pip install psutil to run this benchmark

        self.proc = psutil.Process(pid)
        self.interval = interval
        self.peak = 0
        # proportional set size summed over the tree: a page shared by k processes (the forked
        # row builders share the parent's plan copy-on-write) counts 1/k in each, so the sum is
        # what the tree really holds; the RSS sum counts shared pages once per process
        self.peak_pss = 0
        # the largest process's resident memory split at its peak: anonymous (the heap: what a
        # memory goal is about) and file-backed (mapped Arrow/Parquet pages the kernel can drop)
        self.peak_anon = 0
        self.peak_file = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import psutil

        while not self._stop.is_set():
            try:
                procs = [self.proc, *self.proc.children(recursive=True)]
                total = pss = 0
                for p in procs:
                    try:
                        total += p.memory_info().rss
                        pss += _pss(p.pid)
                        anon, file = _rss_split(p.pid)
                        self.peak_anon = max(self.peak_anon, anon)
                        self.peak_file = max(self.peak_file, file)
                    except (psutil.Error, OSError):
                        pass
                self.peak = max(self.peak, total)
                self.peak_pss = max(self.peak_pss, pss)
            except psutil.Error:
                return
            self._stop.wait(self.interval)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join()
        return self.peak


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--work", type=Path, default=Path("/tmp/amdkv-build-scale"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()

    store_dir = args.work / f"records-{args.records}"
    meta = store_dir / "synthetic.json"
    if meta.exists() and json.loads(meta.read_text()).get("records", 0) >= args.records:
        generated = json.loads(meta.read_text())
        print(f"reusing {store_dir} ({generated['records']:,} records, {generated['bytes'] / 1e9:.2f} GB)", file=sys.stderr)
    else:
        generated = generate(store_dir, args.records, args.seed)
    out = args.work / "amdkv-triton"
    env = {**os.environ, "PYTHONPATH": str(REPO), "HF_DATASETS_OFFLINE": "1", "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "amdkv.cli", "build", "triton", "--records", str(store_dir), "--out", str(out),
           "--overwrite", "--workers", str(args.workers)]
    start = time.perf_counter()
    child = subprocess.Popen(cmd, env=env)
    memory = TreeMemory(child.pid)
    child.wait()
    wall = time.perf_counter() - start
    peak_tree = memory.stop()
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)  # the build and every process it waited for
    peak_single = usage.ru_maxrss * 1024
    cpu_seconds = usage.ru_utime + usage.ru_stime
    if child.returncode != 0:
        print(f"build failed with exit code {child.returncode}", file=sys.stderr)
        return child.returncode
    report = json.loads((out / "build_report.json").read_text())
    result = {
        "records": generated.get("records"), "store_bytes": generated.get("bytes"), "cpu_count": os.cpu_count(),
        "load_average_at_end": os.getloadavg(), "wall_seconds": round(wall, 1), "cpu_seconds": round(cpu_seconds, 1),
        "peak_rss_tree_bytes": peak_tree, "peak_pss_tree_bytes": memory.peak_pss, "peak_rss_largest_process_bytes": peak_single,
        "peak_rss_anon_one_process_bytes": memory.peak_anon, "peak_rss_file_one_process_bytes": memory.peak_file,
        "peak_rss_mib_by_phase": report.get("peak_rss_mib"),
        "phase_seconds": report["seconds"], "records_by_kind": report["records_by_kind"],
        "removed": {p["name"]: p["removed"] for p in report["phases"]}, "rows": report["rows"],
        "pairs": report["pairs"], "clusters": report["clusters"],
        "output_bytes": sum(p.stat().st_size for p in out.rglob("*") if p.is_file()),
    }
    print(json.dumps(result, indent=2))
    print(f"\n{result['records']:,} records -> {sum(sum(v.values()) for v in report['rows'].values()):,} rows in "
          f"{wall / 60:.1f} min, peak RSS {peak_tree / 2**30:.2f} GiB (process tree; PSS "
          f"{memory.peak_pss / 2**30:.2f} GiB), "
          f"{peak_single / 2**30:.2f} GiB (largest process); goal <= 5 min and <= 2 GB", file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
