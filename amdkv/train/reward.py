"""The RL reward: verdicts -> scalar rewards, with their parts, for TRL's `GRPOTrainer`.

Per completion (DESIGN.md section 6, docs/training.md "The reward"):

    r = w_format·format + w_compiled·compiled + w_correct·correct + min(w_speed·log2(speedup)², speed_cap)

- `format`: a program defining `ModelNew` was taken from the reply (`amdkv.prompts.extract_code`);
- `compiled`, `correct`: the verdict's fields (`correct` only for status `ok`);
- the speed term only for a correct program with speedup >= 1 whose verdict was measured on the
  run's target platform (`rocm` for MI300X: NVIDIA timings say nothing about an AMD GPU);
- `hack_detected` scores 0 whatever else it did (format included): cheating must never pay more
  than saying nothing;
- `unverifiable` -> None: TRL leaves a completion whose rewards are all None out of its group's
  mean and spread and gives it advantage 0 (measured, TRL 1.16), so the platform's blind spot
  neither rewards nor punishes the model;
- `infra_error` (or a verifier that raised) -> never a reward: retried, then None and counted by
  `InfraErrorGuard`, which stops the run on every rank past a small rate.

`VerdictReward` is the TRL reward function (a callable object, so it keeps its verifier, its task
table, its guard and its audit); `score` is the pure rule, shared with the multi-turn rollout.
Light import: standard library and amdkv's light modules; torch only inside the distributed helper.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import time
from collections import Counter
from concurrent.futures import Future
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from amdkv.errors import BadInputError, InfrastructureError
from amdkv.prompts.benchmark import kernel_api_names
from amdkv.prompts.extract import Extraction, extract_code
from amdkv.train.distributed import all_reduce_sum, process_index
from amdkv.verify.verdict import (HACK_DETECTED, INFRA_ERROR, OK, STATUSES, UNVERIFIABLE, Verdict,
                                  infra_error_verdict)

EXTRACTION_FAILED = "no_program"      # the status counted for a reply without a program
REWARD_PARTS = ("format", "compiled", "correct", "speed")
# What InfraErrorGuard and the logs count per completion: the verdict statuses, plus replies
# without a program. A fixed order, so every rank all-reduces the same vector.
COUNTED_STATUSES = (*STATUSES, EXTRACTION_FAILED)


@dataclasses.dataclass(frozen=True)
class RewardWeights:
    """Weights of the reward's parts (DESIGN.md section 6 defaults; `format` added, see module doc)."""

    format: float = 0.1
    compiled: float = 0.4
    correct: float = 1.0
    speed: float = 0.375
    speed_cap: float = 1.5

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise BadInputError(f"reward weight {f.name}={value!r} must be a finite number >= 0",
                                    hint="e.g. amdkv.reward: {format: 0.1, compiled: 0.4, correct: 1.0}")


@dataclasses.dataclass(frozen=True)
class Score:
    """One completion's outcome: `reward` (None: not scorable), its named `parts` (weighted, so
    they sum to the reward), the counted `status`, and whether the harness failed (`infra`)."""

    reward: float | None
    parts: dict[str, float]
    status: str
    infra: bool = False


def speed_term(speedup: float | None, weights: RewardWeights) -> float:
    """min(w_speed·log2(speedup)², cap) for speedup >= 1, else 0."""
    if speedup is None or not math.isfinite(speedup) or speedup < 1.0:
        return 0.0
    return min(weights.speed * math.log2(speedup) ** 2, weights.speed_cap)


def score(extraction: Extraction, verdict: Verdict | Mapping[str, Any] | None, weights: RewardWeights,
          target_platform: str | None) -> Score:
    """The reward of one reply (see the module docstring). `verdict` may be a Verdict or its dict
    (verdicts stored in trajectories); None when no program was extracted."""
    zero = dict.fromkeys(REWARD_PARTS, 0.0)
    if not extraction.ok:
        return Score(0.0, zero, EXTRACTION_FAILED)
    if verdict is None:
        raise BadInputError("an extracted program needs its verdict to be scored",
                            hint="verify the program before scoring it")
    v = verdict if isinstance(verdict, Mapping) else verdict.to_dict()
    status = v.get("status")
    if status == INFRA_ERROR:
        return Score(None, zero, INFRA_ERROR, infra=True)
    if status == UNVERIFIABLE:
        return Score(None, zero, UNVERIFIABLE)
    if status == HACK_DETECTED:
        return Score(0.0, zero, HACK_DETECTED)
    correct = status == OK
    parts = {
        "format": weights.format,
        "compiled": weights.compiled if v.get("compiled") else 0.0,
        "correct": weights.correct if correct else 0.0,
        "speed": speed_term(v.get("speedup"), weights)
        if correct and target_platform and v.get("platform") == target_platform else 0.0,
    }
    return Score(sum(parts.values()), parts, status)


