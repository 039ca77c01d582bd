"""What the OS sandbox costs per worker and per candidate: the same work with the sandbox off and on,
side by side in one process.

Per mode (AMDKV_SANDBOX=off, then auto), interleaved over --rounds rounds (off, on, off, on) so that
load on a shared machine falls on both alike:
  starts     : 4 fork-server spares started at once and waited for (READY): wall seconds and the
               host's busy core-seconds per spare (the sandbox is entered by each forked child)
  throughput : the bundled Triton solutions of the first 6 level-1 tasks, repeated to --candidates,
               verified with --jobs at once (references cached and spares warm first, verdict cache
               off): candidates per minute, median latency, host core-seconds per candidate

    python benchmarks/sandbox_cost.py --out cost_out                  # cpu (Triton interpreter)
    python benchmarks/sandbox_cost.py --out cost_out --device cuda    # a GPU machine

Writes sandbox_cost.json and sandbox_cost.md to --out. benchmarks/fault_suite_gpu.py --cost runs the
same measurement after the fault suite.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from report_files import markdown_table, write_report  # noqa: E402

SPARES_AT_ONCE = 4
TASKS = 6


def measure_enter(n: int) -> dict[str, Any]:
    """Milliseconds a forked child of this process spends in os_sandbox.enter (timed by the child
    itself, so the fork's own cost, which grows with the parent's memory, does not blur it), and for
    context the fork+exit of a bare child. Medians of `n`; each child is single-threaded, as a fork
    server's child is."""
    import statistics
    import struct
    import tempfile
    import time

    from amdkv.verify import os_sandbox

    def child_enter_ms(plan: Any) -> float:
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                t0 = time.perf_counter()
                os_sandbox.enter(plan)
                os.write(write_end, struct.pack("d", (time.perf_counter() - t0) * 1000))
            finally:
                os._exit(0)
        os.close(write_end)
        data = os.read(read_end, 8)
        os.close(read_end)
        os.waitpid(pid, 0)
        if len(data) != 8:
            raise RuntimeError("a child could not enter the sandbox")
        return struct.unpack("d", data)[0]

    def fork_exit_ms() -> float:
        t0 = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)
        return (time.perf_counter() - t0) * 1000

    with tempfile.TemporaryDirectory(prefix="amdkv-sandbox-cost-") as tmp:
        plan = os_sandbox.plan("auto", writable=[tmp], nproc=256, file_size_bytes=1 << 30, cpu_seconds=600)
        entered = [child_enter_ms(plan) for _ in range(n)]
    bare = [fork_exit_ms() for _ in range(n)]
    return {"children": n, "fork_exit_ms": round(statistics.median(bare), 2),
            "enter_ms": round(statistics.median(entered), 2), "enter_ms_max": round(max(entered), 2)}


def measure_cost(device: str, n: int, rounds: int, jobs: int) -> dict[str, Any]:
    """Spare starts and `n` verifications per mode and round, the OS sandbox off and on, interleaved."""
    from spare_start import measure_starts, measure_throughput

    res: dict[str, Any] = {"candidates_per_mode_and_round": n, "rounds": rounds, "jobs": jobs,
                           "enter": measure_enter(50), "runs": []}
    for r in range(rounds):
        for mode in ("off", "auto"):
            print(f"[sandbox_cost] round {r + 1}: sandbox {mode}", file=sys.stderr, flush=True)
            starts = measure_starts("fork", device, SPARES_AT_ONCE, sandbox=mode)
            tp = measure_throughput("fork", device, n, TASKS, jobs, sandbox=mode)
            res["runs"].append({"round": r + 1, "sandbox": mode, "starts": starts, "throughput": tp})
    return res


def cost_table(cost: dict[str, Any]) -> list[str]:
    """The markdown of measure_cost's result (also part of the fault suite's report)."""
    e = cost["enter"]
    lines = [f"Entering the sandbox in a forked child (median of {e['children']}, timed by the child): "
             f"**{e['enter_ms']} ms per worker** (max {e['enter_ms_max']} ms); a bare fork+exit of this process: "
             f"{e['fork_exit_ms']} ms.", ""]
    rows = []
    for run in cost["runs"]:
        s, t = run["starts"], run["throughput"]
        rows.append([run["round"], run["sandbox"], s["wall_s"], s["core_s_per_spare"], t["candidates"], t["jobs"],
                     t["per_minute"], t["median_latency_s"], t["core_s_per_candidate"],
                     ", ".join(f"{k}: {v}" for k, v in sorted(t["statuses"].items()))])
    header = ["round", "sandbox", f"{SPARES_AT_ONCE} spares to READY s", "host core-s per spare", "candidates",
              "jobs", "cand/min", "median latency s", "host core-s per candidate", "statuses"]
    return lines + markdown_table(header, rows)


def markdown(res: dict[str, Any]) -> str:
    lines = [f"OS sandbox cost on {res['host']} ({res['cores']} cores, load average before: {res['load_before']}), "
             f"device {res['device']}, torch {res['torch']}, triton {res['triton']}. Sandbox parts with `auto`: "
             f"{', '.join(res['sandbox_applied']) or 'none'}.", ""]
    return "\n".join(lines + cost_table(res["cost"])) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--candidates", type=int, default=12, help="candidates per mode and round")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    import platform as pyplatform

    import torch
    import triton

    from amdkv.verify import os_sandbox

    res: dict[str, Any] = {"host": pyplatform.node(), "cores": os.cpu_count(), "device": args.device,
                           "load_before": [round(x, 2) for x in os.getloadavg()], "torch": torch.__version__,
                           "triton": triton.__version__,
                           "sandbox_applied": os_sandbox.capabilities().get("applied", [])}
    res["cost"] = measure_cost(args.device, args.candidates, args.rounds, args.jobs)
    res["load_after"] = [round(x, 2) for x in os.getloadavg()]
    Path(args.out).mkdir(parents=True, exist_ok=True)
    print(write_report(Path(args.out), "sandbox_cost", res, markdown))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
