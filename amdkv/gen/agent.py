"""The kernel-generation agents: what to do after each reply and each verdict (no I/O here).

TritonKernelGen and HIPKernelGen follow the paper's pipelines (DESIGN.md section 3): optionally
a functional PyTorch reference checked against the module (amdkv/gen/functional.py), then write a
kernel for the task's `Model` -> verify -> fix from the verdict (compile log, runtime error,
mismatch summary, anti-hack findings) -> once correct, optimise from the timings, the roofline
fraction and the AMD resource usage -> keep the best correct kernel. HIPKernelGen can also start
from an existing HIP kernel (HIP -> HIP optimisation: `AgentConfig.optimise_from`), whose verdict
becomes the first request's feedback.

An `Attempt` is one trajectory in progress (one sample of one task). The agent turns each outcome
into the next `Step` (`Ask` the model, `Verify` a program, `Finish` and record, or `Abandon`
without recording); the pipeline (amdkv/gen/pipeline.py) carries the steps out concurrently.

Stop rules, in order (recorded as `metadata["stop_reason"]`): `unverifiable` (the platform cannot
judge the program: nothing useful to tell the model), `ok` (with `stop_on_ok`), `ok_untimed` (a
correct program for a task with no performance case, such as a TritonBench-G or ROCmBench test file:
an optimise turn would have no timings to work from), `unchanged` (an
optimise turn returned the program it was asked to improve: its verdict is reused, nothing new
would follow), `turns` (the turn budget), `token_budget` (the trajectory's completion-token
budget), `context_length` (the conversation outgrew the model's context), `replay_exhausted`.
A program identical to one verified earlier in the same trajectory is not verified again: its
earlier verdict is copied (marked `cache_hit`).
Never recorded (`Abandon`, the run's summary counts them and a re-run redoes them): verification
that kept failing as `infra_error` (the harness's fault, never the program's), a model server
that stayed unreachable, the run's own wall-time or token budget.
"""

from __future__ import annotations

import dataclasses
import hashlib
from typing import Any, Mapping, Union

from amdkv.errors import BadInputError
from amdkv.gen.llm import Reply, SamplingParams
from amdkv.prompts import PromptConfig, Trajectory, Turn, build_messages, extract_code, feedback_for
from amdkv.prompts.benchmark import kernel_api_names
from amdkv.prompts.stages import OPTIMISE, WRITE
from amdkv.verify.verdict import INFRA_ERROR, OK

AGENT_NAMES = {"triton": "TritonKernelGen", "hip": "HIPKernelGen"}


@dataclasses.dataclass(frozen=True)
class AgentConfig:
    """Budgets and options of one agent run (recorded in the run's manifest).

    `turns`: requests per trajectory at most. `samples`: independent trajectories per task (their
    first requests are one request with n = samples). `max_trajectory_tokens`: completion tokens
    one trajectory may use (None: no limit). `stop_on_ok`: end a trajectory at its first correct
    program instead of optimising it. `optimise_from`: start each trajectory from an existing
    program of the task (`reference`: its reference solution in the language; or a samples file
    / records folder: its first program there) instead of writing one. `functional_reference`:
    first ask for a functional PyTorch version of `Model.forward`, check it against the module and
    show it in the `write` request (amdkv/gen/functional.py; off by default). `verify_attempts`:
    tries per program when verification fails as `infra_error`."""

    language: str = "triton"
    prompt: PromptConfig = dataclasses.field(default_factory=PromptConfig)
    params: SamplingParams = dataclasses.field(default_factory=SamplingParams)
    turns: int = 3
    samples: int = 1
    max_trajectory_tokens: int | None = None
    stop_on_ok: bool = False
    optimise_from: str | None = None
    functional_reference: bool = False
    verify_attempts: int = 2

    def __post_init__(self) -> None:
        if self.language not in AGENT_NAMES:
            raise BadInputError(f"no agent for language {self.language!r}", hint="use triton or hip")
        if self.prompt.language != self.language:
            raise BadInputError(f"prompt language {self.prompt.language!r} differs from the agent's {self.language!r}",
                                hint="build PromptConfig(language=...) with the same language")
        if self.turns < 1 or self.samples < 1 or self.verify_attempts < 1:
            raise BadInputError(f"turns={self.turns}, samples={self.samples}, verify_attempts={self.verify_attempts}",
                                hint="each must be >= 1")

    @property
    def agent_name(self) -> str:
        return AGENT_NAMES[self.language]

    def identity(self) -> dict[str, Any]:
        """What decides the trajectories (the run's resume identity). `samples` is left out on
        purpose: a re-run with more samples keeps the first ones and adds the rest."""
        return {"agent": self.agent_name, "language": self.language, "prompt": self.prompt.to_dict(),
                "params": self.params.to_dict(), "turns": self.turns,
                "max_trajectory_tokens": self.max_trajectory_tokens, "stop_on_ok": self.stop_on_ok,
                "optimise_from": self.optimise_from, "functional_reference": self.functional_reference}


