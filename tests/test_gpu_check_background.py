"""benchmarks/gpu_check.sh on this machine. `learnbg`/`learnwait` (CPU, the learning run's --tiny
plan): the run outlives the call that started it, the call's output pipe is released at once (on the
H200, 2026-12-04, a subshell holding it kept a call open to its 600-s limit), and a later call
collects what the run wrote. `extbg`/`extwait` the same for external_gpu.py, with the plan that finishes
KernelBench level 1 (benchmarks/plans/kb_level1_finish.sh) run whole on our fixture files, on `cpu`.
`clean`: what earlier calls left is removed, and what it freed is said."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _gpu_check(out: Path, steps: str, **env: str) -> tuple[str, float]:
    full = {**os.environ, "OUT": str(out), "STEPS": steps,
            "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", **env}
    t0 = time.monotonic()
    # stdout a pipe read to its end, as the device tool and `| tail` read a call's output
    proc = subprocess.run(["bash", str(REPO / "benchmarks" / "gpu_check.sh")], cwd=REPO, env=full,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:]
    return proc.stdout, time.monotonic() - t0


def test_a_background_learning_run_outlives_its_call_and_is_collected_later(tmp_path: Path) -> None:
    bg = Path("/tmp/amdkv-learnbg")
    # 40 SFT steps make the tiny run last well past the starting call (~1 min here)
    flags = "--tiny --set sft_max_steps=40"
    started, seconds = _gpu_check(tmp_path / "call1", "learnbg", LEARNBG_S="300", LEARN_FLAGS=flags)
    pid = int((bg / "pid").read_text())
    alive_after_call = _alive(pid)
    assert "step learnbg: started" in started
    assert alive_after_call, "the run ended with the call that started it (or before: too fast to tell)"
    assert seconds < 30, f"the starting call held its output open for {seconds:.0f} s"
    collected, _ = _gpu_check(tmp_path / "call2", "learnwait", LEARNWAIT_S="400")
    assert "step learnwait: finished" in collected, collected[-2000:]
    with tarfile.open(tmp_path / "call2" / "learnwait.tgz") as tgz:
        names = {Path(n).name for n in tgz.getnames()}
    assert {"learning.json", "log.txt", "setup.json"} <= names, names


def test_a_background_benchmark_plan_runs_its_steps_and_is_collected_later(tmp_path: Path) -> None:
    """The plan's four steps for real on `cpu` with our KernelBench fixture (two problems): an earlier report
    judged both and one is named again (KB_RERUN, as after a fix), so step 1 runs that one alone, step 2
    merges (its new row replaces the old; both `ok`), step 3 runs the harness side against the merge (the
    harness's code is not in the fixtures: "unavailable", said per task), and step 4 runs both sides again
    in the same run (both problems judged anew, not carried from the merge)."""
    data = REPO / "tests" / "data" / "external"
    first = tmp_path / "first"
    mod_args = [sys.executable, str(REPO / "benchmarks" / "external_gpu.py"), "--device", "cpu", "--only", "kb",
                "--kernelbench", str(data / "kernelbench"), "--budgets", "kb_harness=0"]
    spec_tasks = subprocess.run(mod_args + ["--out", str(first)], capture_output=True, text=True, timeout=600,
                                cwd=tmp_path)
    assert spec_tasks.returncode == 0, spec_tasks.stderr[-3000:]
    env = {"EXT_KERNELBENCH": str(data / "kernelbench"), "EXT_GEAK": str(data / "rocm"),
           "EXT_TRITONBENCH": str(data / "tritonbench"), "EXTBG_SCRIPT": "benchmarks/plans/kb_level1_finish.sh",
           "KB_MERGED": str(first / "external_gpu.json"), "KB_RERUN": "level1/1_Tiny_add", "KB_HARNESS_DONE": "",
           "PLAN_FLAGS": "--device cpu", "EXTBG_S": "700"}
    started, seconds = _gpu_check(tmp_path / "call1", "extbg", **env)
    assert "step extbg: started" in started and seconds < 30, (seconds, started[-2000:])
    collected, _ = _gpu_check(tmp_path / "call2", "extwait", EXTWAIT_S="500")
    assert "step extwait: finished (rc 0)" in collected, collected[-3000:]
    with tarfile.open(tmp_path / "call2" / "extwait.tgz") as tgz:
        tgz.extractall(tmp_path / "back", filter="data")
    back = tmp_path / "back" / "extwait"
    one = json.loads((back / "amdkv" / "external_gpu.json").read_text())["benchmarks"]["kb"]["amdkv"]
    merged = json.loads((back / "merged" / "external_gpu.json").read_text())["benchmarks"]["kb"]["amdkv"]
    harness = json.loads((back / "harness" / "external_gpu.json").read_text())["benchmarks"]["kb"]
    assert list(one["tasks"]) == ["level1/1_Tiny_add"], one["tasks"].keys()
    assert merged["status_counts"] == {"ok": 2} and len(merged["tasks"]) == 2
    assert merged["tasks"]["level1/1_Tiny_add"] == one["tasks"]["level1/1_Tiny_add"]  # the re-run's row stands
    assert harness["amdkv"]["tasks"] == merged["tasks"] and "unavailable" in harness["harness"]
    same = json.loads((back / "same_run" / "external_gpu.json").read_text())["benchmarks"]["kb"]
    assert same["amdkv"]["status_counts"] == {"ok": 2} and "from_call" not in same["amdkv"], same["amdkv"]
    assert same["amdkv"]["tasks"]["level1/1_Tiny_add"] != merged["tasks"]["level1/1_Tiny_add"]  # judged anew
    assert "unavailable" in same["harness"]
    log = (back / "log.txt").read_text()
    assert "plan step 3: rc 0" in log and "plan step 4: rc 0" in log, log[-3000:]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_clean_removes_what_earlier_calls_left_and_says_what_is_free(tmp_path: Path) -> None:
    """The step's process kill is off here (CLEAN_KILL=0): it is run_step's own pattern, and under
    pytest-xdist it would kill other test files' verifier workers."""
    cache, tmp = tmp_path / "cache", tmp_path / "tmp"
    left = [cache / "refs" / "ab" / "abcdef" / "expected.pt", tmp / "external-gpu-x1" / "run_kb" / "f",
            tmp / "amdkv-worker-1-y" / "scratch" / "o.pt"]
    kept = [cache / "compile-cache" / "triton" / "k", tmp / "other" / "f"]
    for path in left + kept:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * 1024)
    out, _ = _gpu_check(tmp_path / "call", "clean", AMDKV_CACHE_DIR=str(cache), CLEAN_TMP=str(tmp),
                        CLEAN_KILL="0")
    assert "step clean: free disk" in out and "free memory" in out, out[-2000:]
    assert not [p for p in left if p.exists()], "clean left earlier calls' files"
    assert all(p.exists() for p in kept), "clean removed what is not an earlier call's leftover"
    assert "at start: free disk" in (tmp_path / "call" / "summary.txt").read_text()


