"""The fault suite: every fault a candidate can inflict on the harness, on one platform, in one call.

    python3 benchmarks/fault_suite_gpu.py --device cuda --out $OUT --control --cost 8 --cost-rounds 2  # H200, ~4 min
    python benchmarks/fault_suite_gpu.py --out faults_out --device cpu --control   # CI / the dev machine, ~45 s

For each fault of tests/data/faults/manifest.json that the platform can host: verify the candidate,
then check that the verdict is the expected one, that the harness is alive (the same verifier judges
a correct candidate on the same device next: "next ok"), and that nothing leaked: no process left
(this script is a child subreaper, so every orphan of a worker becomes its child and is seen), no
temp folder left, no GPU memory held. Escape candidates (static checks skipped by the test-only
switch, or C++ host code the static checks cannot read) must have no effect: no file written outside
the scratch folder or into the package, no TCP connection or UDP datagram reaching the listeners this
script runs on loopback, no signal reaching a victim process, no secret (a file this process holds
open and mapped, as it holds reference outputs) in the verdict.

  --control   also runs the escape candidates with the OS sandbox off: they must escape then (proof
              that they are real escapes and that the OS sandbox is what stops them)
  --cost N    the sandbox's cost, off vs on, side by side: spare starts and N verifications per mode
              (bundled level-1 solutions, references cached), two interleaved rounds

Writes fault_suite.json and fault_suite.md to --out; exit code 1 when a row fails.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import mmap
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

from report_files import markdown_table, write_report  # noqa: E402
from sandbox_cost import cost_table, measure_cost  # noqa: E402

DATA = REPO / "tests" / "data"
MANIFEST = DATA / "faults" / "manifest.json"
GOOD_TASK = "l1_relu"
SETTLE_S = 15.0  # how long killed workers and freed GPU memory get to disappear


# ------------------------------------------------------------------------------ observers
class Listeners:
    """A TCP and a UDP listener on loopback: anything a candidate sends them is an escape."""

    def __init__(self) -> None:
        self.tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.tcp.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.tcp.bind(("127.0.0.1", 0))
        self.tcp.listen(16)
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.tcp_port, self.udp_port = self.tcp.getsockname()[1], self.udp.getsockname()[1]
        self.events: list[str] = []
        for target in (self._accept, self._receive):
            threading.Thread(target=target, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, addr = self.tcp.accept()
            except OSError:
                return
            self.events.append(f"tcp connection from {addr}")
            conn.close()

    def _receive(self) -> None:
        while True:
            try:
                data, addr = self.udp.recvfrom(4096)
            except OSError:
                return
            self.events.append(f"udp datagram {data[:32]!r} from {addr}")


class Victim:
    """A process outside every sandbox that writes a file when it gets SIGUSR1."""

    def __init__(self, folder: Path) -> None:
        self.flag = folder / "victim-signalled"
        code = ("import signal, sys, time\n"
                f"signal.signal(signal.SIGUSR1, lambda *a: open({str(self.flag)!r}, 'w').write('signalled'))\n"
                "while True:\n    time.sleep(1)\n")
        self.proc = subprocess.Popen([sys.executable, "-c", code])
        time.sleep(0.5)  # its handler is installed

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()


class Secret:
    """A token in a file outside every scratch folder, held open and mapped by this process."""

    def __init__(self, folder: Path, token: str) -> None:
        self.path = folder / "secret.txt"
        self.path.write_text(f"AMDKV-SECRET-{token}\n" + "." * 4096)
        self.token = f"AMDKV-SECRET-{token}"
        self.fh = open(self.path, "rb")
        self.map = mmap.mmap(self.fh.fileno(), 0, prot=mmap.PROT_READ)


# ------------------------------------------------------------------------------ processes
def _stat(pid: int) -> tuple[int, str] | None:
    """(parent pid, state) of a process, or None when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return int(fields[1]), fields[0]