# ------------------------------------------------------------------------------------------ infra
@dataclasses.dataclass
class InfraErrorGuard:
    """Stops a run whose verifier fails, on every rank at once.

    Every rank computes the rewards of its own completions, and TRL gathers them right after: a
    rank that raised alone would leave the others blocked in that gather. So each rank adds its
    counts to an all-reduce inside the reward call (`update`), every rank sees the same global
    counts, and all of them raise the same `InfrastructureError` together.

    Stops when, over this step's completions on all ranks, more than `max_step_rate` were
    infra errors (a dead verifier: the step is all infra errors), or when the run's total passes
    max(`max_rate` x completions so far, `allowance`) (a verifier failing now and then)."""

    max_rate: float = 0.02
    allowance: int = 2
    max_step_rate: float = 0.25
    reduce: Callable[[Sequence[float]], list[float]] = all_reduce_sum
    seen: int = 0
    infra: int = 0

    def __post_init__(self) -> None:
        if not (0 <= self.max_rate <= 1 and 0 <= self.max_step_rate <= 1 and self.allowance >= 0):
            raise BadInputError(f"infra guard: max_rate={self.max_rate}, max_step_rate={self.max_step_rate}, "
                                f"allowance={self.allowance}", hint="rates in [0, 1], allowance >= 0")

    def update(self, local: Mapping[str, int], *, where: str = "reward") -> dict[str, int]:
        """All-reduce this rank's status counts (COUNTED_STATUSES) and check the global infra rate;
        returns the global counts of this call. Raises InfrastructureError on every rank together."""
        unknown = set(local) - set(COUNTED_STATUSES)
        if unknown:
            raise BadInputError(f"unknown statuses {sorted(unknown)}", hint=f"count only {COUNTED_STATUSES}")
        totals = self.reduce([float(local.get(s, 0)) for s in COUNTED_STATUSES])
        counts = {s: int(round(n)) for s, n in zip(COUNTED_STATUSES, totals)}
        step_total, step_infra = sum(counts.values()), counts[INFRA_ERROR]
        self.seen += step_total
        self.infra += step_infra
        step_rate = step_infra / step_total if step_total else 0.0
        if step_total and step_rate > self.max_step_rate:
            raise InfrastructureError(
                f"the verifier failed on {step_infra} of {step_total} completions in this {where} call "
                f"(> {self.max_step_rate:.0%}); stopping the run on every rank rather than training on no rewards",
                hint="check the verification service (amdkv serve) or the local verifier's workers; resume from "
                     "the last checkpoint once it answers (amdkv.infra.max_step_rate sets this limit)")
        limit = max(self.max_rate * self.seen, self.allowance)
        if self.infra > limit:
            raise InfrastructureError(
                f"{self.infra} infra errors in {self.seen} completions so far (more than "
                f"max({self.max_rate:.1%} x {self.seen}, {self.allowance})); stopping the run on every rank",
                hint="the verifier fails too often: check its logs; amdkv.infra.max_rate and .allowance set this limit")
        return counts

    def state_dict(self) -> dict[str, int]:
        return {"seen": self.seen, "infra": self.infra}

    def load_state_dict(self, state: Mapping[str, int]) -> None:
        self.seen, self.infra = int(state.get("seen", 0)), int(state.get("infra", 0))


# ------------------------------------------------------------------------------------------ verifying
def completion_text(completion: Any) -> str:
    """The text of one TRL completion: a string (standard format) or a list of messages
    (conversational: the assistant message's content)."""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, list) and completion and isinstance(completion[-1], Mapping):
        return "".join(str(m.get("content") or "") for m in completion if m.get("role", "assistant") == "assistant")
    raise BadInputError(f"cannot read a completion of type {type(completion).__name__}",
                        hint="TRL passes strings or lists of {role, content} messages")


