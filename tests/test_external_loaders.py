"""Loaders of external benchmarks (amdkv/tasks/external/), on small files we wrote in each
benchmark's format (tests/data/external/; never copies of a benchmark's files). No worker runs here:
tests/test_external_verify.py verifies candidates against these tasks."""

from __future__ import annotations

import ast
import io
import tokenize
import types
from pathlib import Path

import pytest

from amdkv.errors import BadInputError, TaskFormatError
from amdkv.tasks.external import harness, testcode
from amdkv.tasks.external.kernelbench import reference_candidate
from amdkv.tasks.suites import load_suite
from amdkv.verify.program import allowed_imports, candidate_part, program_findings
from amdkv.verify.static_checks import check_source

DATA = Path(__file__).parent / "data" / "external"
SEP = "#" * 146


def _names(source: str) -> set[str]:
    return {t.string for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.NAME}


# ------------------------------------------------------------------------------------ KernelBench
def test_kernelbench_checkout_loads_every_level_with_licence_provenance_and_prompts() -> None:
    tasks = load_suite(f"kernelbench:{DATA / 'kernelbench'}")
    assert [t.id for t in tasks] == ["level1/1_Tiny_add", "level1/2_Tiny_scale", "level2/1_Tiny_add_relu"]
    t = tasks[0]
    assert (t.suite, t.level, t.licence) == ("kernelbench", 1, "MIT")
    assert "KernelBench/level1/1_Tiny_add.py" in t.provenance and "sha256" in t.provenance
    assert t.metadata["provenance_detail"]["file"] == "KernelBench/level1/1_Tiny_add.py"
    assert t.metadata["benchmark_rule"]["atol"] == 1e-4
    assert t.metadata["input_bytes"] == 2 * 3 * 37 * 4  # get_inputs on the meta device: nothing allocated
    prompts = t.metadata["instruction"]
    assert prompts["problem_statement"].startswith("Fixture problem statement")
    assert prompts["backends"]["triton"]["backend_display"] == "Triton kernels (fixture)"
    assert "fixture one-shot example" in prompts["backends"]["triton"]["one_shot_new_arch"]
    ref = t.metadata["reference_candidate"]
    assert "Model" not in _names(ref) and "class ModelNew" in ref and "super(ModelNew, self)" in ref


def test_kernelbench_level_folder_levels_and_only_options() -> None:
    one_level = load_suite(f"kernelbench:{DATA / 'kernelbench' / 'KernelBench' / 'level1'}")
    assert [t.id for t in one_level] == ["level1/1_Tiny_add", "level1/2_Tiny_scale"]
    assert [t.id for t in load_suite(f"kernelbench:{DATA / 'kernelbench'}?levels=2")] == ["level2/1_Tiny_add_relu"]
    assert [t.id for t in load_suite(f"kernelbench:{DATA / 'kernelbench'}?only=2_Tiny_scale")] == ["level1/2_Tiny_scale"]


def test_reference_candidate_renames_identifiers_not_text() -> None:
    src = 'class Model:\n    """A Model."""\n    def f(self):\n        return Model  # Model\n'
    out = reference_candidate(src)
    assert "class ModelNew" in out and "return ModelNew" in out and '"""A Model."""' in out and "# Model" in out


def test_pytorch2hip_requires_hip_on_kernelbench_and_builtin_suites() -> None:
    kb = load_suite(f"pytorch2hip:{DATA / 'kernelbench'}?levels=1")
    assert [t.id for t in kb] == ["level1/1_Tiny_add", "level1/2_Tiny_scale"]
    assert all(t.suite == "pytorch2hip" and t.metadata["language"] == "hip" for t in kb)
    builtin = load_suite("pytorch2hip:builtin:eval")
    assert {t.id for t in builtin} == {t.id for t in load_suite("builtin:eval")}
    assert all(t.metadata["language"] == "hip" and "ModelNew" in t.metadata["reference_candidate"] for t in builtin)


