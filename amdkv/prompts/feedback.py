"""The message a model reads after a turn: built from the turn's `Verdict` (or its dict) or from a
failed extraction, and the stage of the next request.

How each outcome maps to the next stage (docs/prompts.md, "Stages"):

| outcome                              | next stage     | what the feedback shows |
|--------------------------------------|----------------|-------------------------|
| extraction failed (any reason)       | `fix_format`   | why no program could be taken |
| `compile_error`                      | `fix_compile`  | compiler / interpreter log (cleaned, truncated) |
| `runtime_error`, `timeout`           | `fix_runtime`  | the failing cases, the error or time limit, the log |
| `mismatch`                           | `fix_mismatch` | which case failed, worst error vs allowed, passing cases |
| `hack_detected`                      | `fix_hack`     | the rule(s) broken, with line numbers |
| `ok`                                 | `optimise`     | speedups per case, roofline fraction, AMD resources |
| `unverifiable`                       | none (stop)    | why the platform cannot judge it (recorded, not a request) |
| `infra_error`                        | error          | never shown: the harness failed, re-verify instead |

A timeout is a `fix_runtime` turn (the program must end sooner: a loop that never ends or far too
many program instances) rather than `optimise`, which is for correct programs only.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Mapping

from amdkv.errors import BadInputError
from amdkv.prompts import templates
from amdkv.prompts.extract import Extraction, language_name
from amdkv.prompts.stages import FIX_FORMAT, next_stage
from amdkv.prompts.target import target_facts, template_fields
from amdkv.verify.verdict import (COMPILE_ERROR, HACK_DETECTED, INFRA_ERROR, MISMATCH, OK, RUNTIME_ERROR,
                                  TIMEOUT, UNVERIFIABLE, STATUSES)

DEFAULT_MAX_LOG_CHARS = 3000

_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_SITE = re.compile(r"(?:/[^\s\"':]+)*/(?:site|dist)-packages/")
_ABS_PATH = re.compile(r"(?<![\w.])/(?:[^\s\"':/]+/)+(?P<base>[^\s\"':/]+)")
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line \d+')
_TRIAL = re.compile(r"^trial \d+ \(seed \d+\): ")
# Frames from these places say nothing about the candidate's program: the harness that ran it,
# torch's module machinery and Triton's interpreter/launcher internals.
_NOISE_FRAMES = ("/amdkv/", "site-packages/torch/", "dist-packages/torch/", "site-packages/triton/runtime/",
                 "site-packages/triton/language/", "dist-packages/triton/")


@dataclasses.dataclass(frozen=True)
class Feedback:
    """What to tell the model after a turn.

    `stage` is the stage of the next request (None: the trajectory ends here, e.g. the platform
    cannot judge the program); `content` is the user message text; `status` is the verdict status
    or `extraction:<reason>` that produced it."""

    stage: str | None
    content: str
    status: str

    @property
    def message(self) -> dict[str, str]:
        return {"role": "user", "content": self.content}


def clean_log(text: str, max_chars: int = DEFAULT_MAX_LOG_CHARS) -> str:
    """A compiler or Python log as a model should see it.

    ANSI colours removed; Python traceback frames of the harness, torch and Triton internals
    dropped (the candidate's own frames and every exception line stay); installation paths cut
    to the package path and other absolute paths to the file name; then at most `max_chars`,
    keeping the head (first errors) and the tail (the final exception) around an explicit marker.
    """
    kept: list[str] = []
    skip_code = False
    for line in _ANSI.sub("", text).replace("\r\n", "\n").split("\n"):
        frame = _FRAME.match(line)
        if frame:
            skip_code = any(n in frame.group("file") for n in _NOISE_FRAMES)
            if skip_code:
                continue
        elif skip_code and (line.startswith("    ") or line.strip() == ""):
            continue  # source lines and carets of a dropped frame
        else:
            skip_code = False
        kept.append(line)
    out = "\n".join(kept)
    out = _SITE.sub("", out)
    out = _ABS_PATH.sub(lambda m: m.group("base"), out)
    out = re.sub(r"\n{3,}", "\n\n", out).strip()
    return truncate_middle(out, max_chars)


def truncate_middle(text: str, max_chars: int) -> str:
    """`text` if short enough, else its first two thirds and last third of `max_chars` with a marker."""
    if len(text) <= max_chars:
        return text
    head = max_chars * 2 // 3
    tail = max_chars - head
    cut = len(text) - head - tail
    return f"{text[:head].rstrip()}\n[... {cut} characters omitted ...]\n{text[len(text) - tail:].lstrip()}"


def _fmt(x: float | None, unit: str = "") -> str:
    return "n/a" if x is None else f"{x:.3g}{unit}"


def _status_line(v: Mapping[str, Any]) -> str:
    reason = f" ({v['reason']})" if v.get("reason") else ""
    return f"{v['status']}{reason}, {_platform_phrase(v)}"


def _platform_phrase(v: Mapping[str, Any]) -> str:
    platform = v.get("platform") or "unknown"
    if platform == "cpu":
        return "checked with the Triton CPU interpreter (no timings)"
    if platform == "cuda":
        return (f"checked on an NVIDIA GPU ({v.get('device') or 'cuda'}); its timings are a proxy, "
                "not measurements on the AMD target")
    if platform == "rocm":
        return f"checked on {v.get('device') or 'an AMD GPU'}"
    if platform.startswith("static:"):
        return f"compiled for {platform.split(':', 1)[1]} without running"
    return f"platform {platform}"


def _case_lines(v: Mapping[str, Any], only_failed: bool) -> list[str]:
    lines, passed = [], []
    for c in v.get("cases", []):
        tags = "/".join(c.get("tags") or [])
        if c.get("status") == OK:
            passed.append(f"`{c['name']}`")
            if only_failed:
                continue
        if c.get("reason") == "not_run":
            continue
        msg = _TRIAL.sub("", c.get("message") or "")
        what = c.get("reason") or c.get("status")
        lines.append(f"- case `{c['name']}` ({tags}): {c.get('status')}, {what}" + (f": {msg}" if msg else ""))
    not_run = [f"`{c['name']}`" for c in v.get("cases", []) if c.get("reason") == "not_run"]
    if passed and only_failed:
        lines.append(f"- passed: {', '.join(passed)}")
    if not_run:
        lines.append(f"- not run after the failure: {', '.join(not_run)}")
    return lines


def _resource_lines(v: Mapping[str, Any]) -> list[str]:
    lines, seen = [], set()
    for r in v.get("resources", []):
        if not r.get("compiled"):
            lines.append(f"- `{r.get('kernel')}` does not compile for {r.get('arch')}: {r.get('error')}")
            continue
        key = tuple(r.get(k) for k in ("arch", "kernel", "vgpr", "agpr", "sgpr", "vgpr_spill", "sgpr_spill",
                                        "scratch_bytes", "lds_bytes", "occupancy", "error"))
        if key in seen:
            continue
        seen.add(key)
        spills = (r.get("vgpr_spill") or 0) + (r.get("sgpr_spill") or 0)
        mfma = (r.get("config") or {}).get("mfma_instructions")
        parts = [f"{r.get('vgpr')} VGPRs", f"{r.get('agpr')} AGPRs", f"{r.get('sgpr')} SGPRs",
                 f"{spills} spilled registers" if spills else "no spills",
                 f"scratch {r.get('scratch_bytes')} B" if r.get("scratch_bytes") else None,
                 f"LDS {r.get('lds_bytes')} of {r.get('lds_limit')} B" if r.get("lds_limit") else None,
                 f"occupancy {r.get('occupancy')} wavefronts/SIMD" if r.get("occupancy") is not None else None,
                 f"{mfma} MFMA instructions" if mfma is not None else None]
        launch = (r.get("config") or {}).get("capture_index")
        label = f" (launch {launch + 1})" if launch is not None and _launches(v, r) > 1 else ""
        lines.append(f"- `{r.get('kernel')}`{label} on {r.get('arch')}: " + ", ".join(p for p in parts if p))
        if r.get("error"):
            lines.append(f"  WARNING: {r['error']}: this kernel would fail to launch on {r.get('arch')}")
    return lines


def _launches(v: Mapping[str, Any], r: Mapping[str, Any]) -> int:
    """How many captured launches of the same kernel and arch the verdict has resources for."""
    return sum(1 for o in v.get("resources", []) if o.get("kernel") == r.get("kernel") and o.get("arch") == r.get("arch"))


def _timing_lines(v: Mapping[str, Any]) -> list[str]:
    perf = [c for c in v.get("cases", []) if c.get("cand_ms") is not None]
    if not perf:
        return []
    lines = [f"Speedup over PyTorch eager (geometric mean): {_fmt(v.get('speedup'), 'x')}; "
             f"over torch.compile: {_fmt(v.get('speedup_compile'), 'x')}; fraction of the roofline "
             f"(sol): {_fmt(v.get('sol'))}."]
    for c in perf:
        lines.append(f"- case `{c['name']}`: yours {_fmt(c.get('cand_ms'), ' ms')}, eager {_fmt(c.get('ref_ms'), ' ms')}, "
                     f"speedup {_fmt(c.get('speedup'), 'x')}, sol {_fmt(c.get('sol'))}")
    return lines


def _details(v: Mapping[str, Any], max_log_chars: int) -> str:
    status = v["status"]
    parts: list[str] = []
    extra = templates.hint("reason", v.get("reason"))
    if extra:
        parts.append(extra)
    if status == HACK_DETECTED:
        findings = v.get("hack_findings") or []
        parts.append("\n".join(f"- {f}" for f in findings) if findings else clean_log(v.get("diagnostics", ""),
                                                                                      max_log_chars))
        return "\n\n".join(p for p in parts if p)
    if status in (MISMATCH, RUNTIME_ERROR, TIMEOUT, COMPILE_ERROR):
        cases = _case_lines(v, only_failed=True)
        if cases:
            parts.append("\n".join(cases))
    if status in (COMPILE_ERROR, RUNTIME_ERROR, TIMEOUT) and v.get("diagnostics"):
        parts.append("Log:\n```text\n" + clean_log(v["diagnostics"], max_log_chars) + "\n```")
    if status == MISMATCH:  # the cases say it all, except what the program printed (warnings...)
        told = [c.get("message") for c in v.get("cases", []) if c.get("message")]
        rest = "\n".join(line for line in (v.get("diagnostics") or "").split("\n")
                         if line.strip() and not any(m in line for m in told))
        if rest:
            parts.append("Other output:\n```text\n" + clean_log(rest, max_log_chars) + "\n```")
    if status == OK:
        timing = _timing_lines(v)
        parts.append("\n".join(timing) if timing else "No timings are available on this platform.")
    resources = _resource_lines(v)
    if resources:
        parts.append("Compiled for AMD:\n" + "\n".join(resources))
    return "\n\n".join(p for p in parts if p)


def verdict_feedback(verdict: Mapping[str, Any] | Any, *, language: str, arch: str,
                     version: str = templates.PROMPT_VERSION,
                     max_log_chars: int = DEFAULT_MAX_LOG_CHARS) -> Feedback:
    """The feedback for a verdict (`Verdict` or its `to_dict()`)."""
    v = verdict.to_dict() if hasattr(verdict, "to_dict") else dict(verdict)
    status = v.get("status")
    if status not in STATUSES:
        raise BadInputError(f"not a verdict: status {status!r}", hint=f"statuses are {', '.join(STATUSES)}")
    if status == INFRA_ERROR:
        raise BadInputError("an infra_error verdict is never shown to the model: the harness failed, not the program",
                            hint="verify the candidate again (or drop the turn); do not build feedback from it")
    stage = next_stage(status)
    facts = target_facts(arch)
    details = _details(v, max_log_chars)
    if status == UNVERIFIABLE:
        content = f"The program could not be judged here: {_status_line(v)}.\n\n{details}".strip() + "\n"
        return Feedback(None, content, status)
    fields = {"status_line": _status_line(v), "details": details, "language_name": language_name(language),
              "arch": facts.name, "optimise_hints": ""}
    if status == OK:
        fields["optimise_hints"] = templates.render(f"{language}_optimise", version,
                                                    **template_fields(facts)).strip()
    return Feedback(stage, templates.render(stage, version, **fields), status)


def extraction_feedback(extraction: Extraction, *, version: str = templates.PROMPT_VERSION) -> Feedback:
    """The feedback for a reply from which no program could be taken."""
    if extraction.ok:
        raise BadInputError("the extraction succeeded: build feedback from the candidate's verdict instead",
                            hint="call feedback_for(config, verdict=...)")
    hint = templates.hint("extraction", extraction.reason)
    folder, fields = version, {}
    if extraction.api_names is not None:  # kernel code of a benchmark task (amdkv.prompts.benchmark), not ModelNew
        folder, fields = templates.benchmark_templates(version), {"api": ", ".join(
            f"`{n}`" for n in extraction.api_names) or "its functions"}
        hint = "" if extraction.reason == "no_model_new" else hint  # v1's hint for it asks for ModelNew
    content = templates.render(FIX_FORMAT, folder, detail=extraction.detail, hint=hint, **fields)
    return Feedback(FIX_FORMAT, content, f"extraction:{extraction.reason}")