def verify_programs(verifier: Any, jobs: Sequence[tuple[Any, str]], language: str, *, retries: int = 1,
                    timeout_s: float | None = None) -> tuple[list[Verdict], float]:
    """Verdicts of (task, program) pairs, all submitted at once (the verifier's own concurrency and
    verdict cache do the rest). An infra_error, or a verifier that raised (RemoteVerifier after its
    transport retries), is tried again up to `retries` times, then stays an infra_error verdict:
    never a reward. `timeout_s` bounds each wait. Returns the verdicts and the seconds spent."""
    t0 = time.perf_counter()
    verdicts: list[Verdict | None] = [None] * len(jobs)
    pending = list(range(len(jobs)))
    for _attempt in range(retries + 1):
        futures: dict[int, Future | BaseException] = {}
        for i in pending:
            task, code = jobs[i]
            try:
                futures[i] = verifier.submit(task, source=code, language=language)
            except BadInputError:  # a task or program the verifier cannot take is a bug here, not a verdict
                raise
            except Exception as exc:  # noqa: BLE001 - closed, unreachable...: the harness's failure
                futures[i] = exc
        for i, fut in futures.items():
            verdicts[i] = _result(fut, jobs[i][0], timeout_s)
        pending = [i for i in pending if verdicts[i].status == INFRA_ERROR]
        if not pending:
            break
    return [v for v in verdicts if v is not None], time.perf_counter() - t0


def _result(fut: Future | BaseException, task: Any, timeout_s: float | None) -> Verdict:
    if isinstance(fut, BaseException):
        return _infra(task, fut)
    try:
        return fut.result(timeout=timeout_s)
    except Exception as exc:  # noqa: BLE001 - a verifier failure is the harness's, never the completion's
        return _infra(task, exc)


def _infra(task: Any, exc: BaseException) -> Verdict:
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return infra_error_verdict("verifier_failed", text, task_id=getattr(task, "id", None))


