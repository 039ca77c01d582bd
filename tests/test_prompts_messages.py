"""Prompt templates, the system prompt's facts and rules, few-shot selection, feedback from real
verdicts, and prompts rendered through Qwen3's chat template with the tiny tokenizer."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from amdkv.errors import BadInputError
from amdkv.prompts import (PROMPT_VERSION, STAGES, PromptConfig, build_messages, clean_log, extract_code,
                           feedback_for, next_stage, system_message, task_message)
from amdkv.prompts import templates
from amdkv.prompts.fewshot import select_examples
from amdkv.prompts.target import ARCH_NAMES, target_facts
from amdkv.tasks.builtin import solution_path
from amdkv.tasks.suites import load_suite
from amdkv.tasks.types import Task
from amdkv.verify import static_checks
from amdkv.verify.amd.archs import ARCHS

from fixtures_tiny import tiny_tokenizer  # noqa: F401  (session fixture)

VERDICTS = Path(__file__).resolve().parent / "data" / "verdicts"
REPO = Path(__file__).resolve().parent.parent
LEFTOVER_PLACEHOLDER = re.compile(r"\$[A-Za-z_{]")


@pytest.fixture(scope="module")
def all_tasks() -> list[Task]:
    return load_suite("builtin:all")


@pytest.fixture(scope="module")
def task(all_tasks) -> Task:
    return next(t for t in all_tasks if t.id == "l1_softmax")


def _verdict(name: str) -> dict:
    return json.loads((VERDICTS / f"{name}.json").read_text())


# ------------------------------------------------------------------------------ versions
def test_released_template_versions_are_frozen():
    """A released folder never changes: edit a copy under the next version and bump PROMPT_VERSION."""
    assert PROMPT_VERSION in templates.RELEASED
    for version, fp in templates.RELEASED.items():
        assert templates.fingerprint(version) == fp, f"templates/{version} changed after release"


def test_render_fails_on_a_missing_field_and_unknown_names():
    with pytest.raises(BadInputError, match="needs the field"):
        templates.render("write")
    with pytest.raises(BadInputError, match="no template"):
        templates.render("nope")
    with pytest.raises(BadInputError, match="unknown prompt version"):
        PromptConfig(version="v0")
    with pytest.raises(BadInputError, match="gfx1100"):
        PromptConfig(arch="gfx1100")
    with pytest.raises(BadInputError, match="language"):
        PromptConfig(language="cuda")


# ------------------------------------------------------------------------------ system prompt
@pytest.mark.parametrize("arch", ARCH_NAMES)
@pytest.mark.parametrize("language", ["triton", "hip"])
def test_system_prompt_states_the_target_precisely(arch, language):
    text = system_message(PromptConfig(language=language, arch=arch))["content"]
    facts = target_facts(arch)
    assert f"Target: {arch}" in text
    assert f"has {ARCHS[arch].wave_size} lanes" in text
    assert f"at most {ARCHS[arch].lds_bytes // 1024} KiB per workgroup" in text
    assert f"{facts.compute_units} compute units" in text
    assert "MFMA" in text and "Matrix cores" in text
    fp8 = {"gfx90a": "fp8 is emulated", "gfx942": "e4m3fnuz (max 240)", "gfx950": "e4m3fn (max 448)"}[arch]
    assert fp8 in text
    if language == "triton":
        assert "`num_warps=4` means 256 work-items" in text and "IEEE fp32" in text
    else:
        assert f"`warpSize` is {ARCHS[arch].wave_size}" in text and "`__shfl_xor`" in text
    assert not LEFTOVER_PLACEHOLDER.search(text)


@pytest.mark.parametrize("language", ["triton", "hip"])
def test_system_prompt_rules_are_the_verifiers_rules(language):
    """Every refused import and call the prompt names is refused by the verifier's static checks,
    and every one the verifier refuses is named (or covered by a named family)."""
    text = system_message(PromptConfig(language=language))["content"]
    for root in static_checks.ALLOWED_IMPORT_ROOTS - {"__future__"}:
        assert f"`{root}`" in text
    for mod in static_checks.DENIED_IMPORTS:
        found = static_checks.check_source(f"import {mod}\n", language=language)
        refused = any(f.code == "import_not_allowed" for f in found)
        assert refused == (f"`{mod}`" in text), mod
    for call in static_checks.DENIED_BUILTIN_CALLS:
        assert f"`{call}()`" in text
        assert static_checks.check_source(f"def f():\n    {call}('x')\n", language=language)
    for attr in static_checks.DENIED_OS_ATTRS:
        assert f"`os.{attr}()`" in text or f"`os.{attr[:4]}" in text, attr
    assert "ModelNew" in text and "```python" in text


# ------------------------------------------------------------------------------ few-shot
def test_few_shot_examples_never_come_from_the_eval_split(all_tasks):
    """For every bundled task and both languages, with 3 shots: examples are train tasks, never the
    task itself or a near copy, and no prompt contains an eval task's reference solution."""
    eval_ids = {t.id for t in all_tasks if t.split == "eval"}
    eval_solutions = [solution_path(i, lang).read_text().strip() for i in eval_ids for lang in ("triton", "hip")
                      if solution_path(i, lang)]
    assert eval_ids and eval_solutions
    for t in all_tasks:
        for language in ("triton", "hip"):
            config = PromptConfig(language=language, shots=3)
            examples = select_examples(t, language, 3)
            assert examples and all(e.split == "train" and e.task_id not in eval_ids for e in examples)
            assert t.id not in {e.task_id for e in examples}
            content = task_message(t, config)["content"]
            assert not any(s in content for s in eval_solutions), (t.id, language)
            others = [o for o in all_tasks if o.id in eval_ids and o.id != t.id]
            assert not any(o.source.strip() in content for o in others), (t.id, language)


