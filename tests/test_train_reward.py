"""The RL reward (amdkv.train.reward): the scoring rule over every status, the speed term's platform
gate, the infra-error guard, the shuffled control, and the TRL reward function and the reward-hacking
audit on the real verifier (Triton interpreter, CPU)."""

from __future__ import annotations

import json
import math
import random

import pytest

from amdkv.errors import InfrastructureError
from amdkv.prompts import extract_code
from amdkv.tasks.suites import load_suite
from amdkv.train.reward import (COUNTED_STATUSES, InfraErrorGuard, RewardAudit, RewardWeights, VerdictReward, score,
                                shuffle_within_groups, speed_term)
from planted_rollout import GOOD, UNJUDGEABLE, WRONG, reply

W = RewardWeights()
# Right for the first calls, zeros afterwards: passes 1 seeded trial, fails 3 (the audit's catch).
FLAKY = GOOD.replace("        super().__init__()\n", "        super().__init__()\n        self.calls = 0\n").replace(
    "        return out\n",
    "        self.calls += 1\n        if self.calls > 2:\n            out.zero_()\n        return out\n")


@pytest.fixture(scope="module")
def relu():
    return next(t for t in load_suite("builtin:train") if t.id == "l1_relu")


@pytest.fixture(scope="module")
def verifier():
    from amdkv.verify.verifier import Verifier

    with Verifier("cpu", trials=1, jobs=2) as v:
        yield v


# ------------------------------------------------------------------------------ the rule
def test_score_every_status():
    ex = extract_code(reply(GOOD), "triton")
    assert ex.ok
    cases = {  # status -> (verdict fields, expected reward)
        "ok": ({"compiled": True, "speedup": None}, 0.1 + 0.4 + 1.0),
        "mismatch": ({"compiled": True}, 0.1 + 0.4),
        "runtime_error": ({"compiled": True}, 0.5),
        "timeout": ({"compiled": None}, 0.1),
        "compile_error": ({"compiled": False}, 0.1),
        "hack_detected": ({"compiled": True}, 0.0),
        "unverifiable": ({}, None),
        "infra_error": ({}, None),
    }
    for status, (fields, want) in cases.items():
        s = score(ex, {"status": status, "platform": "cpu", **fields}, W, "rocm")
        assert s.status == status
        assert s.reward == (None if want is None else pytest.approx(want)), status
        assert s.infra == (status == "infra_error")
        if s.reward is not None:
            assert sum(s.parts.values()) == pytest.approx(s.reward)
    none = score(extract_code("no code here", "triton"), None, W, "rocm")
    assert (none.reward, none.status) == (0.0, "no_program")


def test_speed_term_only_for_correct_programs_on_the_target_platform():
    assert speed_term(2.0, W) == pytest.approx(0.375)
    assert speed_term(4.0, W) == pytest.approx(1.5) and speed_term(64.0, W) == pytest.approx(1.5)
    assert speed_term(0.5, W) == 0.0 and speed_term(None, W) == 0.0 and speed_term(math.nan, W) == 0.0
    ex = extract_code(reply(GOOD), "triton")
    fast = {"status": "ok", "compiled": True, "speedup": 2.0}
    assert score(ex, {**fast, "platform": "rocm"}, W, "rocm").parts["speed"] == pytest.approx(0.375)
    assert score(ex, {**fast, "platform": "cuda"}, W, "rocm").parts["speed"] == 0.0  # NVIDIA timing: no MI300X claim
    assert score(ex, {**fast, "platform": "cuda"}, W, None).parts["speed"] == 0.0
    assert score(ex, {**fast, "status": "mismatch", "platform": "rocm"}, W, "rocm").parts["speed"] == 0.0
    heavy = RewardWeights(format=0.0, speed=1.0, speed_cap=10.0)
    assert score(ex, {**fast, "speedup": 4.0, "platform": "rocm"}, heavy, "rocm").reward == pytest.approx(1.4 + 4.0)
    with pytest.raises(Exception, match="weight"):
        RewardWeights(correct=-1.0)


# ------------------------------------------------------------------------------ guard
def test_infra_guard_stops_past_its_rates():
    counts = dict.fromkeys(COUNTED_STATUSES, 0)
    guard = InfraErrorGuard(max_rate=0.02, allowance=2, max_step_rate=0.25)
    assert guard.update({**counts, "ok": 15, "infra_error": 1})["infra_error"] == 1   # 1/16, within the allowance
    assert guard.update({**counts, "mismatch": 16}) and guard.state_dict() == {"seen": 32, "infra": 1}
    with pytest.raises(InfrastructureError, match="9 of 16"):                   # a dead verifier: a whole step
        guard.update({**counts, "ok": 7, "infra_error": 9})
    slow = InfraErrorGuard(max_rate=0.02, allowance=2, max_step_rate=0.5)
    for _ in range(2):
        slow.update({"ok": 15, "infra_error": 1})
    with pytest.raises(InfrastructureError, match="3 infra errors in 48"):       # over max(2 %, 2) in total
        slow.update({"ok": 15, "infra_error": 1})
    again = InfraErrorGuard()
    again.load_state_dict(guard.state_dict())
    assert again.state_dict() == {"seen": 48, "infra": 10}


def test_shuffle_within_groups_keeps_each_groups_rewards():
    rewards = [1.5, 0.5, 0.0, None, 1.5, 0.1, 0.5, 0.0]
    keys = ["a"] * 4 + ["b"] * 4
    out = shuffle_within_groups(rewards, keys, random.Random(0))
    assert out != rewards
    for g in (slice(0, 4), slice(4, 8)):
        assert sorted(out[g], key=str) == sorted(rewards[g], key=str)