# ------------------------------------------------------------------------------------------ the reward
class VerdictReward:
    """A TRL reward function: extract, verify, score (see the module docstring).

    `tasks`: task id -> Task (the RL prompts' `task_id` column names them). `verifier`: any
    `BaseVerifier` (RemoteVerifier for `amdkv serve`, a local Verifier on one GPU or a CPU).
    `shuffle_within_groups`: the control run of the learning experiment, whose rewards are
    permuted among the completions of each prompt (same rewards, no relation to the completions).
    `audit`: a RewardAudit re-verifies the best completions every N steps. `record` keeps every
    call's task ids, statuses and rewards in `history`; `log_path` appends them as JSON lines.

    Logged through TRL's `log_metric` per call: `amdkv/reward/<part>` (means over scored
    completions), `amdkv/status/<status>` (global counts, all ranks), `amdkv/unscorable_frac`,
    `amdkv/verify_s`; through `log_extra`: each completion's `status` and `task_id`."""

    __name__ = "verdict_reward"  # TRL names reward columns and metrics by it

    def __init__(self, verifier: Any, tasks: Mapping[str, Any], *, language: str = "triton",
                 weights: RewardWeights | None = None, target_platform: str | None = "rocm",
                 guard: InfraErrorGuard | None = None, infra_retries: int = 1, verify_timeout_s: float | None = None,
                 audit: "Any | None" = None, shuffle_within_groups: bool = False, seed: int = 0,
                 record: bool = False, log_path: str | Path | None = None) -> None:
        self.verifier = verifier
        self.tasks = dict(tasks)
        self.language = language
        self.weights = weights or RewardWeights()
        self.target_platform = target_platform
        self.guard = guard or InfraErrorGuard()
        self.infra_retries = infra_retries
        self.verify_timeout_s = verify_timeout_s
        self.audit = audit
        self.shuffle_within_groups = shuffle_within_groups
        self._rng = random.Random(seed + 7919 * process_index())
        self.last_verify_s = 0.0
        self.history: list[dict[str, Any]] | None = [] if record else None
        self.log_path = Path(log_path) if log_path else None

    def task(self, task_id: str) -> Any:
        try:
            return self.tasks[task_id]
        except KeyError:
            raise BadInputError(f"the RL prompt names task {task_id!r}, which the reward's task table lacks",
                                hint="build the prompts and the reward from the same suite (amdkv.suite)") from None

    def score_texts(self, texts: Sequence[str], task_ids: Sequence[str]) -> tuple[list[Score], list[Extraction],
                                                                                   list[Verdict | None]]:
        """Extract, verify (retrying infra errors) and score replies: the shared core of the
        single-turn reward and the multi-turn rollout."""
        # a kernel-file task (TritonBench-G, ROCmBench) is answered with kernel code, as the agents extract it
        extractions = [extract_code(t, self.language, api_names=kernel_api_names(self.task(tid)))
                       for t, tid in zip(texts, task_ids)]
        todo = [i for i, ex in enumerate(extractions) if ex.ok]
        verdicts: list[Verdict | None] = [None] * len(texts)
        found, self.last_verify_s = verify_programs(
            self.verifier, [(self.task(task_ids[i]), extractions[i].code) for i in todo], self.language,
            retries=self.infra_retries, timeout_s=self.verify_timeout_s)
        for i, v in zip(todo, found):
            verdicts[i] = v
        scores = [score(ex, v, self.weights, self.target_platform) for ex, v in zip(extractions, verdicts)]
        return scores, extractions, verdicts

    def judge(self, texts: Sequence[str], task_ids: Sequence[str], *, step: int,
              log_metric: Callable[[str, float], None] | None = None) -> tuple[list[Score], list[Extraction],
                                                                                list[Verdict | None]]:
        """Score replies, then (on every rank, together) count them in the infra guard, run the
        audit when it is due and log the reward's metrics. Every rank must call it the same number
        of times (an empty list is fine): it all-reduces."""
        scores, extractions, verdicts = self.score_texts(texts, task_ids)
        counts = self.guard.update(Counter(s.status for s in scores))  # raises on every rank together
        if self.audit is not None:
            items = [(self.task(tid), ex.code, s.reward, v)
                     for tid, ex, s, v in zip(task_ids, extractions, scores, verdicts)]
            _log_all(log_metric, self.audit.maybe_run(step, items))
        _log_all(log_metric, reward_metrics(scores, counts, self.last_verify_s))
        return scores, extractions, verdicts

    def __call__(self, prompts: list[Any], completions: list[Any], task_id: list[str], *,
                 trainer_state: Any = None, log_metric: Callable[[str, float], None] | None = None,
                 log_extra: Callable[[str, list], None] | None = None, prompt_key: list[str] | None = None,
                 **_: Any) -> list[float | None]:
        step = int(getattr(trainer_state, "global_step", 0) or 0)
        scores, _, _ = self.judge([completion_text(c) for c in completions], task_id, step=step, log_metric=log_metric)
        rewards = [s.reward for s in scores]
        if self.shuffle_within_groups:
            rewards = shuffle_within_groups(rewards, prompt_key or task_id, self._rng)
        if log_extra is not None:
            log_extra("status", [s.status for s in scores])
        self._record({"step": step, "time": time.time(), "task_ids": list(task_id),
                      "statuses": [s.status for s in scores], "rewards": rewards})
        return rewards

    def _record(self, entry: dict[str, Any]) -> None:
        """Keep what was rewarded (`history` in memory, `log_path` as JSON lines): data order,
        statuses and rewards per call, and when its verdicts came back."""
        if self.history is not None:
            self.history.append(entry)
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            with self.log_path.open("a", encoding="utf-8") as f:
                f.write(json.dumps(entry) + "\n")


def reward_metrics(scores: Sequence[Score], global_counts: Mapping[str, int], verify_s: float) -> dict[str, float]:
    """What a reward call logs: mean weighted parts over scored completions, global status counts
    (every rank has the same numbers), the unscorable fraction and the verification seconds."""
    scored = [s for s in scores if s.reward is not None]
    out: dict[str, float] = {}
    if scored:
        for part in REWARD_PARTS:
            out[f"amdkv/reward/{part}"] = sum(s.parts[part] for s in scored) / len(scored)
    for status, n in global_counts.items():
        out[f"amdkv/status/{status}"] = float(n)
    out["amdkv/unscorable_frac"] = (len(scores) - len(scored)) / len(scores) if scores else 0.0
    out["amdkv/verify_s"] = verify_s
    return out


def _log_all(log_metric: Callable[[str, float], None] | None, metrics: Mapping[str, float] | None) -> None:
    if log_metric is None or not metrics:
        return
    for name, value in metrics.items():
        log_metric(name, float(value))