# ----------------------------------------------------------------------------------- TritonBench-G
def test_tritonbench_tasks_carry_tests_instructions_licence_and_api() -> None:
    tasks = {t.id: t for t in load_suite(f"tritonbench-g:{DATA / 'tritonbench'}")}
    assert sorted(tasks) == ["tiny_rowsum", "tiny_scale"]
    scale, rowsum = tasks["tiny_scale"], tasks["tiny_rowsum"]
    assert scale.licence == "Apache-2.0" and scale.metadata["upstream_repo"] == "amdkv/test-fixtures"
    assert scale.metadata["benchmark_tests"] == ["test_scale"]
    assert rowsum.metadata["benchmark_tests"] == ["test_row_sum"]  # called under `if __name__ == "__main__"`
    assert rowsum.metadata["difficulty"] == 2
    ins = scale.metadata["instruction"]
    assert ins["simp_instru"].startswith("Scale a 1-D tensor") and ins["comp_prompt"].startswith("[fixture preamble, comp]")
    assert "scale" in scale.metadata["api_names"] and scale.metadata["fresh_inputs"] is True
    assert scale.metadata["golden"] is False and scale.metadata["reference_failure"] == "unverifiable"
    assert scale.metadata["reference_candidate"].rstrip().endswith("return out") and SEP not in scale.metadata["reference_candidate"]
    suffix = scale.metadata["candidate_program"]["suffix"]
    assert "_amdkv_device" in suffix and "result_gold = test_scale()" not in suffix and "print(" not in suffix
    assert [c.name for c in scale.cases] == ["benchmark_tests"] and scale.cases[0].is_correctness
    assert not scale.cases[0].is_performance  # the tests mix input building with kernel calls: not timed


def test_generated_task_source_does_not_depend_on_the_cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hashes = []
    for name in ("a", "b"):
        monkeypatch.setenv("AMDKV_CACHE_DIR", str(tmp_path / name))
        task = load_suite(f"tritonbench-g:{DATA / 'tritonbench'}?only=tiny_scale.py")[0]
        assert str(tmp_path) not in task.source and Path(task.path).is_relative_to(tmp_path / name)
        hashes.append(task.source_hash)
    assert hashes[0] == hashes[1]


def test_geak_eval_layout_without_index_loads_without_instructions(tmp_path: Path) -> None:
    folder = tmp_path / "geak_eval" / "data" / "TritonBench" / "data" / "TritonBench_G_v1"
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    (folder / "tiny_scale.py").write_text((DATA / "tritonbench/data/TritonBench_G_v1/tiny_scale.py").read_text())
    tasks = load_suite(f"tritonbench-g:{tmp_path}")
    assert [t.id for t in tasks] == ["tiny_scale"] and tasks[0].metadata["instruction"] is None
    indexed = load_suite(f"tritonbench-g:{tmp_path}?index={DATA / 'tritonbench/data/TritonBench_G_v1.json'}")
    assert indexed[0].metadata["instruction"]["simp_instru"].startswith("Scale")


# --------------------------------------------------------------------------------------- ROCmBench
def test_rocmbench_runs_correctness_tests_only_and_flags_fixture_tests() -> None:
    tasks = {t.id: t for t in load_suite(f"rocmbench:{DATA / 'rocm'}")}
    add, fixture = tasks["test_tiny_add"], tasks["test_tiny_fixture"]
    assert add.metadata["benchmark_tests"] == ["test_add", "test_never_runs", "test_self_skips"]
    assert add.licence == "LicenseRef-AMD-all-rights-reserved" and add.metadata["redistributable"] is False
    assert add.metadata["benchmark_rule"]["atol"] == 1e-2 and add.metadata["benchmark_rule"]["check_dtype"]
    assert {"pytest", "numpy", "torch.testing"} <= set(add.metadata["candidate_program"]["allowed_imports"])
    suffix = add.metadata["candidate_program"]["suffix"]
    assert "from geak_eval" not in suffix and "PytestBenchmarker, do_bench_config = (None, None)" in suffix
    assert fixture.metadata["unverifiable"]["*"]["reason"] == "benchmark_test_fixture"
    assert "scratch_dir" in fixture.metadata["unverifiable"]["*"]["why"]


def test_rocmbench_instructions_option(tmp_path: Path) -> None:
    ins = tmp_path / "ins.json"
    ins.write_text('[{"instruction": "Add two vectors.", "label": "x", "file": "test_tiny_add.py"}]')
    tasks = {t.id: t for t in load_suite(f"rocmbench:{DATA / 'rocm'}?instructions={ins}")}
    assert tasks["test_tiny_add"].metadata["instruction"] == {"instruction": "Add two vectors."}
    assert tasks["test_tiny_fixture"].metadata["instruction"] is None


# ------------------------------------------------------------------------------------- bad input
def test_bad_specs_say_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="does not exist"):
        load_suite(f"tritonbench-g:{tmp_path / 'nowhere'}")
    with pytest.raises(BadInputError, match="unknown option"):
        load_suite(f"rocmbench:{DATA / 'rocm'}?instruction=x")
    with pytest.raises(BadInputError, match="no KernelBench problems"):
        load_suite(f"kernelbench:{tmp_path}")
    (tmp_path / "no_separator.py").write_text("import torch\n\ndef test_x():\n    return {}\n")
    with pytest.raises(TaskFormatError, match="no separator line"):
        load_suite(f"tritonbench-g:{tmp_path}")
    with pytest.raises(BadInputError, match="kernelbench:"):
        load_suite("/definitely/not/here")  # the generic message lists the loaders


