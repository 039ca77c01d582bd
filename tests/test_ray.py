"""`--ray`: verification on a Ray cluster (amdkv.cluster, docs/ray.md), with Ray's own multi-node
cluster utilities on this one machine (`ray.cluster_utils.Cluster`: the head and one more node, one
CPU and one unit of a custom resource each; the second one is the node removed mid-run). Real Ray,
real actors, a real verifier inside each; nothing is mocked.

- without --ray nothing changes and Ray is never imported; a missing Ray is a clear error;
- an `amdkv eval` over bundled tasks spread over two simulated nodes gives the verdicts (and the
  metrics) of a local run, with work on both nodes;
- a node removed mid-run: its in-flight work runs again on the live node, every submission gets
  exactly one verdict, none of them an infra_error or a wrong one; then with the last actor killed
  too, what is left ends infra_error (reasons `no_live_ray_node` / `ray_node_lost`), never a
  candidate verdict.

One cluster for the module (15-25 s to start on 2 shared cores); the node-removal test runs last.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from amdkv.config import VerifierConfig
from amdkv.evaluation import EvalSettings, run_eval
from amdkv.tasks.builtin import solution_path
from amdkv.tasks.suites import load_suite
from amdkv.verify.candidate import Candidate

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data" / "eval"
NODE_RESOURCE = "amdkv_test_node"
needs_ray = pytest.mark.skipif(importlib.util.find_spec("ray") is None,
                               reason='ray is not installed (pip install "amdkv[ray]")')

REF_RELU = solution_path("l1_relu").read_text()
REF_LAYERNORM = solution_path("l1_layernorm").read_text()
SAMPLES = [
    {"task_id": "l1_relu", "samples": [REF_RELU, (DATA / "relu_syntax_error.py").read_text()]},
    {"task_id": "l1_layernorm", "samples": [(DATA / "layernorm_wrong_math.py").read_text(), REF_LAYERNORM]},
]


def test_without_ray_nothing_imports_ray_and_a_missing_ray_is_a_clear_error():
    """The three commands' modules and the one opening function, used without --ray, never import
    Ray; with --ray and no Ray installed (import blocked in a fresh interpreter) the error says
    what to install."""
    code = r"""
import sys
import amdkv.cli, amdkv.gen.cli, amdkv.data.cli, amdkv.evaluation.runner, amdkv.gen.run, amdkv.data.reverify
from amdkv.cluster import open_run_verifier
from amdkv.config import VerifierConfig
with open_run_verifier(VerifierConfig.from_env(device="cpu")) as v:
    print("LOCAL", type(v).__name__)
assert "ray" not in sys.modules, "ray was imported"
sys.modules["ray"] = None   # as if it were not installed
from amdkv.errors import BadInputError
try:
    open_run_verifier(VerifierConfig.from_env(device="cpu"), ray_address="auto")
except BadInputError as exc:
    print("ERROR", exc.message, "|", exc.hint)