def shuffle_within_groups(rewards: Sequence[float | None], group_keys: Sequence[str],
                          rng: random.Random) -> list[float | None]:
    """The control: each reward moves to a random completion of the same prompt (group), so the
    rewards' values and spread stay and their link to the completions is gone."""
    out = list(rewards)
    groups: dict[str, list[int]] = {}
    for i, key in enumerate(group_keys):
        groups.setdefault(key, []).append(i)
    for idx in groups.values():
        values = [out[i] for i in idx]
        rng.shuffle(values)
        for i, v in zip(idx, values):
            out[i] = v
    return out


# ------------------------------------------------------------------------------------------ audit
class RewardAudit:
    """The reward-hacking audit: every `every_steps` steps, the `top_k` highest-reward correct
    completions of the call (per rank) are verified again by a stricter verifier (more seeded
    trials, so new seeds; and, on GPU platforms, the performance cases' shapes as well, when that
    verifier times performance), and the rate at which they now fail is logged
    (`amdkv/audit/fail_rate`, all ranks together). Every audited sample is kept as a JSON line
    under `out_dir` (task, program, reward, both verdicts)."""

    def __init__(self, verifier: Any, *, every_steps: int, top_k: int = 4, out_dir: str | Path | None = None,
                 language: str = "triton", timeout_s: float | None = None,
                 reduce: Callable[[Sequence[float]], list[float]] = all_reduce_sum) -> None:
        if every_steps < 1 or top_k < 1:
            raise BadInputError(f"audit every_steps={every_steps}, top_k={top_k}", hint="both must be >= 1")
        self.verifier = verifier
        self.every_steps = every_steps
        self.top_k = top_k
        self.out_dir = Path(out_dir) if out_dir else None
        self.language = language
        self.timeout_s = timeout_s
        self.reduce = reduce
        self.last_step: int | None = None

    def due(self, step: int) -> bool:
        return self.last_step is None or step - self.last_step >= self.every_steps

    def maybe_run(self, step: int, items: Sequence[tuple[Any, str | None, float | None, Verdict | None]]
                  ) -> dict[str, float] | None:
        """`items`: (task, program, reward, verdict) per completion. Every rank decides the same way
        (same step), so the all-reduce inside is reached by all of them."""
        if not self.due(step):
            return None
        self.last_step = step
        ok = [(t, code, r, v) for t, code, r, v in items if v is not None and v.status == OK and r is not None]
        seen: set[tuple[str, str]] = set()
        chosen = []
        for t, code, r, v in sorted(ok, key=lambda x: -x[2]):
            if (t.id, code) not in seen:  # a group often repeats a completion: audit it once
                seen.add((t.id, code))
                chosen.append((t, code, r, v))
            if len(chosen) == self.top_k:
                break
        t0 = time.perf_counter()
        strict, _ = verify_programs(self.verifier, [(t, code) for t, code, _, _ in chosen], self.language,
                                    retries=1, timeout_s=self.timeout_s)
        judged = [s for s in strict if s.status not in (UNVERIFIABLE, INFRA_ERROR)]
        failed = [s for s in judged if s.status != OK]
        audited, n_failed, n_chosen = self.reduce([float(len(judged)), float(len(failed)), float(len(chosen))])
        self._keep(step, chosen, strict)
        return {"amdkv/audit/audited": audited, "amdkv/audit/failed": n_failed,
                "amdkv/audit/fail_rate": n_failed / audited if audited else 0.0,
                "amdkv/audit/unjudged": n_chosen - audited, "amdkv/audit/seconds": time.perf_counter() - t0}

    def _keep(self, step: int, chosen: Sequence[tuple[Any, str, float, Verdict]], strict: Sequence[Verdict]) -> None:
        if self.out_dir is None or not chosen:
            return
        self.out_dir.mkdir(parents=True, exist_ok=True)
        path = self.out_dir / f"step{step:07d}.rank{process_index()}.jsonl"
        with path.open("a", encoding="utf-8") as f:
            for (task, code, reward, verdict), again in zip(chosen, strict):
                f.write(json.dumps({"step": step, "task_id": task.id, "reward": reward, "program": code,
                                    "verdict": _summary(verdict), "audit_verdict": _summary(again),
                                    "failed": again.status not in (OK, UNVERIFIABLE, INFRA_ERROR)}) + "\n")


def _summary(v: Verdict) -> dict[str, Any]:
    return {"status": v.status, "reason": v.reason, "platform": v.platform, "speedup": v.speedup,
            "trials": (v.env or {}).get("trials"), "cases": [c.name for c in v.cases],
            "diagnostics": (v.diagnostics or "")[:2000]}