# ------------------------------------------------------------------------------ on the real verifier
def test_reward_function_on_the_interpreter(relu, verifier):
    """A correct program scores 1.5, a wrong one 0.5, a reply without a program 0, one the
    interpreter cannot judge None; the parts and global status counts are logged."""
    logged: dict[str, list[float]] = {}
    extra: dict[str, list] = {}
    reward = VerdictReward(verifier, {relu.id: relu}, target_platform="rocm", record=True)
    texts = [reply(GOOD), reply(WRONG), "I cannot do that.", reply(UNJUDGEABLE)]
    completions = [[{"role": "assistant", "content": t}] for t in texts]
    out = reward(prompts=[[]] * 4, completions=completions, task_id=[relu.id] * 4,
                 log_metric=lambda k, v: logged.setdefault(k, []).append(v),
                 log_extra=lambda k, v: extra.setdefault(k, []).extend(v))
    assert out == [pytest.approx(1.5), pytest.approx(0.5), 0.0, None]
    assert extra["status"] == ["ok", "mismatch", "no_program", "unverifiable"]
    assert logged["amdkv/status/ok"] == [1.0] and logged["amdkv/status/unverifiable"] == [1.0]
    assert logged["amdkv/reward/correct"] == [pytest.approx(1.0 / 3)]
    assert logged["amdkv/unscorable_frac"] == [0.25]
    assert reward.history[0]["statuses"] == extra["status"]


def test_closed_verifier_is_an_infra_error_never_a_reward(relu):
    """A verifier that can no longer run anything (closed, as after its service died) gives infra
    errors, retried once, and the guard stops the run instead of returning rewards."""
    from amdkv.verify.verifier import Verifier

    dead = Verifier("cpu", trials=1, jobs=1)
    dead.close()
    reward = VerdictReward(dead, {relu.id: relu}, guard=InfraErrorGuard(max_step_rate=0.25))
    scores, _, verdicts = reward.score_texts([reply(GOOD), "no code"], [relu.id] * 2)
    assert [s.status for s in scores] == ["infra_error", "no_program"] and scores[0].reward is None
    assert verdicts[0].reason == "verifier_failed" and "closed" in verdicts[0].diagnostics
    with pytest.raises(InfrastructureError, match="1 of 2"):
        reward(prompts=[[]] * 2, completions=[reply(GOOD), "no code"], task_id=[relu.id] * 2)


def test_audit_catches_a_program_that_passes_one_trial(relu, verifier, tmp_path):
    """The reward verifier (1 trial) passes a program that breaks after two calls; the audit's
    verifier (3 seeded trials) fails it: fail rate 1/2 with the correct program beside it, and both
    samples are kept."""
    from amdkv.verify.verifier import Verifier

    with Verifier("cpu", trials=3, jobs=2) as strict:
        audit = RewardAudit(strict, every_steps=5, top_k=4, out_dir=tmp_path)
        logged: dict[str, float] = {}
        reward = VerdictReward(verifier, {relu.id: relu}, audit=audit)
        texts = [reply(FLAKY), reply(GOOD), reply(FLAKY), reply(WRONG)]
        out = reward(prompts=[[]] * 4, completions=texts, task_id=[relu.id] * 4,
                     trainer_state=type("S", (), {"global_step": 0})(),
                     log_metric=lambda k, v: logged.__setitem__(k, v))
        assert out[:3] == [pytest.approx(1.5)] * 3  # the reward itself was fooled
        assert logged["amdkv/audit/audited"] == 2 and logged["amdkv/audit/failed"] == 1  # duplicates once
        assert logged["amdkv/audit/fail_rate"] == pytest.approx(0.5)
        samples = [json.loads(line) for line in (tmp_path / "step0000000.rank0.jsonl").read_text().splitlines()]
        assert sorted(s["failed"] for s in samples) == [False, True]
        flaky = next(s for s in samples if s["failed"])
        assert flaky["verdict"]["status"] == "ok" and flaky["audit_verdict"]["status"] == "mismatch"
        assert flaky["audit_verdict"]["trials"] == 3 and "self.calls" in flaky["program"]
        assert not audit.due(4) and audit.due(5)


def test_reward_extracts_kernel_file_replies_as_the_agents_do(verifier):
    """An RL run on a TritonBench-G task: the reply is the benchmark's kernel code (no ModelNew), as the
    benchmark's prompt asks; the reward extracts it as the agents do and the real verifier judges it
    with the benchmark's own tests (our fixture in TritonBench-G's layout)."""
    from pathlib import Path

    tbg = Path(__file__).parent / "data" / "external" / "tritonbench"
    task = next(t for t in load_suite(f"tritonbench-g:{tbg}") if t.id == "tiny_scale")
    kernel = task.metadata["reference_candidate"]
    zeros = kernel.replace("x * factor", "x * 0.0")
    reward = VerdictReward(verifier, {task.id: task}, record=True)
    extra: dict[str, list] = {}
    texts = [f"```python\n{kernel}\n```", f"```python\n{zeros}\n```"]
    out = reward(prompts=[[]] * 2, completions=[[{"role": "assistant", "content": t}] for t in texts],
                 task_id=[task.id] * 2, log_metric=lambda k, v: None,
                 log_extra=lambda k, v: extra.setdefault(k, []).extend(v))
    assert extra["status"] == ["ok", "mismatch"] and out[0] > out[1] > 0