def test_few_shot_skips_near_copies_of_the_task(all_tasks):
    relu = next(t for t in all_tasks if t.id == "l1_relu")
    copy = Task(id="my_relu", path="my_relu.py", source=relu.source.replace("ReLU over", "Rectifier over"),
                op_family="elementwise", level=1)
    chosen = {e.task_id for e in select_examples(copy, "triton", 50)}
    assert "l1_relu" not in chosen and "l1_silu" not in chosen  # same near-duplicate cluster
    plain = Task(id="other", path="x.py", source="import torch\n" * 3, op_family="elementwise", level=1)
    assert "l1_relu" in {e.task_id for e in select_examples(plain, "triton", 50)}


def test_zero_shots_and_ranking(task):
    assert "## Example" not in task_message(task, PromptConfig(shots=0))["content"]
    first = select_examples(task, "triton", 1)[0]
    assert first.task_id != task.id


# ------------------------------------------------------------------------------ stages and feedback
EXPECTED_STAGE = {
    "compile_error_arange": "fix_compile", "compile_error_undefined": "fix_compile", "syntax_error": "fix_compile",
    "mismatch_tail": "fix_mismatch", "mismatch_shape": "fix_mismatch", "mismatch_nan": "fix_mismatch",
    "hack_torch_fallback": "fix_hack", "hack_try_except": "fix_hack", "runtime_oob": "fix_runtime",
    "runtime_sys_exit": "fix_runtime", "ok_relu_gfx942": "optimise", "ok_softmax_gfx942": "optimise",
}


def test_every_stored_verdict_is_covered():
    assert {p.stem for p in VERDICTS.glob("*.json")} == set(EXPECTED_STAGE)


@pytest.mark.parametrize("name", sorted(EXPECTED_STAGE))
@pytest.mark.parametrize("language", ["triton", "hip"])
def test_feedback_from_real_verdicts(name, language):
    """Verdicts written by the real verifier (tests/data/verdicts/make_verdicts.py)."""
    fb = feedback_for(PromptConfig(language=language), verdict=_verdict(name))
    assert fb.stage == EXPECTED_STAGE[name] == next_stage(fb.status)
    assert fb.message == {"role": "user", "content": fb.content}
    assert not LEFTOVER_PLACEHOLDER.search(fb.content)
    for noise in ("/amdkv/", "worker_jobs", "site-packages", "/work/", "runtime_guards"):
        assert noise not in fb.content
    assert "give the complete" in fb.content.lower()


def test_feedback_names_what_went_wrong():
    cfg = PromptConfig()
    mismatch = feedback_for(cfg, verdict=_verdict("mismatch_tail")).content
    assert "case `odd`" in mismatch and "2.81 > allowed" in mismatch and "passed: `small`" in mismatch
    compile_ = feedback_for(cfg, verdict=_verdict("compile_error_arange")).content
    assert "arange's range must be a power of 2" in compile_ and "compile_error_arange.py\", line 10" in compile_
    hack = feedback_for(cfg, verdict=_verdict("hack_torch_fallback")).content
    assert "line 21" in hack and "torch.relu()" in hack
    ok = feedback_for(cfg, verdict=_verdict("ok_softmax_gfx942")).content
    assert "VGPRs" in ok and "LDS 32 of 65536 B" in ok and "No timings" in ok and "tl.dot" in ok
    hip_ok = feedback_for(PromptConfig(language="hip"), verdict=_verdict("ok_softmax_gfx942")).content
    assert "warpSize" in hip_ok and "tl.dot" not in hip_ok


def test_feedback_for_gpu_timings_lds_overflow_and_nvidia_proxy():
    """A GPU verdict (built by hand: no GPU here) with timings and an LDS overflow on gfx942."""
    v = _verdict("ok_softmax_gfx942")
    v.update(platform="cuda", device="NVIDIA H200", speedup=1.8, speedup_compile=1.1, sol=0.42)
    v["cases"].append({"name": "large", "tags": ["performance"], "status": "ok", "ref_ms": 0.9, "cand_ms": 0.5,
                       "speedup": 1.8, "sol": 0.42})
    v["resources"][0].update(lds_bytes=131072, error="LDS 131072 B exceeds gfx942 limit 65536 B")
    text = feedback_for(PromptConfig(), verdict=v).content
    assert "(geometric mean): 1.8x" in text and "over torch.compile: 1.1x" in text
    assert "case `large`: yours 0.5 ms, eager 0.9 ms, speedup 1.8x, sol 0.42" in text
    assert "NVIDIA GPU (NVIDIA H200)" in text and "not measurements on the AMD target" in text
    assert "WARNING: LDS 131072 B exceeds gfx942 limit" in text


