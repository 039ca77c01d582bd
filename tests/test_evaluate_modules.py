"""The `evaluate` modules in eval/metrics/: loading from a checkout, loading by repo id, the opt-in,
what `evaluate` asks to install, and one real computation on `cpu`.

The load by repo id runs `evaluate.load("amdkv/rocmbench")` with HF_ENDPOINT pointed at a plain
`http.server` on loopback that serves the module folder in the Hub's URL layout (the Hub itself
cannot be reached: TOOLCHAINS.md measured that this fills evaluate's module cache exactly as a
download does), then again with HF_EVALUATE_OFFLINE=1 from another folder. Each load runs in a
subprocess of its own, because evaluate and huggingface_hub read these variables at import."""

from __future__ import annotations

import functools
import http.server
import json
import os
import shutil
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

pytest.importorskip("evaluate", reason="the `evaluate` modules need the evaluate package (amdkv[eval])")

REPO = Path(__file__).resolve().parent.parent
MODULES = ("kernelbench", "pytorch2hip", "tritonbench_g", "rocmbench", "verified")
DATA = REPO / "tests" / "data" / "external"


def _run(code: str, cwd: Path, env: dict[str, str], timeout: int = 600, online: bool = False) -> subprocess.CompletedProcess:
    """`online`: without the HF_*_OFFLINE variables the tests run under (the file server is the Hub)."""
    dropped = ("HF_ENDPOINT", "HF_EVALUATE_OFFLINE") + (("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE") if online else ())
    full = {k: v for k, v in os.environ.items() if k not in dropped}
    full.update(env)
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=cwd, env=full, capture_output=True,
                          text=True, timeout=timeout)