@dataclasses.dataclass
class Attempt:
    """One trajectory in progress."""

    task: Any                      # amdkv.tasks.types.Task
    sample: int
    trajectory: Trajectory | None = None
    stage: str = WRITE             # the stage of the next (or pending) request
    tokens: int = 0                # completion tokens used so far
    verify_tries: int = 0
    stop_reason: str | None = None
    seed_code: str | None = None   # optimise_from: the program to start from ...
    seed_verdict: dict[str, Any] | None = None  # ... and its verdict
    functional: dict[str, Any] | None = None    # the functional-reference stage's outcome, if it ran

    @property
    def turn(self) -> int:
        return len(self.trajectory.turns) if self.trajectory is not None else 0

    @property
    def last(self) -> Turn:
        return self.trajectory.turns[-1]


@dataclasses.dataclass(frozen=True)
class Ask:
    attempt: Attempt


@dataclasses.dataclass(frozen=True)
class Verify:
    attempt: Attempt
    code: str


@dataclasses.dataclass(frozen=True)
class Finish:
    attempt: Attempt
    reason: str


@dataclasses.dataclass(frozen=True)
class Abandon:
    attempt: Attempt
    reason: str
    detail: str = ""


Step = Union[Ask, Verify, Finish, Abandon]


def code_hash(code: str) -> str:
    return hashlib.sha256(code.encode("utf-8", "surrogatepass")).hexdigest()