def descendants(root: int) -> dict[int, str]:
    """pid -> state of every process below `root`."""
    parents: dict[int, tuple[int, str]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (info := _stat(int(entry))) is not None:
            parents[int(entry)] = info
    out: dict[int, str] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, state) in parents.items():
            if ppid == parent and pid not in out:
                out[pid] = state
                frontier.append(pid)
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def fork_server_pids() -> set[int]:
    from amdkv.verify import fork_server

    return {s.proc.pid for s in fork_server._SHARED.values() if s.alive}


def set_child_subreaper() -> None:
    pr_set_child_subreaper = 36
    ctypes.CDLL(None).prctl(pr_set_child_subreaper, 1, 0, 0, 0)


# ------------------------------------------------------------------------------ the suite
class Suite:
    def __init__(self, device: str, out: Path, sandbox: str) -> None:
        from amdkv.config import VerifierConfig
        from amdkv.tasks.builtin import solution_path
        from amdkv.tasks.suites import load_suite
        from amdkv.verify.platform import detect_platform

        self.device, self.sandbox = device, sandbox
        self.platform = detect_platform(device)
        self.gpu = self.platform.can_time
        self.base = Path(tempfile.mkdtemp(prefix="amdkv-faults-"))
        if os.geteuid() == 0:  # a root-run worker's real ids are nobody + root's group (pool.unreachable_for_root_worker)
            self.base.chmod(0o750)
        self.tempdir_before = tempfile.tempdir
        tempfile.tempdir = str(self.base)  # every spare, scratch and lock of this run lives here
        self.outside = self.base / "outside"
        self.outside.mkdir()
        self.token = secrets.token_hex(8)
        self.listeners = Listeners()
        self.victim = Victim(self.outside)
        self.secret = Secret(self.outside, self.token)
        self.cache_dir = VerifierConfig.from_env().cache_dir
        self.package_dir = str(Path(__import__("amdkv").__file__).resolve().parent)
        self.task = next(t for t in load_suite("builtin:all") if t.id == GOOD_TASK)
        self.good = solution_path(GOOD_TASK, "triton").read_text()
        self.verifiers: dict[tuple[str, bool, bool], Any] = {}
        self.gpu_baseline_mib: float | None = None
        self.helper_pids = {self.victim.proc.pid}

    # -------------------------------------------------------------- verifiers
    def verifier(self, sandbox: str, skip_static: bool, short: bool) -> Any:
        key = (sandbox, skip_static, short)
        if key not in self.verifiers:
            from amdkv.verify.verifier import Verifier

            timeout = (4.0 if short else 90.0) if not self.gpu else (20.0 if short else 180.0)
            before = self.gpu_used_mib()
            self.verifiers[key] = Verifier(
                self.device, jobs=1, spares=1, timeout=timeout, trials=1, verdict_cache=False,
                compile_baseline=False, time_performance=False, sandbox=sandbox, sandbox_nproc=64,
                sandbox_file_size_gib=1.0 if self.gpu else 0.0625, mem_cap_gib=2.0,
                unsafe_skip_static_checks=skip_static)
            if self.gpu and self.gpu_baseline_mib is not None:
                # the new verifier's spare holds a GPU context for as long as the suite runs: part of
                # the baseline, not a leak (the H200 run of session 8 counted it as one)
                for spare in self.verifiers[key].pool._spares:
                    spare.wait_ready()
                self.gpu_baseline_mib += max(0.0, (self.gpu_used_mib() or 0.0) - (before or 0.0))
        return self.verifiers[key]

    def live_pids(self) -> set[int]:
        pids = set(self.helper_pids) | fork_server_pids()
        for v in self.verifiers.values():
            pids |= {s.proc.pid for s in v.pool._spares}
        return pids

    def live_folders(self) -> set[str]:
        names = {"outside"}
        for v in self.verifiers.values():
            names |= {os.path.basename(s.root) for s in v.pool._spares}
            names.add(os.path.basename(v._scratch))
        return names

    # -------------------------------------------------------------- leaks
    def gpu_used_mib(self) -> float | None:
        if not self.gpu:
            return None
        import torch

        free, total = torch.cuda.mem_get_info(self.platform.device)
        return round((total - free) / 2**20, 1)

    def leaks(self) -> dict[str, Any]:
        """What is left once the verdict is in: processes, temp folders, GPU memory (waits for the
        killed ones to go, up to SETTLE_S)."""
        deadline = time.monotonic() + SETTLE_S
        while True:
            live = self.live_pids()
            procs = {}
            for pid, state in descendants(os.getpid()).items():
                if pid in live:
                    continue
                if state == "Z":  # dead; an orphan adopted by this subreaper is reaped here
                    if (_stat(pid) or (0, ""))[0] == os.getpid():
                        with contextlib.suppress(ChildProcessError):
                            os.waitpid(pid, os.WNOHANG)
                    continue
                procs[pid] = _cmdline(pid)[:120]
            folders = sorted(set(os.listdir(self.base)) - self.live_folders()
                             - {n for n in os.listdir(self.base) if n.startswith("amdkv-timing-")})
            used = self.gpu_used_mib()
            gpu_leak = (used is not None and self.gpu_baseline_mib is not None
                        and used > self.gpu_baseline_mib + 1024)
            if (not procs and not folders and not gpu_leak) or time.monotonic() > deadline:
                return {"processes": [f"{p}: {c}" for p, c in procs.items()], "folders": folders,
                        "gpu_used_mib": used, "gpu_baseline_mib": self.gpu_baseline_mib, "gpu_leak": gpu_leak}
            time.sleep(0.5)

    # -------------------------------------------------------------- escapes
    def params(self) -> dict[str, str]:
        return {"OUTSIDE_DIR": str(self.outside), "HOME_DIR": os.path.expanduser("~"), "TOKEN": self.token,
                "PACKAGE_DIR": self.package_dir, "SECRET_FILE": str(self.secret.path), "SECRET": self.secret.token,
                "CACHE_DIR": str(self.cache_dir), "TCP_PORT": str(self.listeners.tcp_port),
                "UDP_PORT": str(self.listeners.udp_port), "VICTIM_PID": str(self.victim.proc.pid),
                "VERIFIER_PID": str(os.getpid())}

    def escape_marks(self) -> list[str]:
        """Traces of an escape, removed as they are found (the next candidate starts clean)."""
        marks = []
        for path in list(self.outside.glob("escape-*")) + list(Path(self.package_dir).glob("_escape_*")) + \
                list(Path(os.path.expanduser("~")).glob(f".amdkv-escape-{self.token}")):
            marks.append(f"file {path}")
            path.unlink()
        if self.victim.flag.exists():
            marks.append("victim got SIGUSR1")
            self.victim.flag.unlink()
        marks += self.listeners.events
        self.listeners.events.clear()
        return marks

    # -------------------------------------------------------------- one fault
    def candidate_text(self, entry: dict[str, Any]) -> str:
        text = (DATA / entry["candidate"]).read_text()
        for key, value in self.params().items():
            text = text.replace("{{" + key + "}}", value)
        return text

    def expected(self, entry: dict[str, Any], sandbox: str) -> dict[str, Any] | None:
        if entry.get("escape"):
            if sandbox == "off":
                return None  # the control: only whether it escaped counts
            if entry["skip_static"]:
                return {"status": "unverifiable", "reason": "static_checks_skipped"}
            return entry.get("expect_escape", {"status": "ok"})
        return entry.get("expect_gpu", entry["expect"]) if self.gpu else entry["expect"]

    def run(self, entry: dict[str, Any], sandbox: str, applied: list[str]) -> dict[str, Any]:
        from amdkv.verify import Candidate

        row: dict[str, Any] = {"fault": entry["fault"], "candidate": entry["candidate"], "sandbox": sandbox,
                               "static_checks": "skipped" if entry["skip_static"] else "on", "why": entry["why"]}
        platforms = entry.get("platforms", ["cpu", "gpu"])
        if ("gpu" if self.gpu else "cpu") not in platforms:
            return {**row, "result": "skipped", "skip_reason": f"only on {', '.join(platforms)} platforms"}
        missing = [p for p in entry.get("needs", []) if p not in applied]
        if sandbox != "off" and missing:
            return {**row, "result": "skipped", "skip_reason": f"this machine's sandbox lacks {missing}"}
        self.escape_marks()  # start clean
        servers_before = fork_server_pids()
        verifier = self.verifier(sandbox, entry["skip_static"], bool(entry.get("short_timeout")))
        t0 = time.monotonic()
        verdict = verifier.verify(self.task, Candidate(self.candidate_text(entry)))
        row.update(seconds=round(time.monotonic() - t0, 2), status=verdict.status, reason=verdict.reason,
                   sandbox_applied=verdict.env.get("sandbox", {}).get("applied"),
                   diagnostics=verdict.diagnostics[-600:])
        marks = self.escape_marks()
        if self.secret.token in json.dumps(verdict.to_dict()) or "ESCAPED" in verdict.diagnostics:
            marks.append("the verdict shows an escape: " + verdict.diagnostics[verdict.diagnostics.find("ESCAPED"):][:200])
        row["escaped"] = marks
        exp = self.expected(entry, sandbox)
        row["expected"] = exp
        if exp is not None:
            reasons = exp.get("reason")  # one reason, or a list where the Python version decides which
            row["verdict_right"] = (verdict.status == exp["status"]
                                    and (reasons is None or verdict.reason in (reasons if isinstance(reasons, list) else [reasons]))
                                    and exp.get("message", "") in verdict.diagnostics)
        # the harness lives: the same verifier (same device, same sandbox) judges a correct candidate
        good = self.verifier(sandbox, False, False).verify(self.task, Candidate(self.good))
        row["harness_alive"] = good.status != "infra_error"
        row["fork_server_restarted"] = not servers_before <= fork_server_pids()
        row["next_ok"] = good.status == "ok"
        row["leaks"] = self.leaks()
        clean = not row["leaks"]["processes"] and not row["leaks"]["folders"] and not row["leaks"]["gpu_leak"]
        if sandbox == "off":  # the control: a real escape, seen from outside the sandbox
            row["result"] = "pass" if marks else "FAIL"
        else:
            row["result"] = "pass" if (row.get("verdict_right") and not marks and row["harness_alive"]
                                       and row["next_ok"] and clean) else "FAIL"
        return row

    def close(self) -> None:
        for v in self.verifiers.values():
            v.close()
        self.victim.close()
        self.secret.map.close()
        self.secret.fh.close()
        shutil.rmtree(self.base, ignore_errors=True)
        tempfile.tempdir = self.tempdir_before  # the cost phase after the suite makes its own folders


