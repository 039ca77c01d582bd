"""Prompts built from each external benchmark's own instructions (amdkv/prompts/benchmark.py;
docs/benchmarks.md, "Prompts"), kernel-code extraction for kernel-file tasks, and one `amdkv gen`
run on a TritonBench-G fixture verified on the CPU (Triton interpreter).

Only our own fixtures (tests/data/external/) and small files written here in each format: never a
benchmark's file or text."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest
from gen_support import gen_cli, run_trajectories, statuses

from amdkv.errors import BadInputError
from amdkv.prompts import PromptConfig, build_messages, extract_code, feedback_for, task_message, templates
from amdkv.prompts.benchmark import benchmark_message, kernel_api_names, kernel_signatures
from amdkv.tasks.suites import load_suite

DATA = Path(__file__).parent / "data" / "external"
TBG = DATA / "tritonbench"
SEP = "#" * 146


def _user(task, **config) -> str:
    return task_message(task, PromptConfig(**config))["content"]


@pytest.fixture(scope="module")
def tbg() -> dict:
    return {t.id: t for t in load_suite(f"tritonbench-g:{TBG}")}


# ----------------------------------------------------------------------------------- TritonBench-G
def test_tritonbench_prompt_is_the_benchmarks_instruction_in_each_style(tbg) -> None:
    scale = tbg["tiny_scale"]
    ins = scale.metadata["instruction"]
    comp, simp = _user(scale, instruction_style="comp"), _user(scale, instruction_style="simp")
    assert comp.startswith(ins["comp_prompt"]) and ins["simp_prompt"] not in comp
    assert simp.startswith(ins["simp_prompt"]) and ins["comp_prompt"] not in simp
    assert _user(scale) == comp  # auto: the complex instruction when the task has it
    for text in (comp, simp):
        assert "reference_model(" not in text and "METADATA" not in text and "_amdkv_harness" not in text
        assert "`scale`" in text and "define no `ModelNew`" in text  # our answer-format note
        assert "torch.empty_like" not in text  # the benchmark's own kernel is never shown
    assert _user(scale, shots=3) == comp  # amdkv's few-shot examples are not added to a benchmark's prompt
    # the system message stays amdkv's
    system = build_messages(scale, PromptConfig())[0]["content"]
    assert system == build_messages(load_suite("builtin:all")[0], PromptConfig())[0]["content"]


def test_tritonbench_index_alone_gives_the_instru_text_and_no_instructions_a_signature_prompt(tmp_path) -> None:
    folder = tmp_path / "data" / "TritonBench_G_v1"
    folder.mkdir(parents=True)
    shutil.copy(TBG / "data" / "TritonBench_G_v1" / "tiny_scale.py", folder)
    shutil.copy(TBG / "data" / "TritonBench_G_v1.json", tmp_path / "data")  # the index, no alpaca files
    (task,) = load_suite(f"tritonbench-g:{tmp_path}")
    ins = task.metadata["instruction"]
    assert set(ins) == {"simp_instru", "comp_instru"}
    assert _user(task, instruction_style="simp").startswith(ins["simp_instru"])
    assert _user(task).startswith(ins["comp_instru"])
    (tmp_path / "data" / "TritonBench_G_v1.json").unlink()
    (bare,) = load_suite(f"tritonbench-g:{tmp_path}")
    assert bare.metadata["instruction"] is None
    text = _user(bare)
    assert "## Task `tiny_scale` (TritonBench-G)" in text and "def scale(x, factor):\n    ..." in text
    assert "import triton.language as tl" in text
    assert "tl.store" not in text and "scale_kernel[" not in text and "reference_model(" not in text


def test_kernel_signatures_keep_docstrings_and_class_methods() -> None:
    code = ('import torch\n\n\nclass _Op(torch.autograd.Function):\n    """Doc of op."""\n\n'
            '    @staticmethod\n    def forward(ctx, x):\n        return x * 2\n\n\nop = _Op.apply\n\n\n'
            'def helper(y):\n    return y\n')
    out = kernel_signatures(code, ["op", "_Op"])
    assert '"""Doc of op."""' in out and "def forward(ctx, x):\n        ..." in out and "op = _Op.apply" in out
    assert "x * 2" not in out and "helper" not in out
    assert "def helper(y):\n    ..." in kernel_signatures(code, ["missing"])  # nothing named: every definition


# ------------------------------------------------------------------------------------- ROCmBench
def test_rocmbench_prompt_is_the_instructions_file_else_the_kernels_signatures(tmp_path) -> None:
    ins = tmp_path / "ins.json"
    ins.write_text(json.dumps([{"instruction": "Fixture: add two vectors with a masked Triton kernel.",
                                "label": "x", "file": "test_tiny_add.py"}]))
    with_ins = {t.id: t for t in load_suite(f"rocmbench:{DATA / 'rocm'}?instructions={ins}")}
    text = _user(with_ins["test_tiny_add"])
    assert text.startswith("Fixture: add two vectors with a masked Triton kernel.")
    assert "`add_kernel`" in text and "reference_model(" not in text
    plain = {t.id: t for t in load_suite(f"rocmbench:{DATA / 'rocm'}")}
    text = _user(plain["test_tiny_add"])
    assert "## Task `test_tiny_add` (ROCmBench)" in text
    assert "@triton.jit\ndef add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):\n    ..." in text
    assert "tl.store" not in text and "reference_model(" not in text and "assert_close(out" not in text
    assert kernel_api_names(plain["test_tiny_add"]) == ("add_kernel",)  # modules the tests use are not asked for


# ----------------------------------------------------------------------------------- KernelBench
def _order(text: str, *parts: str) -> list[int]:
    return [text.index(p) for p in parts]


def test_kernelbench_prompt_is_statement_example_architecture_instruction() -> None:
    task = load_suite(f"kernelbench:{DATA / 'kernelbench'}?only=1_Tiny_add")[0]
    text = _user(task, language="triton")
    assert "{backend_display}" not in text and "reference_model(" not in text
    pos = _order(text, "Fixture problem statement: replace operators with Triton kernels (fixture).",
                 "def forward(self, a):\n        return a",  # few_shot_example_arch
                 "# fixture one-shot example",                # the backend's one_shot_new_arch
                 task.source.strip(), "Fixture instruction: name the new architecture ModelNew.")
    assert pos == sorted(pos)
    # the checkout has no HIP backend: HIP is named, and no Triton example is shown for HIP
    hip = _user(task, language="hip")
    assert "replace operators with HIP kernels." in hip and "fixture one-shot example" not in hip
    assert task.source.strip() in hip


def test_kernelbench_backend_display_and_example_for_hip(tmp_path) -> None:
    """A checkout whose prompts file has the backends (our own text, in KernelBench's layout)."""
    shutil.copytree(DATA / "kernelbench", tmp_path / "kb")
    prompts = tmp_path / "kb" / "src" / "kernelbench" / "prompts"
    (prompts / "new_hip.py").write_text("# our HIP one-shot example\n")
    (prompts / "new_cuda.py").write_text("# our CUDA one-shot example\n")
    toml = prompts / "prompts.toml"
    text = toml.read_text().replace("Fixture instruction: name", "Fixture instruction with {backend_display}: name")
    backends = ('[backends.hip]\nbackend_display = "HIP fixture kernels"\n'
                'one_shot_new_arch = "src/kernelbench/prompts/new_hip.py"\n'
                '[backends.cuda]\nbackend_display = "CUDA fixture operators"\n'
                'one_shot_new_arch = "src/kernelbench/prompts/new_cuda.py"\n')
    toml.write_text(text + backends)
    for spec in (f"kernelbench:{tmp_path / 'kb'}?only=1_Tiny_add", f"pytorch2hip:{tmp_path / 'kb'}?only=1_Tiny_add"):
        (task,) = load_suite(spec)
        hip, triton = _user(task, language="hip"), _user(task, language="triton")
        assert "replace operators with HIP fixture kernels." in hip
        assert "Fixture instruction with HIP fixture kernels" in hip
        assert "# our HIP one-shot example" in hip and "CUDA" not in hip
        assert "Fixture instruction with Triton kernels (fixture)" in triton and "# fixture one-shot example" in triton
    # without a HIP backend, the CUDA backend's `load_inline` example is shown under a HIP name
    toml.write_text(toml.read_text().split("[backends.hip]")[0] + '[backends.cuda]\nbackend_display = "CUDA x"\n'
                    'one_shot_new_arch = "src/kernelbench/prompts/new_cuda.py"\n')
    (task,) = load_suite(f"kernelbench:{tmp_path / 'kb'}?only=1_Tiny_add")
    hip = _user(task, language="hip")
    assert "with HIP kernels" in hip and "# our CUDA one-shot example" in hip


# ------------------------------------------------------------------------------ nothing changes
# sha256 of the [system, user] messages of three bundled tasks, both languages, 0 shots, as rendered
# before benchmark prompts existed (commit c90aa29): tasks without benchmark material are untouched.
BUNDLED_PROMPTS_SHA256 = "8dcd2c316dea9e6a0902889a999183641cb58f8a10f02f66a00237ba6465c286"


def test_bundled_tasks_keep_their_prompts_byte_for_byte() -> None:
    tasks = {t.id: t for t in load_suite("builtin:all")}
    h = hashlib.sha256()
    for task_id in ("l1_relu", "l1_softmax", "l1_sum_lastdim"):
        for language in ("triton", "hip"):
            h.update(json.dumps(build_messages(tasks[task_id], PromptConfig(language=language, shots=0))).encode())
    assert h.hexdigest() == BUNDLED_PROMPTS_SHA256
    for task in [*tasks.values(), *load_suite("pytorch2hip:builtin:eval")]:
        assert benchmark_message(task, PromptConfig()) is None and kernel_api_names(task) is None


def test_prompt_config_records_the_instruction_style() -> None:
    cfg = PromptConfig(instruction_style="simp")
    assert cfg.to_dict()["instruction_style"] == "simp"
    assert PromptConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    # the default is left out, so configs recorded before the field keep their identity (run keys)
    assert "instruction_style" not in PromptConfig().to_dict()
    assert PromptConfig.from_dict(PromptConfig().to_dict()) == PromptConfig()
    with pytest.raises(BadInputError, match="instruction_style"):
        PromptConfig(instruction_style="full")


def test_benchmark_framing_templates_are_frozen() -> None:
    for version, fp in templates.RELEASED_BENCHMARK.items():
        assert templates.fingerprint(templates.benchmark_templates(version)) == fp, version
    assert set(templates.RELEASED_BENCHMARK) == set(templates.RELEASED)
    assert templates.benchmark_templates("v1") not in templates.available_versions()


# ---------------------------------------------------------------------------------- extraction
def test_kernel_code_extraction_takes_the_block_defining_the_api(tbg) -> None:
    api = kernel_api_names(tbg["tiny_scale"])
    assert api == ("scale",)
    kernel = tbg["tiny_scale"].metadata["reference_candidate"]
    usage = "def test_scale():\n    return scale(torch.ones(3), 2.0)\n"
    reply = f"Kernel:\n\n```python\n{kernel}```\n\nUsage:\n\n```python\n{usage}```\n"
    ex = extract_code(reply, api_names=api)
    assert ex.ok and ex.code.strip() == kernel.strip() and ex.api_names == ("scale",)
    assert not extract_code(reply).ok  # the same reply as a ModelNew program: nothing to take
    # the tests after the separator line are not what makes a block a candidate
    only_below = f"```python\nimport torch\n{SEP}\ndef scale(x, f):\n    return x\n```\n"
    ex = extract_code(only_below, api_names=api)
    assert ex.reason == "no_model_new" and "`scale`" in ex.detail and "146" in ex.detail
    fb = feedback_for(PromptConfig(), extraction=ex)
    assert fb.stage == "fix_format" and "`scale`" in fb.content and "ModelNew" not in fb.content
    assert extract_code(kernel, api_names=api).method == "unfenced"
    broken = "```python\nimport torch\n\ndef scale(x, factor):\n    return x *\n```\n"  # reaches the verifier
    assert extract_code(broken, api_names=api).ok and not extract_code(broken.replace("scale", "other"), api_names=api).ok
    assert extract_code("```python\n@triton.jit\ndef k(x):\n    pass\n```", api_names=()).ok  # no names known


# --------------------------------------------------------------------------------- end to end
def test_gen_on_tritonbench_prompts_with_its_instruction_and_the_verifier_judges(tbg, tmp_path) -> None:
    """`amdkv gen triton --tasks tritonbench-g:... --llm replay`: the first user message is the
    benchmark's instruction (simp, from the CLI), the replies' kernel code is verified on the CPU:
    a reply that repeats a sabotaged copy of the tests below the separator line is judged on its
    kernel part (ok), a kernel that writes zeros is a mismatch."""
    scale = tbg["tiny_scale"]
    kernel = scale.metadata["reference_candidate"]
    sabotage = f"{kernel.rstrip()}\n\n{SEP}\n\ndef scale(x, factor):\n    return torch.zeros_like(x)\n"
    zeros = (DATA / "candidates" / "tbg_scale_zeros.py").read_text()
    samples = tmp_path / "samples.jsonl"
    samples.write_text(json.dumps({"task_id": "tiny_scale", "samples": [sabotage, zeros]}) + "\n")
    out = tmp_path / "run"
    r = gen_cli("triton", "--tasks", f"tritonbench-g:{TBG}?only=tiny_scale.py", "--llm", "replay",
                "--replay-from", samples, "--samples", "2", "--turns", "2", "--instruction-style", "simp",
                "--device", "cpu", "--jobs", "2", "--out", out, "--json")
    assert r.returncode == 0, r.stderr + r.stdout
    recs = run_trajectories(out)
    assert [statuses(rec)[0] for rec in recs] == ["ok", "mismatch"]
    # a benchmark test file is never timed: no optimise turn after `ok` (it would have no numbers)
    assert statuses(recs[0]) == ["ok"] and recs[0]["trajectory"]["metadata"]["stop_reason"] == "ok_untimed"
    for rec in recs:
        traj = rec["trajectory"]
        user = traj["prompt"][1]["content"]
        assert user.startswith(scale.metadata["instruction"]["simp_prompt"]) and "reference_model(" not in user
        assert traj["metadata"]["prompt_config"]["instruction_style"] == "simp"
        verdict = traj["turns"][0]["verdict"]
        assert verdict["platform"] == "cpu" and verdict["task_id"] == "tiny_scale"
    assert SEP in recs[0]["trajectory"]["turns"][0]["code"]  # recorded as the model wrote it; the verifier cut it
    rows = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert [row["task_id"] for row in rows] == ["tiny_scale"] and len(rows[0]["samples"]) == 2