"""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]
    assert "LOCAL Verifier" in res.stdout
    assert "--ray needs Ray" in res.stdout and 'pip install "amdkv[ray]"' in res.stdout


def test_ray_option_parsing_and_exclusive_with_verifier_url(tmp_path):
    """`--ray` alone means `auto`; it and --verifier-url together are refused before anything runs."""
    from click.testing import CliRunner

    from amdkv.cli import main

    samples = tmp_path / "s.jsonl"
    samples.write_text(json.dumps(SAMPLES[0]) + "\n")
    res = CliRunner().invoke(main, ["eval", "builtin:all", "--samples", str(samples), "--out", str(tmp_path / "o"),
                                    "--ray", "--verifier-url", "http://127.0.0.1:9"])
    assert res.exit_code == 2 and "give one of them" in res.output
    import click

    from amdkv.cluster.options import ray_option

    seen = {}

    @click.command()
    @ray_option
    def cmd(ray_address):
        seen["v"] = ray_address

    for args, want in (([], None), (["--ray"], "auto"), (["--ray", "local"], "local"),
                       (["--ray", "10.0.0.1:6379"], "10.0.0.1:6379")):
        assert CliRunner().invoke(cmd, args).exit_code == 0
        assert seen["v"] == want, args


@pytest.fixture(scope="module")
def cluster():
    import ray
    from ray.cluster_utils import Cluster

    sigterm_before = signal.getsignal(signal.SIGTERM)  # Ray's nodes leave their own handler behind
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "resources": {NODE_RESOURCE: 1},
                                                      "include_dashboard": False})
    nodes = [c.head_node, c.add_node(num_cpus=1, resources={NODE_RESOURCE: 1})]
    ray.init(address=c.address, logging_level="warning", log_to_driver=False)
    c.wait_for_nodes()
    try:
        yield c, nodes
    finally:
        ray.shutdown()
        c.shutdown()
        signal.signal(signal.SIGTERM, sigterm_before)


def _results(out: Path) -> dict[tuple[str, int], dict]:
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]
    return {(r["task_id"], r["sample_index"]): r for r in rows}


def _verdict_facts(v: dict) -> tuple:
    return v["status"], v["reason"], v["compiled"], v["correct"], v["platform"]


@needs_ray
def test_eval_over_two_nodes_matches_a_local_run(cluster, tmp_path):
    """Also: a second RayVerifier (another policy, as `amdkv gen --functional-reference` opens one)
    is open on the same one-CPU nodes during the eval: actors reserve no CPU, so both fit."""
    from amdkv.cluster.ray_verifier import RayVerifier

    c, _ = cluster
    samples = tmp_path / "samples.jsonl"
    samples.write_text("".join(json.dumps(line) + "\n" for line in SAMPLES))
    common = dict(suite="builtin:all", samples=str(samples), device="cpu", bootstrap=0, trials=1)
    local = run_eval(EvalSettings(out=str(tmp_path / "local"), jobs=2, **common), progress=False)
    other_config = VerifierConfig.from_env(device="cpu", trials=1, policy="reference", verdict_cache=False)
    with RayVerifier(c.address, other_config, startup_timeout_s=120) as other:
        spread = run_eval(EvalSettings(out=str(tmp_path / "ray"), jobs=1, ray_address=c.address, **common),
                          progress=False)
        relu = next(t for t in load_suite("builtin:all") if t.id == "l1_relu")
        assert other.verify(relu, source=REF_RELU).status == "ok"
    want, got = _results(tmp_path / "local"), _results(tmp_path / "ray")
    assert len(got) == len(want) == 4
    assert {k: _verdict_facts(r["verdict"]) for k, r in got.items()} == \
        {k: _verdict_facts(r["verdict"]) for k, r in want.items()}
    assert {r["verdict"]["status"] for r in got.values()} == {"ok", "compile_error", "mismatch"}
    nodes = {r["verdict"]["env"]["ray"]["node"] for r in got.values()}
    assert len(nodes) == 2, "the work was not spread over both nodes"
    assert all(r["verdict"]["env"]["ray"]["attempts"] == 1 for r in got.values())
    assert spread.metrics["settings"]["ray_address"] == c.address
    for key in ("pass@1", "compile@1"):
        assert spread.metrics[key]["value"] == local.metrics[key]["value"], key
    assert spread.infra_errors == 0 and spread.verified == 4


@needs_ray
def test_a_node_removed_mid_run_loses_only_its_in_flight_work(cluster):
    """Runs last: it removes one of the module's two nodes, then kills the other node's actor."""
    from amdkv.cluster.ray_verifier import RayVerifier

    c, nodes = cluster
    tasks = {t.id: t for t in load_suite("builtin:all")}
    wrong_layernorm = (DATA / "layernorm_wrong_math.py").read_text()
    pairs = [(tasks["l1_relu"], Candidate(REF_RELU + f"\n# copy {i}\n"), "ok") for i in range(3)] + \
            [(tasks["l1_layernorm"], Candidate(REF_LAYERNORM), "ok"),
             (tasks["l1_layernorm"], Candidate(wrong_layernorm), "mismatch")]
    config = VerifierConfig.from_env(device="cpu", jobs=1, trials=1, verdict_cache=False)
    with RayVerifier(c.address, config, node_resource=NODE_RESOURCE) as verifier:
        assert len(verifier.nodes) == 2
        by_raylet = {info["node_id"]: info for info in verifier.nodes}
        victim = nodes[1]
        assert victim.node_id in by_raylet
        removed = threading.Event()

        def remove_when_busy() -> None:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                busy = [s for s in verifier.stats().values() if s["node_id"] == victim.node_id and s["in_flight"]]
                if busy:
                    c.remove_node(victim, allow_graceful=False)
                    removed.set()
                    return
                time.sleep(0.05)

        killer = threading.Thread(target=remove_when_busy, daemon=True)
        killer.start()
        verdicts = verifier.verify_many([(t, cand) for t, cand, _ in pairs])
        killer.join()
        assert removed.is_set(), "the victim node never had work in flight"
        assert [v.status for v in verdicts] == [want for _, _, want in pairs], [v.to_dict() for v in verdicts]
        assert [v.candidate_sha256 for v in verdicts] == [cand.sha256 for _, cand, _ in pairs]
        stats = {s["node_id"]: s for s in verifier.stats().values()}
        assert not stats[victim.node_id]["alive"] and stats[victim.node_id]["lost"] >= 1
        retried = [v for v in verdicts if v.env["ray"]["attempts"] == 2]
        assert retried, "no submission was run again after its node was lost"
        for v in retried:
            first, second = v.env["ray"]["history"]
            assert first["node"] == victim.node_id and "lost" in first and second["node"] != victim.node_id
        survivor = next(n for n in stats if n != victim.node_id)
        # what the victim finished before it was removed (it may finish one and take the next between two
        # polls of the killer) is kept as it was, never run again; everything else ran on the survivor
        done_on_victim = [v for v in verdicts if v.env["ray"]["node"] == victim.node_id]
        assert all(v.env["ray"]["attempts"] == 1 for v in done_on_victim)
        assert all(v.env["ray"]["node"] == survivor for v in verdicts if v not in done_on_victim)
        assert stats[victim.node_id]["finished"] == len(done_on_victim)
        assert sum(s["finished"] for s in stats.values()) == len(pairs)   # each judged once: none doubled

        # the last actor dies too: what it ran and what waited end infra_error, never a candidate verdict
        import ray

        futures = [verifier.submit(tasks["l1_relu"], Candidate(REF_RELU + f"\n# late {i}\n")) for i in range(2)]
        deadline = time.monotonic() + 30
        while not verifier.stats()[next(k for k, s in verifier.stats().items() if s["alive"])]["in_flight"]:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        ray.kill(next(n.actor for n in verifier._nodes if n.alive))
        late = [f.result(timeout=120) for f in futures]
        assert [v.status for v in late] == ["infra_error", "infra_error"], [v.to_dict() for v in late]
        assert {v.reason for v in late} <= {"no_live_ray_node", "ray_node_lost"}
        assert all(v.correct is None for v in late)


RESTORE_PROBE = """
import signal
from amdkv.cluster.ray_verifier import RayVerifier
mine = lambda *_: None
signal.signal(signal.SIGTERM, mine)
verifier = RayVerifier("local", "cpu")
replaced = signal.getsignal(signal.SIGTERM) is not mine
verifier.close()
print("RESULT", replaced, signal.getsignal(signal.SIGTERM) is mine)
"""


def test_a_local_ray_verifier_puts_back_the_sigterm_handler_it_found():
    """`ray.init` leaves its own SIGTERM handler behind (in a process that started a node, one that
    hangs in a fork: the CI hang of session 20); a RayVerifier that made the connection puts back the
    one it found when it closes. In a process of its own: this module's cluster is connected here."""
    res = subprocess.run([sys.executable, "-c", RESTORE_PROBE], capture_output=True, text=True, timeout=240)
    line = next((ln for ln in res.stdout.splitlines() if ln.startswith("RESULT")), None)
    assert res.returncode == 0 and line, res.stderr[-2000:]
    replaced, restored = line.split()[1:]
    assert replaced == "True", "Ray no longer installs a SIGTERM handler: the restore may be dropped"
    assert restored == "True", "the SIGTERM handler Ray installed outlived the verifier"
