"""The agent loop driven by the replay clients, with real verification (Triton interpreter on CPU).

Scripted replay answers each stage the way a model should, from the bundled reference solutions;
stored replay serves the replies of a samples file. No model is involved on purpose: these tests
pin the agent's decisions (stages, stop rules, records, samples file) deterministically.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from toolchain_support import require_hipcc
from gen_support import cpu_verifier, run_trajectories, statuses, verifications_judged  # noqa: F401

from amdkv.gen.agent import AgentConfig
from amdkv.gen.run import GenSettings, run_gen
from amdkv.prompts import PromptConfig

TASKS = ("l1_relu", "l1_softmax", "l1_sum_lastdim")


@pytest.fixture(scope="module")
def verifier(cpu_verifier):
    return cpu_verifier


def settings(out: Path, *task_ids: str, turns: int = 2, samples: int = 1, script: str | None = None,
             replay_from: str | None = None, language: str = "triton", **agent_kw) -> GenSettings:
    agent = AgentConfig(language=language, prompt=PromptConfig(language=language, shots=0), turns=turns,
                        samples=samples, **agent_kw)
    return GenSettings(tasks="builtin:all", task_ids=task_ids, out=str(out), llm="replay", agent=agent,
                       script=script, replay_from=replay_from)


def test_bundled_solutions_come_out_ok(tmp_path, verifier):
    outcome = run_gen(settings(tmp_path / "run", *TASKS, turns=1), verifier=verifier, progress=False)
    assert outcome.exit_code == 0
    recs = run_trajectories(tmp_path / "run")
    assert [r["trajectory"]["task_id"] for r in recs] == sorted(TASKS)
    for r in recs:
        assert statuses(r) == ["ok"], r["trajectory"]["turns"][0]["verdict"]
        assert r["trajectory"]["metadata"]["stop_reason"] == "turns"
        assert r["trajectory"]["metadata"]["best_turn"] == 0
        assert r["trajectory"]["turns"][0]["verdict"]["platform"] == "cpu"
    s = outcome.summary
    assert s["tasks"]["complete"] == 3 and s["outcomes"]["correct"] == 3 and s["outcomes"]["first_turn_correct"] == 3
    # the samples file holds every task's program with its turn, in the `amdkv eval` format
    from amdkv.evaluation.samples import parse_samples_file

    parsed = parse_samples_file(tmp_path / "run" / "samples.jsonl", TASKS)
    assert {p.task_id: p.turns for p in parsed} == {t: (0,) for t in TASKS}


def test_broken_first_turn_then_fixed(tmp_path, verifier):
    """A compile error at turn 0 is answered with the fix at turn 1, whose verdict is ok."""
    out = tmp_path / "run"
    outcome = run_gen(settings(out, "l1_relu", turns=2, script="write=compile_error"), verifier=verifier, progress=False)
    assert outcome.exit_code == 0
    (rec,) = run_trajectories(out)
    turns = rec["trajectory"]["turns"]
    assert statuses(rec) == ["compile_error", "ok"]
    assert [t["stage"] for t in turns] == ["write", "fix_compile"]
    assert "this line is not Python" in turns[0]["code"]
    assert "syntax" in turns[0]["feedback"].lower()   # the model was shown why
    assert rec["trajectory"]["metadata"]["best_turn"] == 1
    assert rec["trajectory"]["final_status"] == "ok"
    # the request of turn 1 is the conversation: prompt, reply 0, feedback 0
    from amdkv.prompts import Trajectory

    traj = Trajectory.from_record(rec["trajectory"])
    req = traj.request(1)
    assert [m["role"] for m in req] == ["system", "user", "assistant", "user"]
    assert req[-1]["content"] == turns[0]["feedback"]
    # the run folder replays (StoredReplay reads its record store): the same replies, turn by turn
    from amdkv.gen.replay import StoredReplay

    assert [r.content for r in StoredReplay.from_path(out).runs["l1_relu"][0]] == [t["reply"] for t in turns]


def test_optimise_turn_with_the_same_program_stops(tmp_path, verifier):
    """After ok, the optimise request gets the same program back: its verdict is reused (no second
    verification) and the trajectory stops as `unchanged`."""
    out = tmp_path / "run"
    outcome = run_gen(settings(out, "l1_relu", turns=4), verifier=verifier, progress=False)
    (rec,) = run_trajectories(out)
    turns = rec["trajectory"]["turns"]
    assert statuses(rec) == ["ok", "ok"]
    assert [t["stage"] for t in turns] == ["write", "optimise"]
    assert turns[1]["verdict"]["cache_hit"] is True
    assert rec["trajectory"]["metadata"]["stop_reason"] == "unchanged"
    assert verifications_judged(outcome.summary) == 1


@pytest.mark.parametrize("action,first", [("no_code", "extraction:no_code_block"),
                                          ("truncated", "extraction:truncated"),
                                          ("conflict", "ok"),
                                          ("think", "ok")])
def test_bad_replies_get_the_right_outcome(tmp_path, verifier, action, first):
    """No code or a cut-off reply: no program, a `fix_format` request follows and is answered.
    Two conflicting programs: the last is verified (the broken first one is not). A think block:
    split off into `reasoning`."""
    out = tmp_path / "run"
    outcome = run_gen(settings(out, "l1_relu", turns=2, script=f"write={action},optimise=solution"), verifier=verifier,
                      progress=False)
    assert outcome.exit_code == 0
    (rec,) = run_trajectories(out)
    turns = rec["trajectory"]["turns"]
    assert statuses(rec)[0] == first
    if first.startswith("extraction:"):
        assert statuses(rec) == [first, "ok"]
        assert turns[1]["stage"] == "fix_format"
    if action == "truncated":
        assert turns[0]["finish_reason"] == "length"
    if action == "conflict":
        assert "this line is not Python" not in turns[0]["code"]
    if action == "think":
        assert turns[0]["reasoning"].startswith("Match the reference")
        assert "<think>" not in turns[0]["reply"]


def test_stored_replay_of_a_samples_file(tmp_path, verifier):
    """Stored replay: run j turn t of a samples file is served at sample j turn t. A mismatching
    kernel then the correct one gives [mismatch, ok] with a fix_mismatch request in between."""
    from amdkv.gen.replay import reference_solution
    from amdkv.tasks.suites import load_suite

    task = next(t for t in load_suite("builtin:all") if t.id == "l1_relu")
    good = reference_solution(task, "triton")
    wrong = good.replace("tl.maximum(x, 0.0)", "tl.maximum(x, 0.5)")
    assert wrong != good
    samples = tmp_path / "replay.jsonl"
    samples.write_text(json.dumps({"task_id": "l1_relu", "samples": [wrong, good, good], "turns": [0, 1, 0]}) + "\n")
    out = tmp_path / "run"
    outcome = run_gen(settings(out, "l1_relu", turns=3, samples=2, replay_from=str(samples)), verifier=verifier,
                      progress=False)
    recs = run_trajectories(out)
    assert [statuses(r) for r in recs] == [["mismatch", "ok"], ["ok"]]
    assert recs[0]["trajectory"]["turns"][1]["stage"] == "fix_mismatch"
    # sample 0 ran out of stored turns after its second; sample 1 after its first
    assert [r["trajectory"]["metadata"]["stop_reason"] for r in recs] == ["replay_exhausted", "replay_exhausted"]
    assert outcome.exit_code == 0


def test_stored_replay_of_dataset_folders(tmp_path):
    """Stored replay from a dataset folder in the Hub layout, read by the real `load_dataset`: a
    config with a program column (each row one single-turn run) and a trajectories config (each row's
    `turns` one run, turn by turn); rows of another shape are refused saying what they need."""
    from datasets import Dataset

    from amdkv.errors import BadInputError
    from amdkv.gen.llm import RequestContext
    from amdkv.gen.replay import StoredReplay

    programs = tmp_path / "programs"
    (programs / "data").mkdir(parents=True)
    Dataset.from_list([{"task_id": "l1_relu", "code": "A = 1\n"}, {"task_id": "l1_relu", "code": "B = 2\n"}]) \
        .to_parquet(str(programs / "data" / "train-00000-of-00001.parquet"))
    replay = StoredReplay.from_path(programs)
    assert replay.coverage("l1_relu") == 2
    (second,) = replay.chat([], context=RequestContext(task_id="l1_relu", sample=1, turn=0))
    assert "B = 2" in second.content and "```" in second.content  # fenced, as a model would answer
    trajectories = tmp_path / "trajectories"
    (trajectories / "data").mkdir(parents=True)
    turns = [{"reply": "first", "reasoning": "r", "finish_reason": "stop"},
             {"reply": "second", "reasoning": None, "finish_reason": "length"}]
    Dataset.from_list([{"task_id": "l1_relu", "turns": turns}]) \
        .to_parquet(str(trajectories / "data" / "train-00000-of-00001.parquet"))
    replay = StoredReplay.from_path(trajectories)
    late = replay.chat([], context=RequestContext(task_id="l1_relu", sample=0, turn=1))[0]
    assert (late.content, late.finish_reason) == ("second", "length")
    odd = tmp_path / "odd"
    (odd / "data").mkdir(parents=True)
    Dataset.from_list([{"task_id": "l1_relu", "text": "x"}]).to_parquet(str(odd / "data" / "train-00000-of-00001.parquet"))
    with pytest.raises(BadInputError, match="rows need `task_id` and `turns`"):
        StoredReplay.from_path(odd)


def test_hip_agent_on_cpu(tmp_path, verifier):
    """HIPKernelGen: a Python-level compile error is caught on any machine; a HIP program that
    compiles cannot be run without a GPU here, so the trajectory stops as unverifiable (recorded).
    The fixed turn is compiled for gfx942, which needs the real hipcc."""
    require_hipcc("gfx942")
    out = tmp_path / "run"
    outcome = run_gen(settings(out, "l1_relu", turns=3, script="write=compile_error", language="hip"),
                      verifier=verifier, progress=False)
    (rec,) = run_trajectories(out)
    assert rec["trajectory"]["language"] == "hip"
    assert rec["origin"]["agent"] == "HIPKernelGen"
    assert statuses(rec) == ["compile_error", "unverifiable"]
    assert rec["trajectory"]["metadata"]["stop_reason"] == "unverifiable"
    assert outcome.exit_code == 0


def test_rerun_generates_nothing_twice_and_other_settings_are_refused(tmp_path, verifier):
    out = tmp_path / "run"
    first = run_gen(settings(out, "l1_relu", turns=1), verifier=verifier, progress=False)
    assert first.summary["trajectories"]["recorded_now"] == 1
    again = run_gen(settings(out, "l1_relu", turns=1), verifier=verifier, progress=False)
    assert again.summary["trajectories"]["recorded_now"] == 0
    assert again.summary["tokens"]["requests"] == 0 and again.summary["throughput"]["verifications"] == 0
    # as `amdkv gen` re-runs it (no verifier opened, nothing to verify): the summary still names the platform
    rerun = run_gen(settings(out, "l1_relu", turns=1), progress=False)
    assert rerun.summary["run"]["platform"] == "cpu" and rerun.summary["throughput"]["verifications"] == 0
    # more samples extend the run: only the new sample is generated
    more = run_gen(settings(out, "l1_relu", turns=1, samples=2), verifier=verifier, progress=False)
    assert more.summary["trajectories"]["recorded_now"] == 1
    assert [r["origin"]["sample"] for r in run_trajectories(out)] == [0, 1]
    from amdkv.errors import BadInputError

    with pytest.raises(BadInputError, match="turns"):
        run_gen(settings(out, "l1_relu", turns=2), verifier=verifier, progress=False)
    # a scripted replay's script decides the replies, as a model's weights do: another one is refused
    with pytest.raises(BadInputError, match="replay_script"):
        run_gen(settings(out, "l1_relu", turns=1, script="write=compile_error"), verifier=verifier, progress=False)


def test_verification_through_amdkv_serve(tmp_path):
    """`--verifier-url`: programs go to an `amdkv serve` service (a separate process, real HTTP on
    loopback, cpu platform) through RemoteVerifier, the same BaseVerifier interface."""
    import dataclasses

    from amdkv.serve.server import ServeProcess

    server = ServeProcess("--device", "cpu", "--jobs", "2", "--no-verdict-cache", "--port", "0",
                          log_path=tmp_path / "serve.log").start()
    try:
        s = dataclasses.replace(settings(tmp_path / "run", "l1_relu", turns=2, script="write=compile_error"),
                                verifier_url=server.url)
        outcome = run_gen(s, progress=False)
    finally:
        server.stop()
    assert outcome.exit_code == 0
    (rec,) = run_trajectories(tmp_path / "run")
    assert statuses(rec) == ["compile_error", "ok"]
    assert rec["trajectory"]["turns"][1]["verdict"]["platform"] == "cpu"
    assert outcome.summary["run"]["verifier_url"] == server.url and outcome.summary["run"]["platform"] == "cpu"


def test_optimise_from_an_existing_kernel(tmp_path, verifier):
    """--optimise-from reference: the task's existing kernel is verified once per task (not once
    per sample), and every trajectory opens with the optimise request built from its verdict (the
    program and its timings in one user message)."""
    out = tmp_path / "run"
    outcome = run_gen(settings(out, "l1_relu", turns=3, samples=2, optimise_from="reference"), verifier=verifier,
                      progress=False)
    assert outcome.exit_code == 0
    recs = run_trajectories(out)
    assert len(recs) == 2
    for rec in recs:
        tr = rec["trajectory"]
        assert [t["stage"] for t in tr["turns"]] == ["optimise"]
        assert tr["prompt"][-1]["content"].count("class ModelNew") >= 1   # the kernel to improve is shown
        assert tr["metadata"]["seed_status"] == "ok" and tr["metadata"]["optimise_from"] == "reference"
        assert tr["metadata"]["stop_reason"] == "unchanged"                 # the scripted model returned it as is
        assert tr["turns"][0]["verdict"]["cache_hit"] is True
    assert verifications_judged(outcome.summary) == 1


def test_wall_budget_reaches_the_verifier(tmp_path, verifier):
    """`--max-wall`: a reply that arrives after the budget is not verified (the verifier gets the
    deadline and answers not-started at once), not recorded, and left for a re-run, which then
    verifies it. Before, every reply in flight at the deadline was still verified, and the H200 run
    of 2026-12-02 ran 141 s on an 81 s budget."""
    import dataclasses
    import time

    from amdkv.gen.pipeline import PipelineSettings
    from amdkv.gen.replay import ScriptedReplay, solutions_from
    from amdkv.tasks.suites import load_suite

    budget_s = 1.0

    class SlowScripted(ScriptedReplay):
        def chat(self, *args, **kwargs):
            time.sleep(budget_s + 0.5)  # the model answers after the wall budget
            return super().chat(*args, **kwargs)

    out = tmp_path / "run"
    tasks = [t for t in load_suite("builtin:all") if t.id == "l1_relu"]
    base = settings(out, "l1_relu", turns=1)
    slow = SlowScripted(solutions_from(tasks, "triton"))
    t0 = time.monotonic()
    timed = dataclasses.replace(base, pipeline=PipelineSettings(deadline=t0 + budget_s))
    outcome = run_gen(timed, client=slow, verifier=verifier, progress=False)
    assert time.monotonic() - t0 < budget_s + 10, "a verification ran after the wall budget"
    assert outcome.summary["stopped"] == "wall_budget", outcome.summary
    assert run_trajectories(out) == [], "an attempt past the budget must not be recorded"
    tp = outcome.summary["throughput"]
    assert tp["infra_errors"] == 0 and tp["verifications"] == 0, "a budget stop is neither a verdict nor an infra error"
    rerun = run_gen(base, verifier=verifier, progress=False)
    assert rerun.exit_code == 0
    (rec,) = run_trajectories(out)
    assert statuses(rec) == ["ok"]


def test_replaying_other_replies_under_the_same_file_name_is_refused(tmp_path, verifier):
    """A run folder's identity holds the replayed replies themselves: the same file again resumes
    (nothing generated twice), an edited file of the same name is refused, not mixed in."""
    from amdkv.errors import BadInputError
    from amdkv.gen.replay import reference_solution
    from amdkv.tasks.suites import load_suite

    task = next(t for t in load_suite("builtin:all") if t.id == "l1_relu")
    good = reference_solution(task, "triton")
    samples = tmp_path / "replay.jsonl"
    samples.write_text(json.dumps({"task_id": "l1_relu", "samples": [good]}) + "\n")
    out = tmp_path / "run"
    assert run_gen(settings(out, "l1_relu", turns=1, replay_from=str(samples)), verifier=verifier,
                   progress=False).exit_code == 0
    again = run_gen(settings(out, "l1_relu", turns=1, replay_from=str(samples)), verifier=verifier, progress=False)
    assert again.exit_code == 0 and len(run_trajectories(out)) == 1
    samples.write_text(json.dumps({"task_id": "l1_relu", "samples": [good.replace("0.0)", "0.5)")]}) + "\n")
    with pytest.raises(BadInputError, match="replay_sha256"):
        run_gen(settings(out, "l1_relu", turns=1, replay_from=str(samples)), verifier=verifier, progress=False)
    assert len(run_trajectories(out)) == 1, "the refused run must not add records"
