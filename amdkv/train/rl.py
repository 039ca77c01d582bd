"""RL with TRL's `GRPOTrainer` and a reward from verdicts (DESIGN.md section 6; docs/training.md "RL").

    accelerate launch --config_file training_configs/accelerate/zero3.yaml train_rl.py \
        --config training_configs/rl_qwen3_8b.yaml

- Prompts: the tasks of `amdkv.suite` (a config value: `builtin:train`, `procedural:train`, a
  folder), one GRPO row each (`data.rl_prompt_dataset`), in the order of `amdkv.curriculum`
  when given (then TRL's sampler must not reshuffle it: shuffle_dataset is set to False).
- Reward: `reward.VerdictReward` (single-turn, `max_turns: 1`) or the multi-turn rollout
  (`rollout.MultiTurnRollout` + `rollout.ReturnReward`, `max_turns > 1`), both on one verifier:
  `amdkv serve` through RemoteVerifier when `amdkv.verifier.url` is set (one service per node,
  shared by every rank, on GPUs the trainer does not use), else a local verifier (single
  process, CPU, or a correctness-only reward sharing the one GPU). A local verifier with several
  GPU ranks is refused: verification gets its own GPUs.
- Logged per step, besides TRL's own: the reward's parts and status counts (`amdkv/...`), the
  audit's failure rate, and where the step's time went: `timing/generation_s`,
  `timing/reward_s`, `timing/update_s`, `timing/reward_frac` (`AmdkvGRPOTrainer`, `StepTimer`).
- Resume: TRL/transformers restore the step, optimizer, RNG and the sampler's position; the
  infra guard's counts, the audit's schedule and the control's RNG are saved beside each
  checkpoint (`amdkv_state.rank<N>.json`) and restored.
"""

from __future__ import annotations

import json
import logging
import os
import random
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from transformers import TrainerCallback
from trl import GRPOTrainer

from amdkv.errors import AmdkvError, BadInputError
from amdkv.train.args import AmdkvRLArguments, AuditArguments, VerifierArguments, parse_config
from amdkv.train.data import rl_prompt_dataset
from amdkv.train.models import plain_forward
from amdkv.train.distributed import leave_process_group, process_index
from amdkv.train.models import check_precision, load_model, peft_config
from amdkv.train.reward import InfraErrorGuard, RewardAudit, VerdictReward
from amdkv.train.rollout import MultiTurnRollout, ReturnReward
from amdkv.train.sft import resume_arg

logger = logging.getLogger(__name__)
STATE_FILE = "amdkv_state.rank{rank}.json"


class StepTimes:
    """Seconds spent generating and computing rewards since the last optimizer step (the
    multi-turn rollout moves its verification time from generation to reward)."""

    def __init__(self) -> None:
        self.seconds = {"generation": 0.0, "reward": 0.0}

    def add(self, what: str, seconds: float) -> None:
        self.seconds[what] += seconds

    def move(self, source: str, dest: str, seconds: float) -> None:
        self.seconds[source] -= seconds
        self.seconds[dest] += seconds

    def take(self) -> dict[str, float]:
        out, self.seconds = self.seconds, {"generation": 0.0, "reward": 0.0}
        return out