def _last_json(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("name", MODULES)
def test_module_imports_are_evaluate_and_amdkv_one_per_line(name: str) -> None:
    """evaluate installs (asks for) a module's top-level imports by name; ours are exactly these."""
    from evaluate.loading import get_imports

    imports = get_imports(str(REPO / "eval" / "metrics" / name / f"{name}.py"))
    assert sorted(i[1] for i in imports if i[0] == "library") == ["amdkv", "evaluate"]
    assert (REPO / "eval" / "metrics" / name / "README.md").read_text().startswith("---\ntitle:")


def test_local_modules_load_and_refuse_to_run_code_without_opt_in(tmp_path: Path) -> None:
    out = _last_json(_run(f"""
        import json, os, evaluate
        out = {{}}
        for name in {list(MODULES)!r}:
            m = evaluate.load(os.path.join({str(REPO)!r}, "eval", "metrics", name))
            try:
                m.compute(predictions=[["x"]], references=["t"])
                refused = None
            except ValueError as exc:
                refused = str(exc)
            out[name] = {{"class": type(m).__name__, "features": sorted(m.features), "refused": refused}}
        print(json.dumps(out))
        """, cwd=tmp_path, env={"PYTHONPATH": str(REPO), "HF_HOME": str(tmp_path / "hf")}))
    assert [out[n]["class"] for n in MODULES] == ["Kernelbench", "Pytorch2hip", "TritonbenchG", "Rocmbench",
                                                  "Verified"]
    for name in MODULES:
        assert out[name]["features"] == ["predictions", "references"]
        assert out[name]["refused"] and 'HF_ALLOW_CODE_EVAL="1"' in out[name]["refused"]


def test_missing_amdkv_is_named_by_evaluate(tmp_path: Path) -> None:
    """On a machine without amdkv, `evaluate.load` stops and names it (we simulate the missing
    package with an import hook that refuses `amdkv`)."""
    blocker = tmp_path / "block"
    blocker.mkdir()
    (blocker / "sitecustomize.py").write_text(
        "import sys\nclass _NoAmdkv:\n    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'amdkv' or name.startswith('amdkv.'):\n"
        "            raise ModuleNotFoundError(\"No module named 'amdkv'\")\n"
        "sys.meta_path.insert(0, _NoAmdkv())\n")
    proc = _run(f"""
        import evaluate
        try:
            evaluate.load({str(REPO / 'eval' / 'metrics' / 'rocmbench')!r})
        except ImportError as exc:
            print("IMPORT_ERROR", exc)
        """, cwd=tmp_path, env={"PYTHONPATH": str(blocker), "HF_HOME": str(tmp_path / "hf")})
    assert "IMPORT_ERROR" in proc.stdout and "amdkv" in proc.stdout and "pip install" in proc.stdout


class _Quiet(http.server.SimpleHTTPRequestHandler):
    requests: list[str] = []

    def log_message(self, fmt: str, *args) -> None:  # noqa: D102 - keep the test output clean
        _Quiet.requests.append(fmt % args)


def test_load_by_repo_id_from_a_file_server_then_offline(tmp_path: Path) -> None:
    served = tmp_path / "hub" / "spaces" / "amdkv" / "rocmbench" / "resolve" / "main"
    served.mkdir(parents=True)
    for f in ("rocmbench.py", "README.md"):
        shutil.copy2(REPO / "eval" / "metrics" / "rocmbench" / f, served / f)
    handler = functools.partial(_Quiet, directory=str(tmp_path / "hub"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        (tmp_path / "first").mkdir()
        env = {"PYTHONPATH": str(REPO), "HF_HOME": str(tmp_path / "hf"),
               "HF_ENDPOINT": f"http://127.0.0.1:{server.server_address[1]}"}
        first = _last_json(_run("""
            import json, evaluate
            m = evaluate.load("amdkv/rocmbench")
            print(json.dumps({"class": type(m).__name__, "file": __import__("inspect").getfile(type(m))}))
            """, cwd=tmp_path / "first", env={**env, "HF_MODULES_CACHE": str(tmp_path / "hf" / "modules")},
            online=True))
    finally:
        server.shutdown()
        server.server_close()
    assert first["class"] == "Rocmbench" and "amdkv--rocmbench" in first["file"]
    assert any("GET /spaces/amdkv/rocmbench/resolve/main/rocmbench.py" in r for r in _Quiet.requests)
    (tmp_path / "second").mkdir()
    second = _last_json(_run("""
        import json, evaluate
        m = evaluate.load("amdkv/rocmbench")
        try:
            m.compute(predictions=[["x"]], references=["t"])
        except ValueError as exc:
            print(json.dumps({"class": type(m).__name__, "refused": "HF_ALLOW_CODE_EVAL" in str(exc)}))
        """, cwd=tmp_path / "second", env={"PYTHONPATH": str(REPO), "HF_HOME": str(tmp_path / "hf"),
                                           "HF_MODULES_CACHE": str(tmp_path / "hf" / "modules"),
                                           "HF_EVALUATE_OFFLINE": "1"}))
    assert second == {"class": "Rocmbench", "refused": True}


def test_compute_on_cpu_returns_both_verdicts_with_intervals_and_platform(tmp_path: Path) -> None:
    """One real computation: the reference and a zeros cheat for the TritonBench-G fixture."""
    ref = (DATA / "tritonbench" / "data" / "TritonBench_G_v1" / "tiny_scale.py").read_text().split("#" * 146)[0]
    zeros = (DATA / "candidates" / "tbg_scale_zeros.py").read_text()
    out = _last_json(_run(f"""
        import json, os, evaluate
        os.environ["HF_ALLOW_CODE_EVAL"] = "1"
        m = evaluate.load({str(REPO / 'eval' / 'metrics' / 'tritonbench_g')!r})
        r = m.compute(predictions=[[{ref!r}, {zeros!r}]], references=["tiny_scale"], device="cpu", k=[1],
                      tasks={str(DATA / 'tritonbench')!r}, jobs=2, bootstrap=50)
        r.pop("details")
        print(json.dumps(r, default=str))
        """, cwd=tmp_path, env={"PYTHONPATH": str(REPO), "HF_HOME": str(tmp_path / "hf")}))
    assert out["platform"] == "cpu" and out["interpreter_verified"] is True and out["is_amd"] is False
    assert out["execution_accuracy@1"] == 1.0 and out["amdkv_strict/execution_accuracy@1"] == 0.5
    assert out["execution_accuracy@1_ci95"] is not None and "allclose" in out["rule"]
    assert out["agreement"]["benchmark_only"] == 1 and out["disagreements"][0]["task_id"] == "tiny_scale"


def test_verified_module_scores_any_task_source_under_amdkvs_rule(tmp_path: Path) -> None:
    """The generic module on bundled tasks: relu's reference and a candidate that returns its input
    (wrong), argmax's reference; pass@1 over tasks = (1/2 + 1) / 2, compile@1 = 1; the platform is
    named; a task id the suite lacks is a clear error."""
    from amdkv.tasks.builtin import solution_path

    relu, argmax = solution_path("l1_relu").read_text(), solution_path("l1_argmax").read_text()
    wrong = relu.replace("tl.maximum(x, 0.0)", "x") if "tl.maximum(x, 0.0)" in relu else None
    assert wrong is not None, "the relu solution changed: pick another one-line change"
    out = _last_json(_run(f"""
        import json, os, evaluate
        os.environ["HF_ALLOW_CODE_EVAL"] = "1"
        m = evaluate.load({str(REPO / 'eval' / 'metrics' / 'verified')!r})
        r = m.compute(predictions=[[{relu!r}, {wrong!r}], [{argmax!r}]], references=["l1_relu", "l1_argmax"],
                      tasks="builtin:all", device="cpu", k=[1], jobs=2, bootstrap=50)
        try:
            m.compute(predictions=[[{relu!r}]], references=["no_such_task"], tasks="builtin:all", device="cpu")
            bad = None
        except Exception as exc:
            bad = f"{{type(exc).__name__}}: {{exc}}"
        print(json.dumps({{"r": r, "bad": bad}}, default=str))
        """, cwd=tmp_path, env={"PYTHONPATH": str(REPO), "HF_HOME": str(tmp_path / "hf")}))
    r = out["r"]
    assert r["platform"] == "cpu" and r["interpreter_verified"] is True and r["is_amd"] is False
    assert r["n_tasks"] == 2 and r["n_samples"] == 3 and r["suite"] == "builtin:all"
    assert r["pass@1"] == 0.75 and r["compile@1"] == 1.0 and r["pass@1_ci95"] is not None
    assert r["status_counts"].get("ok") == 2 and r["status_counts"].get("mismatch") == 1, r["status_counts"]
    assert out["bad"] and "no_such_task" in out["bad"], out["bad"]


def test_task_sources_per_benchmark(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """tasks= wins; PyTorch-to-HIP defaults to the bundled suites; KernelBench and TritonBench-G
    download their tasks dataset through HfApi (mocked: the Hub cannot be reached here); ROCmBench
    has none and says so."""
    import huggingface_hub

    from amdkv.errors import BadInputError
    from amdkv.evaluation.hub_metric import resolve_tasks

    calls = []

    class FakeApi:
        def snapshot_download(self, repo_id: str, repo_type: str) -> str:
            calls.append((repo_id, repo_type))
            return str(tmp_path / "download")

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    assert resolve_tasks("rocmbench", "/src/GEAK-eval") == "rocmbench:/src/GEAK-eval"
    assert resolve_tasks("pytorch2hip", None) == "pytorch2hip:builtin"
    assert resolve_tasks("pytorch2hip", "builtin:eval") == "pytorch2hip:builtin:eval"
    assert resolve_tasks("tritonbench-g", None) == f"tritonbench-g:{tmp_path / 'download'}"
    assert calls == [("amdkv/tritonbench_g-tasks", "dataset")]
    with pytest.raises(BadInputError, match="no published tasks"):
        resolve_tasks("rocmbench", None)
    with pytest.raises(BadInputError, match="not ROCmBench tasks"):
        resolve_tasks("rocmbench", "kernelbench:/x")
