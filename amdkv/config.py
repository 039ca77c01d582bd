"""Every setting of the verifier (and of the AMD toolchain installer) in one place.

`VerifierConfig` holds what used to be ~10 keyword arguments and ~23 `AMDKV_*` environment
variables read in 11 files (one at import time). `VerifierConfig.from_env()` is the one place that
reads the user's environment; everything below it receives a config (or, inside worker processes,
the `WorkerSettings` message the parent wrote from one: amdkv/verify/worker_protocol.py), so a run's
settings can be printed, hashed into cache keys and passed to a service as one value.

The table in docs/verifier.md ("Settings") lists these fields; a test checks it names every one.
Standard library only: `import amdkv.config` must stay cheap (no torch, no triton).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any, Mapping

from amdkv.errors import BadInputError

DEVICES = ("auto", "cpu", "cuda", "rocm")
SPARE_STARTS = ("auto", "fork", "exec")
JUDGE_DEVICES = ("gpu", "cpu")
TIMING_METHODS = ("auto", "events", "graph", "profiler")
SMALL_KERNEL_METHODS = ("profiler", "graph")
# Which checks decide a verdict (docs/benchmarks.md): `strict` every check; `reference` the same minus
# the rules that refuse plain PyTorch (for a benchmark's PyTorch reference run as a candidate);
# `benchmark` the task's own benchmark rule (e.g. allclose at the benchmark's tolerance), no anti-hack.
POLICIES = ("strict", "reference", "benchmark")
# The OS sandbox of worker processes (docs/sandbox.md): `auto` applies every part this machine
# allows and says which are missing, `require` refuses to verify without all of them, `off` none.
SANDBOX_MODES = ("auto", "require", "off")


def default_cache_dir() -> str:
    return os.path.join(os.path.expanduser("~"), ".cache", "amdkv")


def _setting(env: str | None, doc: str, *, verdict: bool = False, worker: bool = False) -> dict[str, Any]:
    """Field metadata: its environment variable, its one-line doc, whether it can change a verdict
    (then it is part of the verdict-cache key) and whether worker processes need it."""
    return {"env": env, "doc": doc, "verdict": verdict, "worker": worker}


def _field(default: Any, env: str | None, doc: str, **kw: Any) -> Any:
    return dataclasses.field(default=default, metadata=_setting(env, doc, **kw))


def _factory_field(factory: Any, env: str | None, doc: str, **kw: Any) -> Any:
    return dataclasses.field(default_factory=factory, metadata=_setting(env, doc, **kw))


@dataclasses.dataclass(frozen=True)
class VerifierConfig:
    """All settings of one verification run. Frozen: change with `.replace(...)`.

    Fields marked `verdict` change what a verification can conclude (trials, timeout, timing
    method, ...): they are hashed into the verdict-cache key. The others change only speed or
    where files go."""

    device: str = _field("auto", "AMDKV_DEVICE", "auto | cpu | cuda | rocm (auto: an AMD GPU, else an NVIDIA GPU, else cpu)")
    gpus: int | tuple[int, ...] | None = _field(None, "AMDKV_GPUS", "GPUs to use: unset = every visible one, N = the first N, `0,2` = those indices")
    jobs: int = _field(1, "AMDKV_JOBS", "candidates verified at the same time (in total, split over the GPUs)")
    spares: int | None = _field(None, "AMDKV_SPARES", "warm worker processes kept per GPU (unset: one per concurrent candidate)")
    trials: int = _field(3, "AMDKV_TRIALS", "seeded trials per correctness case", verdict=True)
    timeout: float | None = _field(None, "AMDKV_TIMEOUT", "seconds a candidate's process may run (unset: 90 on cpu, 180 on GPUs)", verdict=True)
    reference_timeout: float | None = _field(None, "AMDKV_REFERENCE_TIMEOUT", "seconds a task's reference worker may run (all its cases and trials); past it the task is unverifiable (unset: the candidate timeout, at least 300)", verdict=True)
    archs: tuple[str, ...] = _field((), "AMDKV_ARCHS", "AMD targets to also compile for, e.g. `gfx942,gfx950`", verdict=True)
    time_performance: bool = _field(True, "AMDKV_TIME_PERFORMANCE", "time performance cases on GPUs (0: correctness only)", verdict=True)
    compile_baseline: bool = _field(True, "AMDKV_COMPILE_BASELINE", "also time torch.compile of the reference on GPUs", verdict=True)
    mem_cap_gib: float = _field(8.0, "AMDKV_MEM_CAP_GIB", "host memory (RLIMIT_DATA) of a candidate process on cpu (GiB); runtime_error/oom past it", verdict=True)
    gpu_mem_fraction: float | None = _field(None, "AMDKV_GPU_MEM_FRACTION", "a candidate's share of GPU memory (unset: 0.85 / concurrent candidates), raised to twice what its reference needed where that is more (verify/gpu_memory.py); runtime_error/oom past it", verdict=True)
    cache_dir: str = _factory_field(default_cache_dir, "AMDKV_CACHE_DIR", "reference cache (`refs/`), verdict cache (`verdicts/`), HIP builds (`hipbuild/`), compile caches")
    reference_cache_gib: float | None = _field(None, "AMDKV_REFERENCE_CACHE_GIB", "largest size of the reference cache (`refs/`, GiB): least recently used entries are removed before a new reference is computed, never one a verification in any process holds (unset: no limit; docs/verifier.md)")
    min_free_disk_gib: float = _field(2.0, "AMDKV_MIN_FREE_DISK_GIB", "a verification or reference run that starts with less free disk in the cache or the temp folder is infra_error, never a short write (0: no check; docs/verifier.md)")
    verdict_cache: bool = _field(True, "AMDKV_VERDICT_CACHE", "reuse the verdict of an identical (task, candidate, platform, config) verification (0: always verify)")
    spare_start: str = _field("auto", "AMDKV_SPARE_START", "fork: workers forked from the fork server; exec: `python -m` workers; auto: fork")
    judge_device: str = _field("gpu", "AMDKV_JUDGE_DEVICE", "gpu: compare outputs on the GPU being verified; cpu: on the host", verdict=True)
    judge_slots: int | None = _field(None, "AMDKV_JUDGE_SLOTS", "comparisons one process runs at once on the host (unset: cores / 8, 1-4)")
    timing_method: str = _field("auto", "AMDKV_TIMING_METHOD", "auto | events | graph | profiler (docs/gpu.md)", verdict=True, worker=True)
    small_kernel_ms: float = _field(0.1, "AMDKV_SMALL_KERNEL_MS", "below this event-timed median, re-time with the small-kernel method", verdict=True, worker=True)
    small_kernel_method: str = _field("profiler", "AMDKV_SMALL_KERNEL_METHOD", "profiler | graph", verdict=True, worker=True)
    prewarm_profiler: bool = _field(True, "AMDKV_PREWARM_PROFILER", "GPU spares start torch.profiler once before their job (0: skip)", worker=True)
    blocking_sync: bool = _field(True, "AMDKV_BLOCKING_SYNC", "NVIDIA workers wait for the GPU asleep, not spinning a core (0: CUDA's default spin/yield heuristic; docs/gpu.md, Speed)", worker=True)
    seed_triton_stubs: bool = _field(True, "AMDKV_SEED_TRITON_STUBS", "1: give every spare Triton's driver helper prebuilt by the parent instead of a gcc run of its own (saves ~0.4 CPU-s per spare; on by default again since 2026-12-05: with it on, the TritonBench-G reference probe that kept it off crashed 0 workers of 16 (8 of 17 before the session-13 fix) and 231 seeded candidate workers were all ok, docs/gpu.md; 0: every spare builds its own)")
    share_triton_launchers: bool = _field(True, "AMDKV_SHARE_TRITON_LAUNCHERS", "the parent builds Triton's kernel launcher once per argument signature candidates used (from their workers' reports, validated; Triton's own source) and copies the built ones into every later spare's cache, instead of a gcc run per candidate (verify/triton_launchers.py; on since session 22's H100 run: -0.25 to -0.34 host core-s per Triton candidate, same verdicts; 0: off)")
    resident_inputs: bool = _field(True, "AMDKV_RESIDENT_INPUTS", "a candidate worker moves each case's trial inputs to the device once and copies them there per checked call (0: a host-to-device copy per call, as before session 9; same values either way)", worker=True)
    hip_speculative_full: bool = _field(False, "AMDKV_HIP_SPECULATIVE_FULL", "platform cuda: start a HIP candidate's full build beside the split one and stop it when the split builds (same verdicts; a compile_error after the slower build instead of both, docs/hip.md, Compile errors; costs host cores on candidates that build)")
    hip_lean_build: bool = _field(True, "AMDKV_HIP_LEAN_BUILD", "platform cuda: build a HIP candidate's kernels in an nvcc unit without torch first (the `lean` scheme, docs/hip.md; on since its first GPU run, 42/42 statuses as expected)", verdict=True)
    spill_outputs_mib: float = _field(4096.0, "AMDKV_SPILL_OUTPUTS_MIB", "outputs a candidate worker holds in memory until its end, at most (MiB); a checked call whose outputs would take it past this has them saved to a file at once, so the worker's host memory cap counts about one call's outputs, not five (same verdicts; verify/output_spill.py; 0: every call's)", worker=True)
    worker_threads: int | None = _field(None, "AMDKV_WORKER_THREADS", "torch threads per worker process (unset: torch's default; forked workers: OMP_NUM_THREADS)", worker=True)
    max_attempts: int = _field(2, "AMDKV_MAX_ATTEMPTS", "runs of one candidate at most when its GPU fails a health check (multi-GPU)")
    policy: str = _field("strict", "AMDKV_POLICY", "strict | reference | benchmark: which checks decide a verdict (docs/benchmarks.md)", verdict=True)
    sandbox: str = _field("auto", "AMDKV_SANDBOX", "auto | require | off: the OS sandbox of every worker (namespaces, Landlock, seccomp, limits; docs/sandbox.md)", verdict=True)
    sandbox_nproc: int | None = _field(None, "AMDKV_SANDBOX_NPROC", "processes + threads one worker may have (unset: 4 per core, at least 256)", verdict=True)
    sandbox_file_size_gib: float = _field(4.0, "AMDKV_SANDBOX_FILE_SIZE_GIB", "largest file a worker may write (GiB; its outputs, stdout and stderr files); a candidate whose task's outputs need a larger file gets a worker with the limit they need (verify/disk_admission.py)", verdict=True)
    gpu_host_mem_gib: float = _field(32.0, "AMDKV_GPU_HOST_MEM_GIB", "host memory (RLIMIT_DATA) of a worker on GPU platforms (GiB); runtime_error/oom past it", verdict=True)
    unsafe_skip_static_checks: bool = _field(False, "AMDKV_UNSAFE_SKIP_STATIC_CHECKS", "TEST ONLY: skip the static anti-hack checks (the OS-sandbox and fault tests); such a verdict says so and is never ok", verdict=True)

    def __post_init__(self) -> None:
        _check_choice("device", self.device, DEVICES)
        _check_choice("spare_start", self.spare_start, SPARE_STARTS)
        _check_choice("judge_device", self.judge_device, JUDGE_DEVICES)
        _check_choice("timing_method", self.timing_method, TIMING_METHODS)
        _check_choice("small_kernel_method", self.small_kernel_method, SMALL_KERNEL_METHODS)
        _check_choice("policy", self.policy, POLICIES)
        _check_choice("sandbox", self.sandbox, SANDBOX_MODES)
        for name in ("sandbox_file_size_gib", "gpu_host_mem_gib"):
            if not float(getattr(self, name)) > 0:
                raise BadInputError(f"{name}={getattr(self, name)!r}: must be > 0 GiB", hint=f"e.g. {name}=4")
        if self.sandbox_nproc is not None and int(self.sandbox_nproc) < 16:
            raise BadInputError(f"sandbox_nproc={self.sandbox_nproc!r}: a worker needs at least 16 processes/threads",
                                hint="unset AMDKV_SANDBOX_NPROC for the default")
        for name in ("jobs", "trials", "max_attempts"):
            if int(getattr(self, name)) < 1:
                raise BadInputError(f"{name}={getattr(self, name)!r}: must be >= 1", hint=f"e.g. {name}=1")
        if not float(self.spill_outputs_mib) >= 0:
            raise BadInputError(f"spill_outputs_mib={self.spill_outputs_mib!r}: must be >= 0 MiB", hint="e.g. 4096")
        if self.timeout is not None and not self.timeout > 0:
            raise BadInputError(f"timeout={self.timeout!r}: must be > 0 seconds", hint="e.g. timeout=120")
        object.__setattr__(self, "archs", tuple(self.archs))

    # ------------------------------------------------------------------------- construction
    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> "VerifierConfig":
        """The config the environment asks for (see the table in docs/verifier.md), with
        `overrides` (field names) applied on top. The one place that reads `AMDKV_*` variables."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            env = f.metadata.get("env")
            if env and environ.get(env, "").strip():
                values[f.name] = _parse(f, env, environ[env].strip())
        unknown = sorted(set(overrides) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise BadInputError(f"unknown verifier setting(s) {unknown}",
                                hint=f"settings are {[f.name for f in dataclasses.fields(cls)]}")
        values.update({k: v for k, v in overrides.items()})
        return cls(**values)

    def replace(self, **changes: Any) -> "VerifierConfig":
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "VerifierConfig":
        """The inverse of `to_dict()` (e.g. a config an `amdkv serve` service reports); keys this
        version does not know are ignored, so an older client can read a newer server's config."""
        known = {f.name for f in dataclasses.fields(cls)}
        values = {k: tuple(v) if isinstance(v, list) else v for k, v in data.items() if k in known}
        return cls(**values)

    # ------------------------------------------------------------------------- views
    def to_dict(self) -> dict[str, Any]:
        return {f.name: _jsonable(getattr(self, f.name)) for f in dataclasses.fields(self)}

    def verdict_settings(self) -> dict[str, Any]:
        """The settings that can change a verdict (part of the verdict-cache key)."""
        return {f.name: _jsonable(getattr(self, f.name)) for f in dataclasses.fields(self) if f.metadata["verdict"]}

    def worker_settings(self) -> dict[str, Any]:
        """What worker processes read (fields of worker_protocol.WorkerSettings, in `AMDKV_WORKER_SETTINGS`)."""
        return {f.name: _jsonable(getattr(self, f.name)) for f in dataclasses.fields(self) if f.metadata["worker"]}

    @property
    def cache_path(self) -> Path:
        return Path(self.cache_dir).expanduser()

    def timeout_for(self, interpreter: bool) -> float:
        return float(self.timeout) if self.timeout else (90.0 if interpreter else 180.0)

    def judge_slot_count(self) -> int:
        """Every comparison uses torch's whole intra-op thread pool; a dozen at once oversubscribe
        the host's cores and slow the candidates' own processes too, so a few at a time."""
        if self.judge_slots:
            return max(1, int(self.judge_slots))
        return max(1, min(4, (os.cpu_count() or 1) // 8))

    def gpu_indices(self, visible: int) -> list[int]:
        """The GPU indices this config selects among `visible` GPUs."""
        if isinstance(self.gpus, int):
            return list(range(min(self.gpus, visible)))
        if self.gpus is None:
            return list(range(visible))
        return [i for i in self.gpus if i < visible]


@dataclasses.dataclass(frozen=True)
class ToolchainConfig:
    """Settings of `amdkv toolchain install hip` (the Debian sid hipcc chroot)."""

    debian_mirror: str | None = _field(None, "AMDKV_DEBIAN_MIRROR", "Debian mirror URL (unset: the one apt's sources use)")
    hip_packages: tuple[str, ...] | None = _field(None, "AMDKV_HIP_PACKAGES", "space/comma separated package list for the chroot (unset: the tested list)")
    hip_torch_packages: tuple[str, ...] | None = _field(None, "AMDKV_HIP_TORCH_PACKAGES", "extra packages for torch-extension sources (unset: the tested list)")
    toolchain_dir: str | None = _field(None, "AMDKV_TOOLCHAIN_DIR", "where the chroot lives (unset: ~/.cache/amdkv/toolchains/hip-sid)")
    hip_cache_dir: str | None = _field(None, "AMDKV_HIP_CACHE_DIR", "compile-only HIP result cache (unset: ~/.cache/amdkv/hipcache)")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "ToolchainConfig":
        return cls(**_values_from_env(cls, environ))


@dataclasses.dataclass(frozen=True)
class DataConfig:
    """Settings of the dataset stages (`amdkv build / publish`)."""

    hub_cards: str | None = _field(None, "AMDKV_HUB_CARDS", "folder of dataset card templates (unset: the checkout's hub_cards/)")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "DataConfig":
        return cls(**_values_from_env(cls, environ))


def _values_from_env(cls: type, environ: Mapping[str, str] | None) -> dict[str, Any]:
    """The fields of dataclass `cls` set (non-empty) in `environ`, parsed."""
    environ = os.environ if environ is None else environ
    return {f.name: _parse(f, f.metadata["env"], environ[f.metadata["env"]].strip())
            for f in dataclasses.fields(cls) if environ.get(f.metadata["env"], "").strip()}


def cache_root(environ: Mapping[str, str] | None = None) -> Path:
    """`VerifierConfig.from_env().cache_path` without parsing every other setting: procedural suites
    ask for it once per task file (5,000 times in a suite check)."""
    environ = os.environ if environ is None else environ
    field = next(f for f in dataclasses.fields(VerifierConfig) if f.name == "cache_dir")
    return Path(environ.get(field.metadata["env"], "").strip() or default_cache_dir()).expanduser()


def resolve_config(config: "VerifierConfig | str | None" = None, **settings: Any) -> VerifierConfig:
    """A config from what a caller passed: a VerifierConfig (settings applied on top), a device
    name, or nothing (then `VerifierConfig.from_env()`); `settings` are VerifierConfig fields."""
    if isinstance(config, VerifierConfig):
        return config.replace(**settings) if settings else config
    if config is not None:
        settings = {"device": config, **settings}
    return VerifierConfig.from_env(**settings)


def settings_table() -> list[dict[str, Any]]:
    """One row per setting (the docs table and `amdkv env --json` read it)."""
    rows = []
    for cls in (VerifierConfig, ToolchainConfig, DataConfig):
        for f in dataclasses.fields(cls):
            default = f.default if f.default is not dataclasses.MISSING else "~/.cache/amdkv"  # the factory's value
            rows.append({"config": cls.__name__, "field": f.name, "env": f.metadata["env"],
                         "default": _jsonable(default), "doc": f.metadata["doc"],
                         "changes_verdicts": f.metadata["verdict"]})
    return rows


# ----------------------------------------------------------------------------- parsing
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _parse(f: dataclasses.Field, env: str, text: str) -> Any:
    """An environment string as the field's type, or a BadInputError naming the variable."""
    kind = str(f.type)
    try:
        if kind.startswith("bool"):
            low = text.lower()
            if low in _TRUE | _FALSE:
                return low in _TRUE
            raise ValueError("expected 1/0, true/false, yes/no or on/off")
        if f.name == "gpus":
            parts = [p for p in text.replace(" ", "").split(",") if p]
            return int(parts[0]) if len(parts) == 1 and "," not in text else tuple(int(p) for p in parts)
        if kind.startswith("tuple"):
            return tuple(p for p in text.replace(",", " ").split() if p)
        if kind.startswith("int"):
            return int(text)
        if kind.startswith("float"):
            return float(text)
        return text.lower() if f.name in ("device", "spare_start", "judge_device", "timing_method",
                                          "small_kernel_method", "policy", "sandbox") else text
    except ValueError as exc:
        raise BadInputError(f"{env}={text!r} is not a valid {f.name} ({exc})",
                            hint=f"{f.metadata['doc']}; unset {env} to use the default") from None


def _check_choice(name: str, value: str, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise BadInputError(f"{name}={value!r} is not one of {', '.join(allowed)}",
                            hint=f"use one of {', '.join(allowed)}")


def _jsonable(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value