class KernelGenAgent:
    """The decisions of one agent (see the module docstring); subclasses fix the language."""

    language = "triton"

    def __init__(self, config: AgentConfig, *, model: str, run_key: str) -> None:
        if config.language != self.language:
            raise BadInputError(f"{type(self).__name__} writes {self.language}, not {config.language}",
                                hint=f"use AgentConfig(language={self.language!r})")
        self.config = config
        self.model = model
        self.run_key = run_key

    @property
    def name(self) -> str:
        return self.config.agent_name

    # ------------------------------------------------------------------ starting
    def origin(self, attempt: Attempt) -> dict[str, Any]:
        """What identifies this unit of work in the records (its resume key is derived from it)."""
        return {"run": self.run_key, "agent": self.name, "model": self.model, "sample": attempt.sample}

    def trajectory_id(self, task: Any, sample: int) -> str:
        """Deterministic, so an interrupted run and its re-run write the same ids."""
        text = f"{self.run_key}\0{task.id}\0{task.source_hash}\0{sample}"
        return hashlib.sha256(text.encode()).hexdigest()[:32]

    def start(self, attempt: Attempt, seed_verdict: Mapping[str, Any] | None = None) -> Step:
        """Open the trajectory: the `write` request, or (optimise_from) the request built from the
        seed program's verdict."""
        cfg = self.config
        meta = {"agent": self.name, "sample": attempt.sample, "run": self.run_key, "sampling": cfg.params.to_dict(),
                "turn_budget": cfg.turns}
        traj = Trajectory.start(attempt.task, cfg.prompt, model=self.model, **meta)
        traj.trajectory_id = self.trajectory_id(attempt.task, attempt.sample)
        attempt.trajectory = traj
        if attempt.functional is not None:
            traj.metadata["functional_reference"] = {k: v for k, v in attempt.functional.items() if k != "addendum"}
            if attempt.functional.get("addendum"):
                traj.prompt[-1] = {**traj.prompt[-1], "content": traj.prompt[-1]["content"] + attempt.functional["addendum"]}
        if attempt.seed_code is None:
            return Ask(attempt)
        if seed_verdict is None:
            return Verify(attempt, attempt.seed_code)
        fb = feedback_for(cfg.prompt, verdict=seed_verdict)
        if fb.stage is None:
            attempt.stop_reason = "unverifiable"
            return Abandon(attempt, "seed_unverifiable", fb.content[:300])
        traj.prompt = build_messages(attempt.task, cfg.prompt, fb.stage, previous_code=attempt.seed_code, feedback=fb)
        traj.metadata.update(seed_sha256=code_hash(attempt.seed_code), seed_status=seed_verdict.get("status"),
                             seed_speedup=seed_verdict.get("speedup"), optimise_from=cfg.optimise_from)
        attempt.stage = fb.stage
        return Ask(attempt)

    # ------------------------------------------------------------------ outcomes
    def on_reply(self, attempt: Attempt, reply: Reply) -> Step:
        """A reply arrived: record the turn, then verify its program or ask again."""
        ex = extract_code(reply.content, self.language, api_names=kernel_api_names(attempt.task))
        turn = Turn.from_extraction(attempt.stage, ex, reasoning=reply.reasoning_content,
                                    finish_reason=reply.finish_reason, prompt_tokens=reply.prompt_tokens,
                                    completion_tokens=reply.completion_tokens)
        attempt.trajectory.turns.append(turn)
        attempt.tokens += reply.completion_tokens or 0
        attempt.verify_tries = 0
        if not ex.ok:
            turn.feedback = feedback_for(self.config.prompt, extraction=ex).content
            return self._continue(attempt, next_stage="fix_format")
        earlier = self._earlier_verdict(attempt, turn.code)
        if earlier is not None:
            return self.on_verdict(attempt, {**earlier, "cache_hit": True}, reused=True)
        return Verify(attempt, turn.code)

    def on_verdict(self, attempt: Attempt, verdict: Mapping[str, Any], *, reused: bool = False) -> Step:
        """The last turn's program was judged (or, before the first turn, the seed program)."""
        seeding = attempt.turn == 0  # the verdict of optimise_from's starting program
        if verdict.get("status") == INFRA_ERROR:
            attempt.verify_tries += 1
            if attempt.verify_tries < self.config.verify_attempts:
                return Verify(attempt, attempt.seed_code if seeding else attempt.last.code)
            return Abandon(attempt, "infra_error", str(verdict.get("diagnostics") or "")[:300])
        if seeding:
            attempt.seed_verdict = dict(verdict)
            attempt.verify_tries = 0
            return self.start(attempt, seed_verdict=verdict)
        turn = attempt.last
        turn.verdict = dict(verdict)
        fb = feedback_for(self.config.prompt, verdict=verdict)
        turn.feedback = fb.content
        if fb.stage is None:
            return Finish(attempt, "unverifiable")
        if reused and attempt.stage == OPTIMISE:
            return Finish(attempt, "unchanged")
        if self.config.stop_on_ok and verdict.get("status") == OK:
            return Finish(attempt, "ok")
        if verdict.get("status") == OK and not any(c.is_performance for c in attempt.task.cases):
            return Finish(attempt, "ok_untimed")  # nothing is ever timed: an optimise turn would have no numbers
        return self._continue(attempt, next_stage=fb.stage)

    def _continue(self, attempt: Attempt, next_stage: str) -> Step:
        if attempt.turn >= self.config.turns:
            return Finish(attempt, "turns")
        limit = self.config.max_trajectory_tokens
        if limit is not None and attempt.tokens >= limit:
            return Finish(attempt, "token_budget")
        attempt.stage = next_stage
        return Ask(attempt)

    def _earlier_verdict(self, attempt: Attempt, code: str) -> dict[str, Any] | None:
        """The verdict of the same program earlier in this trajectory (or the seed's), if any."""
        digest = code_hash(code)
        for t in attempt.trajectory.turns[:-1]:
            if t.code is not None and t.verdict is not None and code_hash(t.code) == digest:
                return t.verdict
        if attempt.seed_code is not None and code_hash(attempt.seed_code) == digest:
            return attempt.seed_verdict
        return None

    def finish(self, attempt: Attempt, reason: str) -> Trajectory:
        """The trajectory as recorded: stop reason and the best turn in its metadata."""
        traj = attempt.trajectory
        traj.metadata["stop_reason"] = reason
        traj.metadata["best_turn"] = traj.best_turn()
        return traj


class TritonKernelGen(KernelGenAgent):
    """PyTorch module -> Triton kernel, fixed from verdicts, then optimised (DESIGN.md section 3)."""

    language = "triton"


class HIPKernelGen(KernelGenAgent):
    """PyTorch module -> HIP kernel (torch `load_inline`), fixed and optimised; with
    `optimise_from`, HIP -> HIP optimisation of an existing kernel."""

    language = "hip"


def agent_for(config: AgentConfig, *, model: str, run_key: str) -> KernelGenAgent:
    cls = {"triton": TritonKernelGen, "hip": HIPKernelGen}[config.language]
    return cls(config, model=model, run_key=run_key)