def test_the_level1_plan_defaults_name_reports_that_are_in_the_repository() -> None:
    """The plan's defaults (session 26's merge, the harness reports of sessions 25-28, nothing to re-run)
    are what the next GPU call reads on the machine: a moved or renamed file would cost device time to find
    out, and a harness report left out of the list would run its problems again."""
    script = (REPO / "benchmarks" / "plans" / "kb_level1_finish.sh").read_text()
    folders = {line.split("=", 1)[0]: REPO / line.split("=", 1)[1]
               for line in script.splitlines() if re.match(r"S2\d=", line)}
    assert set(folders) == {"S25", "S26", "S27", "S28"}
    merged = json.loads((folders["S26"] / "ext_kb_level1_merged.json").read_text())["benchmarks"]["kb"]["amdkv"]["tasks"]
    assert len(merged) == 100 and {r["status"] for r in merged.values()} == {"ok"}
    assert 'RERUN="${KB_RERUN-}"' in script
    default = re.search(r'HARNESS_DONE="\$\{KB_HARNESS_DONE-([^}]*)\}"', script).group(1).split()
    ran: set[str] = set()
    for ref in default:
        var, name = ref.lstrip("$").split("/")
        side = json.loads((folders[var] / name).read_text())["benchmarks"]["kb"]["harness"]["tasks"]
        ran |= {t for t, r in side.items() if not r.get("not_run")}
    # every harness report in the four folders is named, and together they ran all 100 problems of the merge
    assert sorted(default) == sorted(f"${var}/{p.name}" for var, folder in folders.items()
                                     for p in folder.glob("step3_harness_*.json"))
    assert ran == set(merged)
