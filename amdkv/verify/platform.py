"""Which platform a verification runs on, and what that platform can judge.

`cpu`  : Triton under the interpreter, correctness cases only, no speedups.
`cuda` : an NVIDIA GPU (never reported as an AMD number).
`rocm` : an AMD GPU with ROCm torch (the real target). Written to ROCm's documented behaviour;
         not run on hardware by this project yet (no AMD GPU reachable).
"""

from __future__ import annotations

import dataclasses

from amdkv.errors import BadInputError

PLATFORMS = ("cpu", "cuda", "rocm")


@dataclasses.dataclass(frozen=True)
class PlatformInfo:
    name: str            # cpu | cuda | rocm
    device: str          # torch device string: cpu, cuda:0, ...
    can_time: bool       # speedups are meaningful only on GPUs
    interpreter: bool    # Triton runs under TRITON_INTERPRET=1

    def for_device(self, index: int) -> "PlatformInfo":
        """The same platform on GPU `index` (no detection: the platform was detected once)."""
        if not self.can_time:
            return self
        return dataclasses.replace(self, device=f"cuda:{index}")

    @property
    def is_target(self) -> bool:
        """True only on the platform the library is about (AMD GPUs)."""
        return self.name == "rocm"


def detect_platform(requested: str = "auto", device_index: int = 0) -> PlatformInfo:
    """Resolve `auto|cpu|cuda|rocm` to a concrete platform, checking that it exists here."""
    if requested not in ("auto",) + PLATFORMS:
        raise BadInputError(f"unknown device {requested!r}", hint="use one of auto, cpu, cuda, rocm")
    import torch

    has_gpu = torch.cuda.is_available()
    is_hip = getattr(torch.version, "hip", None) is not None
    if requested == "auto":
        requested = ("rocm" if is_hip else "cuda") if has_gpu else "cpu"
    if requested == "cpu":
        return PlatformInfo("cpu", "cpu", can_time=False, interpreter=True)
    if not has_gpu:
        raise BadInputError(f"--device {requested} asked for, but torch sees no GPU on this machine",
                            hint="use --device cpu (Triton interpreter) or run on a GPU machine")
    if requested == "rocm" and not is_hip:
        raise BadInputError("--device rocm asked for, but this torch is a CUDA build",
                            hint="install ROCm torch on an AMD GPU machine, or use --device cuda")
    if requested == "cuda" and is_hip:
        raise BadInputError("--device cuda asked for, but this torch is a ROCm build",
                            hint="use --device rocm on this machine")
    return PlatformInfo(requested, f"cuda:{device_index}", can_time=True, interpreter=False)


def worker_gpu_env(platform: PlatformInfo, environ: dict[str, str]) -> tuple[dict[str, str], str]:
    """The environment that shows a GPU worker only its own GPU, and that GPU's device name inside
    the worker (always `cuda:0` then).

    Why: a process that sees every GPU initialises the driver on every GPU, so with two GPUs each
    candidate's start-up also works on (and waits for) the other GPU's driver state; and a candidate
    that sees only its GPU cannot launch work on, or allocate on, a GPU whose candidate is being
    timed. The entry is taken from the parent's own list where it has one (indices, or NVIDIA's
    `GPU-<uuid>` names), so `cuda:N` here is the same GPU there. NVIDIA: CUDA_VISIBLE_DEVICES; ROCm:
    HIP_VISIBLE_DEVICES, which HIP applies within whatever ROCR_VISIBLE_DEVICES already selected
    (ROCm's documented order; not run on AMD hardware here)."""
    if platform.interpreter or not platform.device.startswith("cuda:"):
        return {}, platform.device
    index = int(platform.device.split(":", 1)[1])
    var = "HIP_VISIBLE_DEVICES" if platform.name == "rocm" else "CUDA_VISIBLE_DEVICES"
    inherited = environ.get(var)
    if inherited is None and platform.name == "rocm":
        inherited = environ.get("CUDA_VISIBLE_DEVICES")  # HIP honours it when HIP_VISIBLE_DEVICES is unset
    entries = [e.strip() for e in inherited.split(",") if e.strip()] if inherited else None
    if entries is not None and index >= len(entries):
        raise BadInputError(f"{platform.device} asked for, but {var}={inherited!r} lists {len(entries)} GPU(s)",
                            hint=f"use a device index below {len(entries)}, or widen {var}")
    return {var: entries[index] if entries is not None else str(index)}, "cuda:0"