# ------------------------------------------------------------------------------- test-code rewrite
def test_transform_maps_devices_and_drops_import_time_runs() -> None:
    src = (f"x = torch.ones(3, device='cuda')\ny = x.cuda()\ntorch.cuda.synchronize()\nname = f'on cuda'\n"
           "def test_a():\n    return {'r': torch.zeros(2, device='cuda:0')}\n"
           "result_gold = test_a()\nprint(result_gold)\n")
    out = testcode.transform(src, "tritonbench")
    tree = ast.parse(out)
    assert "'cuda'" not in out and "'cuda:0'" not in out and ".cuda()" not in out
    assert "x.to(_amdkv_device)" in out and "_amdkv_synchronize()" in out and "f'on cuda'" in out
    assert not any(isinstance(n, ast.Expr) and "print" in ast.unparse(n) for n in tree.body)
    assert "result_gold" not in out
    info = testcode.analyse(src, "tritonbench")
    assert info.tests == ("test_a",) and info.unsupported is None


def test_analyse_flags_process_spawning_tests() -> None:
    src = "import multiprocessing\n\ndef test_x(request):\n    multiprocessing.Process(target=print).start()\n"
    info = testcode.analyse(src, "pytest")
    assert info.unsupported[0] == "benchmark_test_spawns_processes"


def test_pytest_parametrize_expansion_matches_pytest_order_ids_and_skips() -> None:
    pytest_mod = pytest
    calls: list[tuple] = []

    @pytest_mod.mark.parametrize("a,b", [(1, "x"), pytest_mod.param(2, "y", id="second"),
                                         pytest_mod.param(3, "z", marks=pytest_mod.mark.skip)])
    @pytest_mod.mark.parametrize("dtype", ["float16", None])
    def test_f(a, b, dtype, request):
        calls.append((a, b, dtype, request.node.name))

    ns: dict = {}
    collected = harness._pytest_calls(test_f, ns)
    # pytest applies the decorator nearest the function first: its values vary slowest
    assert [c["__node_name__"] for c in collected] == [
        "test_f[float16-1-x]", "test_f[float16-second]", "test_f[None-1-x]", "test_f[None-second]"]
    for c in collected:
        assert harness._call_pytest(test_f, c)
    assert calls[0] == (1, "x", "float16", "test_f[float16-1-x]")

    @pytest_mod.mark.skipif(True, reason="never")
    def test_g():
        raise AssertionError

    assert harness._pytest_calls(test_g, ns) == []

    def test_h():
        pytest_mod.skip("skips itself")

    assert harness._call_pytest(test_h, {"__node_name__": "test_h"}) is False


def test_a_reference_whose_every_test_skips_says_why() -> None:
    """On the H100 of 2026-12-05 ROCmBench's test_gemm_no_scf skipped every call in amdkv's harness while
    GEAK-eval's ran them, and the verdict only said "every test skipped": now it names each skip."""
    import torch

    pytest_mod = pytest

    # Two planted benchmark tests, run by amdkv's harness (pytest never collects nested functions): one
    # skipped by its mark, as test_gemm_no_scf's capability mark, one that skips itself at run time.
    @pytest_mod.mark.parametrize("n", [1, 2])
    @pytest_mod.mark.skipif(True, reason="Requires compute capability >= 9")
    def test_cap(n, request):
        raise AssertionError("the skipif mark must keep the harness from calling this")

    @pytest_mod.mark.parametrize("n", [1, 2])
    def test_self(n):
        pytest_mod.skip(f"NUM_CTAS > 1 ({n})")  # what the harness must report, per call

    ns = {"test_cap": test_cap, "test_self": test_self}
    spec = {"style": "pytest", "tests": ["test_cap", "test_self"], "task_id": "t"}
    with pytest.raises(harness.BenchmarkTestsSkipped) as caught:
        harness.run_tests(ns, torch.tensor([7]), spec, reference=True)
    said = str(caught.value)
    assert "every test of t skipped" in said and "test_cap: skipif(Requires compute capability >= 9)" in said
    assert "test_self: pytest.skip(NUM_CTAS > 1 (1))" in said and "(2))" in said
    assert harness.run_tests(ns, torch.tensor([7]), spec, reference=False) == ()  # a candidate is not told