class AmdkvGRPOTrainer(GRPOTrainer):
    """`GRPOTrainer` that times its generation and reward phases (into `amdkv_times`) and, with a
    static KV cache (`cache_implementation`), generates without the autocast wrapper."""

    amdkv_times: StepTimes

    def _generate(self, prompts: list) -> Any:
        t0 = time.perf_counter()
        try:
            if self.args.cache_implementation is None:
                return super()._generate(prompts)
            # a static KV cache under accelerate's autocast wrapper mixes dtypes (models.plain_forward)
            with plain_forward(self.accelerator.unwrap_model(self.model_wrapped)):
                return super()._generate(prompts)
        finally:
            self.amdkv_times.add("generation", time.perf_counter() - t0)

    def _calculate_rewards(self, inputs: Any, prompts: Any, completions: Any, completion_ids_list: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return super()._calculate_rewards(inputs, prompts, completions, completion_ids_list)
        finally:
            self.amdkv_times.add("reward", time.perf_counter() - t0)


class StepTimer(TrainerCallback):
    """Per optimizer step: wall time split into generation, reward and the rest (forward, backward,
    optimizer: `update`), appended to the trainer's metrics so TRL logs them with its own."""

    def __init__(self, times: StepTimes) -> None:
        self.times = times
        self.trainer: Any = None
        self._t0 = None

    def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        self._t0 = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        if self._t0 is None or self.trainer is None:
            return
        wall = time.perf_counter() - self._t0
        spent = self.times.take()
        metrics = self.trainer._metrics["train"]
        metrics["timing/step_s"].append(wall)
        metrics["timing/generation_s"].append(spent["generation"])
        metrics["timing/reward_s"].append(spent["reward"])
        metrics["timing/update_s"].append(max(wall - spent["generation"] - spent["reward"], 0.0))
        metrics["timing/reward_frac"].append(spent["reward"] / wall if wall > 0 else 0.0)


class StateKeeper(TrainerCallback):
    """Saves the reward's own state beside every checkpoint (see the module docstring)."""

    def __init__(self, reward: VerdictReward, extra_rngs: Sequence[random.Random] = ()) -> None:
        self.reward = reward
        self.rngs = [reward._rng, *extra_rngs]

    def state(self) -> dict[str, Any]:
        audit = self.reward.audit
        return {"guard": self.reward.guard.state_dict(), "audit_last_step": audit.last_step if audit else None,
                "rngs": [_rng_state(r) for r in self.rngs]}

    def load(self, checkpoint: str | Path) -> bool:
        path = Path(checkpoint) / STATE_FILE.format(rank=process_index())
        if not path.is_file():
            return False
        data = json.loads(path.read_text())
        self.reward.guard.load_state_dict(data["guard"])
        if self.reward.audit is not None:
            self.reward.audit.last_step = data.get("audit_last_step")
        for rng, state in zip(self.rngs, data.get("rngs", [])):
            rng.setstate((state[0], tuple(state[1]), state[2]))
        return True

    def on_save(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if folder.is_dir():
            (folder / STATE_FILE.format(rank=process_index())).write_text(json.dumps(self.state()))


def _rng_state(rng: random.Random) -> list[Any]:
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]


# ------------------------------------------------------------------------------------------ verifiers
def open_reward_verifier(args: VerifierArguments, *, url: str | None = None, trials: int | None = None,
                         time_performance: bool | None = None) -> Any:
    """The verifier a config names (see VerifierArguments): RemoteVerifier for a URL, else a local one
    on this rank's device (`gpus` = this process's local GPU)."""
    url = url or args.url
    if url:
        try:
            from amdkv.serve.client import RemoteVerifier
        except ImportError:
            raise BadInputError("this amdkv has no verification service client (amdkv.serve)",
                                hint="update amdkv, or leave amdkv.verifier.url unset for a local verifier") from None
        return RemoteVerifier(url, token=os.environ.get(args.token_env) or None, timeout=args.timeout_s,
                              retries=args.retries)
    from amdkv.verify.platform import detect_platform
    from amdkv.verify.scheduler import open_verifier

    platform = detect_platform(args.device)
    timed = args.time_performance if time_performance is None else time_performance
    settings: dict[str, Any] = {"device": platform.name if args.device == "auto" else args.device, "jobs": args.jobs,
                                "time_performance": timed, "archs": tuple(args.archs)}
    if trials or args.trials:
        settings["trials"] = trials or args.trials
    if platform.name != "cpu":
        from accelerate import PartialState

        state = PartialState()
        if state.num_processes > 1:
            raise BadInputError(f"a local verifier in each of {state.num_processes} GPU training processes would "
                                "verify on the GPUs training uses",
                                hint="start `amdkv serve` on GPUs training does not use and set amdkv.verifier.url")
        settings["gpus"] = (state.local_process_index,)
    return open_verifier(platform=platform, **settings)


def open_audit_verifier(args: AmdkvRLArguments) -> Any:
    """The audit's stricter verifier, or None when the audit is off (or has no verifier: a remote
    reward verifier and no `audit.url`, which is logged)."""
    audit: AuditArguments = args.audit
    if audit.every_steps <= 0:
        return None
    if args.verifier.url and not audit.url:
        logger.warning("reward-hacking audit off: the reward uses a remote verifier and amdkv.audit.url names no "
                       "service with the audit's settings")
        return None
    return open_reward_verifier(args.verifier, url=audit.url, trials=audit.trials,
                                time_performance=audit.time_performance)


def load_rl_tasks(args: AmdkvRLArguments) -> list[Any]:
    from amdkv.tasks.suites import load_suite

    tasks = load_suite(args.suite)
    if args.max_tasks:
        tasks = tasks[:args.max_tasks]
    if not tasks:
        raise BadInputError(f"the suite {args.suite!r} has no tasks", hint="check amdkv.suite")
    return tasks


# ------------------------------------------------------------------------------------------ trainer
def build_grpo_trainer(grpo_args: Any, model_args: Any, amdkv_args: AmdkvRLArguments, *, model: Any = None,
                       tokenizer: Any = None, tasks: Sequence[Any] | None = None, verifier: Any = None,
                       audit_verifier: Any = None, callbacks: Sequence[Any] = (), record: bool = False,
                       rollout_func: Any = None) -> AmdkvGRPOTrainer:
    """A GRPO trainer for a parsed config. `model`/`tokenizer`, `tasks` and the verifiers override
    the config's (tests and benchmarks pass their own; `audit_verifier=False`: no audit). `trainer.amdkv_reward` is the
    VerdictReward (its `history` is kept when `record`). `rollout_func`: a single-turn generation
    of one's own (another backend, planted completions in tests), scored by the VerdictReward."""
    check_precision(grpo_args)
    if model is None:
        model, tokenizer = load_model(model_args, grpo_args, amdkv_args.tiny_model)
    if tokenizer is None:
        raise BadInputError("a model object needs its tokenizer", hint="pass tokenizer= with model=")
    tasks = list(tasks) if tasks is not None else load_rl_tasks(amdkv_args)
    prompt_config = amdkv_args.prompt_config()
    dataset = rl_prompt_dataset(tasks, prompt_config, amdkv_args.curriculum, seed=grpo_args.seed,
                                system_prompt=amdkv_args.system_prompt)
    if amdkv_args.curriculum and grpo_args.shuffle_dataset:
        logger.info("amdkv.curriculum orders the prompts: shuffle_dataset set to False")
        grpo_args.shuffle_dataset = False
    verifier = verifier if verifier is not None else open_reward_verifier(amdkv_args.verifier)
    if audit_verifier is None:
        audit_verifier = open_audit_verifier(amdkv_args)
    audit = RewardAudit(audit_verifier, every_steps=amdkv_args.audit.every_steps, top_k=amdkv_args.audit.top_k,
                        out_dir=Path(grpo_args.output_dir) / "amdkv_audit", language=amdkv_args.language,
                        timeout_s=amdkv_args.verifier.timeout_s) if audit_verifier else None
    infra = amdkv_args.infra
    reward = VerdictReward(
        verifier, {t.id: t for t in tasks}, language=amdkv_args.language, weights=amdkv_args.reward,
        target_platform=None if amdkv_args.target_platform == "none" else amdkv_args.target_platform,
        guard=InfraErrorGuard(max_rate=infra.max_rate, allowance=infra.allowance, max_step_rate=infra.max_step_rate),
        infra_retries=infra.retries, verify_timeout_s=amdkv_args.verifier.timeout_s, audit=audit,
        shuffle_within_groups=amdkv_args.shuffle_rewards and amdkv_args.max_turns == 1, seed=grpo_args.seed,
        record=record, log_path=Path(grpo_args.output_dir) / f"amdkv_rewards.rank{process_index()}.jsonl"
        if amdkv_args.reward_log else None)
    times = StepTimes()
    rollout = rollout_func
    reward_funcs: list[Any] = [reward]
    extra_rngs: list[random.Random] = []
    if amdkv_args.max_turns > 1:
        if rollout_func is not None:
            raise BadInputError("a custom rollout_func and max_turns > 1 both generate",
                                hint="use max_turns: 1 with rollout_func")
        rollout = MultiTurnRollout(reward, dataset, prompt_config, max_turns=amdkv_args.max_turns,
                                   gamma=amdkv_args.gamma, continue_after_correct=amdkv_args.continue_after_correct,
                                   times=times)
        returns = ReturnReward(shuffle_within_groups=amdkv_args.shuffle_rewards, seed=grpo_args.seed)
        reward_funcs = [returns]
        extra_rngs.append(returns._rng)
    timer = StepTimer(times)
    keeper = StateKeeper(reward, extra_rngs)
    trainer = AmdkvGRPOTrainer(model=model, reward_funcs=reward_funcs, args=grpo_args, train_dataset=dataset,
                               processing_class=tokenizer, peft_config=peft_config(model_args),
                               rollout_func=rollout, callbacks=[timer, keeper, *callbacks])
    trainer.amdkv_times = times
    trainer.amdkv_reward = reward
    trainer.amdkv_state = keeper
    trainer.amdkv_verifiers = [v for v in (verifier, audit_verifier) if v]
    timer.trainer = trainer
    return trainer


def run(trainer: AmdkvGRPOTrainer, grpo_args: Any) -> None:
    """Train (resuming with the reward's state when asked), then save the model to output_dir."""
    resume = resume_arg(grpo_args.resume_from_checkpoint)
    if resume is True:
        from transformers.trainer_utils import get_last_checkpoint

        resume = get_last_checkpoint(grpo_args.output_dir)
        if resume is None:
            raise BadInputError(f"resume_from_checkpoint asks for the last checkpoint of {grpo_args.output_dir}, "
                                "which has none", hint="point it at a checkpoint-N folder or drop it")
    if resume:
        trainer.amdkv_state.load(resume)
    trainer.train(resume_from_checkpoint=resume)
    trainer.save_model(grpo_args.output_dir)


def close(trainer: AmdkvGRPOTrainer) -> None:
    for verifier in getattr(trainer, "amdkv_verifiers", []):
        verifier.close()


def main(argv: Sequence[str] | None = None, **build: Any) -> int:
    """`train_rl.py`: read the config, train, save; an AmdkvError (an infra stop included) is
    printed with its rank and becomes the exit code. `build`: extra build_grpo_trainer arguments."""
    from trl import GRPOConfig

    trainer = None
    try:
        grpo_args, model_args, amdkv_args = parse_config(GRPOConfig, AmdkvRLArguments, argv)
        trainer = build_grpo_trainer(grpo_args, model_args, amdkv_args, **build)
        run(trainer, grpo_args)
    except AmdkvError as exc:
        print(f"error (rank {process_index()}): {exc}", file=sys.stderr, flush=True)
        return exc.exit_code
    finally:
        if trainer is not None:
            close(trainer)
        leave_process_group()
    return 0
