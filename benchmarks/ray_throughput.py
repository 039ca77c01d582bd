"""Verification throughput with and without Ray (docs/ray.md), in one call.

Passes (--phases, comma-separated; each verifies the same --candidates distinct candidates: the
bundled Triton solutions of the first --tasks level-1 tasks, as benchmarks/throughput.py makes them):

  local      open_verifier(--device, --jobs) in this process: the baseline
  ray_local  RayVerifier("local"): a Ray cluster started on this machine, one actor holding all of
             its GPUs, the same --jobs inside: what Ray itself costs on one node
  simN       (N = 1, 2, ...) N simulated nodes on this machine (ray.cluster_utils.Cluster, one CPU
             each), one actor per node with --jobs-per-node slots: how the driver spreads work

A `prime` pass (not timed) verifies one candidate per task locally first, so every pass finds the
references cached (AMDKV_CACHE_DIR is a fresh folder under --out, shared by the simulated nodes of
this machine). The verdict cache is off: every pass really verifies.

Measured per pass: start_s (opening the verifier: Ray connection and actors included), batch_s
(first submission to last verdict), per_min (candidates / batch_s x 60), statuses, and per node
how many candidates it judged.

    # the GPU machine (one node, all its GPUs): Ray vs no Ray, ~3 minutes; needs Ray there first:
    #   pip install "ray[default]==2.60.0"
    python benchmarks/ray_throughput.py --out ray_out --device auto --jobs 12 --candidates 120 --phases local,ray_local
    # the 2-core dev machine (what docs/ray.md reports)
    python benchmarks/ray_throughput.py --out ray_out --device cpu --jobs 1 --candidates 12 --phases local,sim1,sim2

Writes OUT/ray_throughput.json and .md after each pass, prints the table last.
"""

from __future__ import annotations

import argparse
import collections
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from report_files import markdown_table, write_report  # noqa: E402
from throughput import make_candidates  # noqa: E402

STEM = "ray_throughput"


def timed_pass(name: str, open_verifier: Any, pairs: list[tuple[Any, str]]) -> dict[str, Any]:
    """Open the verifier, verify every pair, close it; the pass's numbers."""
    t0 = time.monotonic()
    verifier = open_verifier()
    started = time.monotonic()
    try:
        verdicts = verifier.verify_many(pairs)
        done = time.monotonic()
        nodes = getattr(verifier, "nodes", None)
        platform = verifier.platform.name
    finally:
        verifier.close()
    batch = done - started
    per_node = collections.Counter((v.env.get("ray") or {}).get("node", "local")[:8] for v in verdicts)
    return {"pass": name, "platform": platform, "candidates": len(pairs), "start_s": round(started - t0, 2),
            "batch_s": round(batch, 2), "per_min": round(len(pairs) / batch * 60, 1),
            "statuses": dict(collections.Counter(v.status for v in verdicts)), "per_node": dict(per_node),
            "ray_nodes": len(nodes) if nodes is not None else None}


def simulated_cluster(n: int) -> Any:
    """N nodes on this machine: the head and N-1 more, one CPU each."""
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    for _ in range(n - 1):
        cluster.add_node(num_cpus=1)
    ray.init(address=cluster.address, logging_level="warning", log_to_driver=False)
    cluster.wait_for_nodes()
    return cluster


def run(args: argparse.Namespace) -> dict[str, Any]:
    from amdkv.cluster.ray_verifier import RayVerifier
    from amdkv.config import VerifierConfig
    from amdkv.verify.scheduler import open_verifier

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ["AMDKV_CACHE_DIR"] = tempfile.mkdtemp(prefix="cache-", dir=out)
    config = VerifierConfig.from_env(device=args.device, jobs=args.jobs, verdict_cache=False)
    workdir = Path(tempfile.mkdtemp(prefix="cands-", dir=out))
    pairs = make_candidates(args.candidates, args.tasks, workdir)
    res: dict[str, Any] = {"settings": vars(args), "passes": [], "cpu_count": os.cpu_count()}
    with open_verifier(config) as prime:
        prime.verify_many(pairs[:args.tasks])
    for phase in [p.strip() for p in args.phases.split(",") if p.strip()]:
        if phase == "local":
            row = timed_pass(phase, lambda: open_verifier(config), pairs)
        elif phase == "ray_local":
            row = timed_pass(phase, lambda: RayVerifier("local", config), pairs)
        elif phase.startswith("sim") and phase[3:].isdigit():
            import ray

            cluster = simulated_cluster(int(phase[3:]))
            try:
                row = timed_pass(phase, lambda: RayVerifier(cluster.address, config.replace(jobs=args.jobs_per_node)),
                                 pairs)
            finally:
                ray.shutdown()
                cluster.shutdown()
        else:
            raise SystemExit(f"unknown phase {phase!r}: local, ray_local or simN")
        res["passes"].append(row)
        print(write_report(out, STEM, res, markdown), flush=True)
    return res


def markdown(res: dict[str, Any]) -> str:
    rows = [[p["pass"], p["platform"], p["ray_nodes"] or "—", p["candidates"], p["start_s"], p["batch_s"],
             p["per_min"], ", ".join(f"{k} {v}" for k, v in sorted(p["statuses"].items())),
             ", ".join(f"{k} {v}" for k, v in sorted(p["per_node"].items()))] for p in res["passes"]]
    head = ["pass", "platform", "Ray nodes", "candidates", "start s", "batch s", "cand/min", "statuses", "per node"]
    return "\n".join([f"# Ray throughput ({res['cpu_count']} CPUs; settings {res['settings']})", ""]
                     + markdown_table(head, rows)) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="auto")
    ap.add_argument("--jobs", type=int, default=1, help="slots of the local and ray_local passes")
    ap.add_argument("--jobs-per-node", type=int, default=1, help="slots of each simulated node's actor")
    ap.add_argument("--candidates", type=int, default=12)
    ap.add_argument("--tasks", type=int, default=4)
    ap.add_argument("--phases", default="local,sim1,sim2")
    run(ap.parse_args())
    return 0


if __name__ == "__main__":
    sys.exit(main())