# ------------------------------------------------------------------------------ report
def markdown(res: dict[str, Any]) -> str:
    lines = [f"Fault suite on {res['host']} ({res['cores']} cores), platform {res['platform']} ({res['device_name']}), "
             f"torch {res['torch']}, triton {res['triton']}. OS sandbox here: "
             f"{', '.join(res['sandbox']['applied']) or 'nothing'}"
             + (f"; missing: {res['sandbox']['missing']}" if res['sandbox']['missing'] else "") + ".", ""]
    warm = res.get("warmup") or {}
    if warm and warm["status"] != "ok":
        lines += [f"**The correct candidate itself is {warm['status']}/{warm['reason']} under the sandbox** (every "
                  f"'next candidate' fails with it): `{warm['diagnostics'][-400:]!r}`", ""]

    def leaks(row: dict[str, Any]) -> str:
        lk = row.get("leaks")
        if not lk:
            return "-"
        bad = [f"{len(lk['processes'])} process(es)"] * bool(lk["processes"]) + \
              [f"{len(lk['folders'])} folder(s)"] * bool(lk["folders"]) + ["GPU memory"] * bool(lk["gpu_leak"])
        return ", ".join(bad) or "none"

    rows = []
    for row in res["faults"]:
        if row["result"] == "skipped":
            rows.append([row["fault"], row["static_checks"], "skipped: " + row["skip_reason"], "", "", "", "", ""])
            continue
        exp = row.get("expected") or {}
        got = f"{row['status']}/{row['reason']}" if row.get("reason") else row["status"]
        rows.append([row["fault"], row["static_checks"], got,
                     "yes" if row.get("verdict_right") else f"NO (expected {exp.get('status')}/{exp.get('reason')})",
                     "yes" if row["harness_alive"] else "NO", "yes" if row["next_ok"] else "NO", leaks(row),
                     "none" if not row["escaped"] else "; ".join(row["escaped"])[:120]])
    lines += markdown_table(["fault", "static checks", "status", "verdict right", "harness alive", "next candidate ok",
                             "leaks", "escaped"], rows)
    if res.get("control"):
        lines += ["", "Control: the escape candidates with the OS sandbox off (each must escape, or it proves nothing):", ""]
        lines += markdown_table(["fault", "status", "escaped (seen from outside)", "result"],
                                [[r["fault"], r.get("status", ""), "; ".join(r.get("escaped", []))[:140] or "nothing",
                                  r["result"]] for r in res["control"]])
    if res.get("cost"):
        lines += ["", "Cost of the OS sandbox (fork server spares; references cached; verdict cache off):", ""]
        lines += cost_table(res["cost"])
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--sandbox", default="auto", choices=("auto", "require"))
    ap.add_argument("--control", action="store_true", help="also run the escapes with the sandbox off")
    ap.add_argument("--cost", type=int, default=0, metavar="N", help="candidates per mode and round for the cost phase")
    ap.add_argument("--cost-rounds", type=int, default=2)
    ap.add_argument("--cost-jobs", type=int, default=2)
    ap.add_argument("--only", default=None, help="comma-separated fault names (default: all)")
    args = ap.parse_args()
    import platform as pyplatform

    import torch
    import triton

    from amdkv.verify import os_sandbox

    set_child_subreaper()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    entries = json.loads(MANIFEST.read_text())
    if args.only:
        wanted = {w.strip() for w in args.only.split(",")}
        entries = [e for e in entries if e["fault"] in wanted]
    caps = os_sandbox.capabilities()
    suite = Suite(args.device, out, args.sandbox)
    res: dict[str, Any] = {"host": pyplatform.node(), "cores": os.cpu_count(), "platform": suite.platform.name,
                           "device_name": torch.cuda.get_device_name(0) if suite.gpu else "cpu-interpreter",
                           "torch": torch.__version__, "triton": triton.__version__, "sandbox": caps,
                           "faults": [], "control": []}
    t_start = time.monotonic()
    try:
        warm = suite.verifier(args.sandbox, False, False).verify(suite.task, source=suite.good)  # references, spares
        res["warmup"] = {"status": warm.status, "reason": warm.reason, "sandbox": warm.env.get("sandbox"),
                         "diagnostics": warm.diagnostics[-1500:]}  # if not ok, every "next candidate" fails: why
        if warm.status != "ok":
            print(f"[fault_suite] the correct candidate is {warm.status}/{warm.reason} under the sandbox: "
                  f"{warm.diagnostics[-1500:]}", file=sys.stderr, flush=True)
        suite.gpu_baseline_mib = suite.gpu_used_mib()
        for entry in entries:
            print(f"[fault_suite] {entry['fault']}", file=sys.stderr, flush=True)
            res["faults"].append(suite.run(entry, args.sandbox, caps.get("applied", [])))
            write_report(out, "fault_suite", res, markdown)
        if args.control:
            for entry in entries:
                if entry.get("escape") and not entry.get("no_control"):
                    print(f"[fault_suite] control: {entry['fault']}", file=sys.stderr, flush=True)
                    res["control"].append(suite.run(entry, "off", []))
                    write_report(out, "fault_suite", res, markdown)
    finally:
        suite.close()
    res["faults_s"] = round(time.monotonic() - t_start, 1)
    if args.cost:
        res["cost"] = measure_cost(args.device, args.cost, args.cost_rounds, args.cost_jobs)
    print(write_report(out, "fault_suite", res, markdown))
    failed = [r["fault"] for r in res["faults"] + res["control"] if r["result"] == "FAIL"]
    if failed:
        print(f"[fault_suite] FAILED: {failed}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