def test_parametrize_values_from_a_one_shot_iterator_serve_every_trial() -> None:
    """ROCmBench's test_gemm_no_scf parametrises with `itertools.chain(...)`, an iterator pytest reads
    once at collection. The harness expands the marks on every forward (one per seeded trial): the
    second trial found the iterator spent, had no calls, and the reference failed as "every test
    skipped" on the H100 of 2026-12-05, where GEAK-eval's harness ran all 32."""
    import itertools

    import torch

    @pytest.mark.parametrize("n,scale", itertools.chain(*[[(n, s) for n in (1, 2, 3)] for s in (1.0, 2.0)]))
    def test_chain(n, scale, request):
        ns["result_gold"][request.node.name] = torch.full((n,), scale)

    ns = {"test_chain": test_chain}
    spec = {"style": "pytest", "tests": ["test_chain"], "task_id": "t"}
    first = harness.run_tests(ns, torch.tensor([7]), spec, reference=True)
    second = harness.run_tests(ns, torch.tensor([8]), spec, reference=True)
    assert len(first) == len(second) == 6
    assert all(torch.equal(a, b) for a, b in zip(first, second))


def test_harness_leaves_are_plain_and_ordered() -> None:
    import numpy as np
    import torch

    nt = types.SimpleNamespace(x=1)
    leaves = harness._leaves({"a": torch.ones(2), "b": (torch.Size([2, 3]), np.arange(3)), "c": torch.float16, "d": nt})
    assert torch.equal(leaves[0], torch.ones(2)) and leaves[1:3] == [2, 3]
    assert torch.equal(leaves[3], torch.arange(3)) and leaves[4] == "torch.float16" and leaves[5] == "SimpleNamespace"


# --------------------------------------------------------------------------------- program rules
def test_program_findings_refuse_calling_the_tests_and_aliasing_library_ops() -> None:
    spec = {"test_names": ["result_gold", "set_seed", "reference_impl", "np"]}
    src = ("import torch\nimport functools\n\ndef scale(x, f):\n    return reference_impl(x, f)\n\n"
           "add = torch.add\nmul = functools.partial(torch.mul)\n\nclass Ops:\n    relu = torch.nn.functional.relu\n")
    codes = [(f.code, f.line) for f in program_findings(spec, src)]
    assert ("uses_benchmark_test", 5) in codes
    assert [line for code, line in codes if code == "torch_fallback"] == [7, 8, 11]
    own = "import numpy as np\n\ndef f(x):\n    return np.zeros(1)\n"
    assert not [f for f in program_findings(spec, own) if f.code == "uses_benchmark_test"]  # binds np itself


def test_task_allowed_imports_extend_the_list_but_never_to_process_modules() -> None:
    spec = {"allowed_imports": ["pytest", "numpy", "torch.testing", "subprocess", "torch._C"]}
    allowed = allowed_imports(spec)
    assert allowed == {"pytest", "numpy", "torch.testing"}
    src = "import pytest\nimport numpy as np\nfrom torch.testing import assert_close\nimport subprocess\n"
    codes = [f.code for f in check_source(src, extra_imports=allowed)]
    assert codes.count("import_not_allowed") == 1  # subprocess only
    assert codes.count("import_not_allowed") < [f.code for f in check_source(src)].count("import_not_allowed")


@pytest.mark.parametrize("line", [
    "import torch._C", "from triton._C.libtriton import interpreter", "import triton.runtime.interpreter as i",
    "from torch.utils._python_dispatch import _pop_mode_temporarily", "x = triton.runtime.interpreter.GridExecutor",
])
def test_a_broad_allowed_import_never_reopens_a_refused_module(line: str) -> None:
    """Every benchmark kernel file imports `torch` and `triton`: allowing them must not allow
    `torch._C` or the interpreter the bounds checker patches (interpreter_bounds.py)."""
    allowed = allowed_imports({"allowed_imports": ["torch", "triton", "triton.runtime", "torch.utils",
                                                   "triton._C", "triton.runtime.interpreter"]})
    assert "triton._C" not in allowed and "triton.runtime.interpreter" not in allowed
    src = "import torch\nimport triton\n" + line + "\n"
    assert "import_not_allowed" in [f.code for f in check_source(src, extra_imports=allowed)]


def test_candidate_part_drops_the_tests_and_keeps_line_numbers() -> None:
    src = ("import torch\n\ndef scale(x):\n    return x\n\n@some_decorator\ndef test_scale():\n    return scale(1)\n\n"
           "result_gold = test_scale()\nif __name__ == '__main__':\n    print(result_gold)\nX = 1\n" + SEP + "\nprint(2)\n")
    out = candidate_part({}, src).split("\n")
    assert out[:4] == ["import torch", "", "def scale(x):", "    return x"]
    assert out[5:12] == [""] * 7 and out[12] == "X = 1" and len(out) == 13
    assert candidate_part({}, "def broken(:\n") == "def broken(:\n"