def test_mismatch_shows_what_the_program_printed_and_timeouts_say_why():
    nan = feedback_for(PromptConfig(), verdict=_verdict("mismatch_nan")).content
    assert "Other output:" in nan and "invalid value encountered in divide" in nan
    assert "Other output:" not in feedback_for(PromptConfig(), verdict=_verdict("mismatch_tail")).content
    v = _verdict("runtime_sys_exit")
    v.update(status="timeout", reason="interpreter_timeout", diagnostics="[small] candidate did not finish in 90 s")
    v["cases"][0].update(status="timeout", reason="interpreter_timeout", message="did not finish in 90 s")
    fb = feedback_for(PromptConfig(), verdict=v)
    assert fb.stage == "fix_runtime" and "launch fewer, larger programs" in fb.content and "90 s" in fb.content


def test_unverifiable_ends_and_infra_error_is_never_shown():
    v = _verdict("ok_relu_gfx942")
    v.update(status="unverifiable", reason="bf16_on_interpreter")
    fb = feedback_for(PromptConfig(), verdict=v)
    assert fb.stage is None and "bf16_on_interpreter" in fb.content
    v.update(status="infra_error", reason="harness_failure")
    with pytest.raises(BadInputError, match="never shown"):
        feedback_for(PromptConfig(), verdict=v)
    with pytest.raises(BadInputError):
        next_stage("infra_error")


def test_extraction_feedback():
    ex = extract_code("```python\nimport torch\n")
    fb = feedback_for(PromptConfig(), extraction=ex)
    assert fb.stage == "fix_format" and fb.status == "extraction:truncated"
    assert "cut off" in fb.content and "```python" in fb.content
    with pytest.raises(BadInputError, match="verdict"):
        feedback_for(PromptConfig())


def test_clean_log_truncates_keeping_head_and_tail():
    log = "error: first problem\n" + "".join(f"note: line {i}\n" for i in range(2000)) + "FinalError: the end"
    out = clean_log(log, max_chars=500)
    assert len(out) < 560 and out.startswith("error: first problem") and out.endswith("FinalError: the end")
    assert "characters omitted" in out
    assert clean_log("\x1b[31m/opt/rocm/include/hip/x.h:3: error\x1b[0m") == "x.h:3: error"


@pytest.mark.parametrize("language", ["triton", "hip"])
def test_build_messages_for_every_stage(task, language):
    cfg = PromptConfig(language=language)
    write = build_messages(task, cfg)
    assert [m["role"] for m in write] == ["system", "user"] and "## Task `l1_softmax`" in write[1]["content"]
    feedbacks = {next_stage(v["status"]): feedback_for(cfg, verdict=v)
                 for v in (_verdict(n) for n in EXPECTED_STAGE)}
    feedbacks["fix_format"] = feedback_for(cfg, extraction=extract_code("no code"))
    assert set(feedbacks) | {"write"} == set(STAGES)
    for stage, fb in feedbacks.items():
        msgs = build_messages(task, cfg, stage, previous_code="class ModelNew: pass", feedback=fb)
        content = msgs[1]["content"]
        assert content.startswith(write[1]["content"].strip()) and fb.content.strip() in content
        assert ("## Your previous program" in content) == (stage != "fix_format")
        assert not LEFTOVER_PLACEHOLDER.search(content)
    with pytest.raises(BadInputError, match="needs the feedback"):
        build_messages(task, cfg, "optimise", previous_code="x", feedback=feedbacks["fix_compile"])
    with pytest.raises(BadInputError, match="previous_code"):
        build_messages(task, cfg, "fix_compile", feedback=feedbacks["fix_compile"])


# ------------------------------------------------------------------------------ chat template
def test_prompts_render_through_qwen3_template(task, tiny_tokenizer):
    """The tiny tokenizer carries TRL's qwen3.jinja; a rendered prompt holds both messages verbatim
    and its token ids decode back to the same text."""
    msgs = build_messages(task, PromptConfig(language="hip", arch="gfx950"))
    text = tiny_tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    assert text == (f"<|im_start|>system\n{msgs[0]['content']}<|im_end|>\n"
                    f"<|im_start|>user\n{msgs[1]['content']}<|im_end|>\n<|im_start|>assistant\n")
    ids = tiny_tokenizer(text, add_special_tokens=False)["input_ids"]
    assert tiny_tokenizer.decode(ids) == text
    no_think = tiny_tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True,
                                                  enable_thinking=False)
    assert no_think.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")


def test_import_is_light():
    """`import amdkv.prompts` must not import torch (generation clients and dataset builders use it)."""
    out = subprocess.run([sys.executable, "-c", "import sys, amdkv.prompts; print('torch' in sys.modules)"],
                         capture_output=True, text=True, cwd=REPO, check=True)
    assert out.stdout.strip() == "False"
