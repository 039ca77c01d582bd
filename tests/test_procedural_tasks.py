"""Procedural tasks: the grammar, held-out compositions, the suite spec, materialisation, and the
checks (fast path on 50 tasks, the real verifier on a stratified dozen), all on the cpu platform.

The 5,000-task run is a benchmark (benchmarks/procedural_checks.py, numbers in
docs/procedural_tasks.md); this file keeps to what CI can afford on 2 cores.
"""

from __future__ import annotations

import collections
import json
import os
import re
from pathlib import Path

import pytest
from toolchain_support import require_hipcc
from click.testing import CliRunner

from amdkv.cli import main
from amdkv.errors import BadInputError
from amdkv.tasks.procedural import checks, grammar, load_procedural, materialise, parse, sampler, suite_paths
from amdkv.tasks.procedural.codegen_hip import hip_supported
from amdkv.tasks.procedural.layout import Layout
from amdkv.tasks.suites import load_suite

SPEC = "procedural:all?n=45"  # 45 train + 4 heldout tasks


@pytest.fixture(scope="module")
def suite_tasks():
    return load_suite(SPEC)


# ------------------------------------------------------------------------------------- grammar
def test_generation_is_deterministic_and_prefix_stable():
    short = list(sampler.iter_tasks(0, "train", 40))
    long = list(sampler.iter_tasks(0, "train", 300))
    assert short == long[:40]
    again = list(sampler.iter_tasks(0, "train", 40))
    assert [s.composition.key for s in again] == [s.composition.key for s in short]
    other_seed = list(sampler.iter_tasks(1, "train", 40))
    assert [s.composition.key for s in other_seed] != [s.composition.key for s in short]


def test_heldout_compositions_appear_in_no_train_task():
    """The held-out split measures generalisation: none of its compositions (nor any composition
    containing a held-out pair) is in train, while every piece of every held-out pair is."""
    train = list(sampler.iter_tasks(0, "train", 5000))
    heldout = list(sampler.iter_tasks(0, "heldout", 500))
    held_pairs = set(grammar.HELDOUT_CORE_ACTIVATION) | set(grammar.HELDOUT_PROLOGUE_CORE)
    assert all(not (t.composition.pairs() & held_pairs) for t in train)
    assert all(t.composition.pairs() & held_pairs for t in heldout)
    assert not {t.composition.key for t in train} & {t.composition.key for t in heldout}
    # every held-out pair is drawn, and its two pieces are each seen in training
    assert {p for t in heldout for p in t.composition.heldout_pairs} == held_pairs
    train_cores = {t.composition.core for t in train}
    train_acts = {a for t in train for a in t.composition.activations}
    train_steps = {s.key for t in train for s in t.composition.prologue}
    for a, b in grammar.HELDOUT_CORE_ACTIVATION:
        assert a in train_cores and b in train_acts
    for a, b in grammar.HELDOUT_PROLOGUE_CORE:
        assert a in train_steps and b in train_cores


def test_splits_have_no_duplicate_tasks_and_cover_the_grammar():
    train = list(sampler.iter_tasks(0, "train", 2000))
    keys = [(t.composition.key, t.dtype) for t in train]
    assert len(keys) == len(set(keys))
    assert {t.composition.core for t in train} == set(grammar.CORES)
    assert {t.dtype for t in train} == set(grammar.DTYPES)
    assert {a for t in train for a in t.composition.activations} == set(grammar.ACTIVATIONS)
    assert {s.operand for t in train for s in t.composition.prologue} == set(grammar.OPERAND_KINDS) | {None}
    assert any(t.composition.cast for t in train) and any(t.composition.core_params for t in train)
    assert all(grammar.degenerate_reason(t.composition, list(t.scalars)) is None for t in train)


def test_degeneracy_rules_refuse_constant_compositions():
    step = grammar.Step
    relu_of_log_softmax = grammar.Composition((), "log_softmax", False, ("relu",), False)
    assert "relu" in grammar.degenerate_reason(relu_of_log_softmax, [])
    tanh_of_sum = grammar.Composition((step("abs"),), "sum", False, ("tanh",), False)
    assert grammar.degenerate_reason(tanh_of_sum, []) is not None
    min_below_abs = grammar.Composition((step("abs"), step("minimum", "scalar")), "none", False, (), False)
    assert grammar.degenerate_reason(min_below_abs, [-0.5]) is not None
    assert grammar.degenerate_reason(min_below_abs, [0.5]) is None
    assert grammar.degenerate_reason(grammar.Composition((), "none", False, (), False), []) is not None


# ---------------------------------------------------------------------------------------- spec
@pytest.mark.parametrize("spec,split,n,seed", [
    ("procedural:train", "train", 1000, 0), ("procedural:heldout?n=7", "heldout", 7, 0),
    ("procedural:all?n=20&seed=3", "all", 20, 3), ("procedural:train?seed=5&n=1", "train", 1, 5)])
def test_spec_parsing(spec, split, n, seed):
    ps = parse(spec)
    assert (ps.split, ps.n, ps.seed) == (split, n, seed)


@pytest.mark.parametrize("spec,words", [
    ("procedural:bogus", "unknown procedural split"), ("procedural:train?n=0", "out of range"),
    ("procedural:train?n=ten", "not an integer"), ("procedural:train?n=1000000", "out of range"),
    ("procedural:train?size=5", "unknown option"), ("procedural:train?n=1&n=2", "given twice"),
    ("procedural:train?seed=-1", "out of range"), ("procedural:train?n", "cannot read the options")])
def test_bad_specs_are_clear_errors(spec, words):
    with pytest.raises(BadInputError) as err:
        load_suite(spec)
    assert words in str(err.value) and "procedural:<split>" in str(err.value)


def test_bad_spec_on_the_command_line_exits_2():
    res = CliRunner().invoke(main, ["tasks", "list", "--from", "procedural:train?n=abc"])
    assert res.exit_code == 2 and "not an integer" in res.output


# ------------------------------------------------------------------------------ materialisation
def test_suite_files_metadata_and_cases(suite_tasks):
    assert len(suite_tasks) == 49
    assert collections.Counter(t.split for t in suite_tasks) == {"train": 45, "heldout": 4}
    version = materialise.generator_version()
    for t in suite_tasks:
        m = t.metadata
        assert t.licence == "Apache-2.0" and t.suite == "procedural" and version in t.provenance
        assert m["generator"] == {"version": version, "seed": 0, "split": t.split, "index": m["generator"]["index"]}
        assert m["suite_version"] == f"procedural-{version}-seed0"
        assert m["composition"] and t.op_family and t.level in (1, 2) and t.dtypes
        assert bool(m["heldout_pairs"]) == (t.split == "heldout")
        assert len(t.cases_tagged("correctness")) >= 2 and len(t.cases_tagged("performance")) >= 1
        assert Path(checks.solution_file(t, "triton")).is_file()
        assert (checks.solution_file(t, "hip") is not None) == (m["template"] != "matmul")
    root = materialise.suite_root(0)
    assert Path(suite_tasks[0].path).is_relative_to(root) and version in str(root)


def test_materialising_again_rewrites_nothing(suite_tasks):
    paths = suite_paths("procedural:train?n=10")
    stamps = [os.stat(p).st_mtime_ns for p in paths]
    assert [str(p) for p in suite_paths("procedural:train?n=10")] == [str(p) for p in paths]
    assert [os.stat(p).st_mtime_ns for p in paths] == stamps
    assert [t.id for t in load_procedural("procedural:train?n=10")] == [t.id for t in suite_tasks[:10]]


def test_cli_lists_a_procedural_suite():
    res = CliRunner().invoke(main, ["tasks", "list", "--from", "procedural:heldout?n=3", "--split", "heldout", "--json"])
    assert res.exit_code == 0, res.output
    listed = json.loads(res.output)["tasks"]
    assert [t["id"] for t in listed] == [f"proc_s0_heldout_{i:05d}" for i in range(3)]


def test_hip_solutions_where_the_template_allows(suite_tasks):
    for spec in sampler.iter_tasks(0, "train", 60):
        files = materialise.render(spec)
        assert ("hip" in files) == hip_supported(Layout(spec)) == (spec.composition.template != "matmul")
        if "hip" in files:
            src = files["hip"]
            assert 'os.environ["CXX"] = "hipcc"' in src and "__global__ void fused_kernel" in src
            assert "warpSize" in src and 'functions=["run"]' in src


# -------------------------------------------------------------------------------------- checks
def test_fast_checks_pass_on_50_tasks(suite_tasks):
    results = checks.check_tasks([t.path for t in suite_tasks], jobs=2, trials=1)
    bad = [(r.task_id, r.reason, r.message[:300]) for r in results if not r.ok]
    assert not bad, bad
    assert {r.path for r in results} == {checks.FAST} and all(r.platform == "cpu" for r in results)
    assert {(r.template, r.dtype) for r in results} == {(tp, d) for tp in ("elementwise", "rowwise", "matmul")
                                                        for d in ("fp32", "fp16")}


def test_verifier_accepts_a_stratified_dozen(suite_tasks):
    """The real verifier (sandboxed workers, every check on) on 2 tasks of each template x dtype."""
    sample = checks.stratified_sample(suite_tasks, per_stratum=2)
    assert len(sample) == 12
    results = checks.verify_sample(sample, device="cpu", jobs=2)
    bad = [(r.task_id, r.stage, r.reason, r.message[-500:]) for r in results if not r.ok]
    assert not bad, bad
    assert all(r.path == checks.VERIFIER and r.platform == "cpu" for r in results)


def _copy_task(task, tmp_path: Path, forward_edit: tuple[str, str] | None = None,
               solution_edit: tuple[str, str] | None = None) -> Path:
    """A copy of a procedural task (and its solution) with one edit, its METADATA pointing at the copy."""
    src = Path(task.path).read_text()
    sol = Path(checks.solution_file(task)).read_text()
    if forward_edit:
        assert forward_edit[0] in src
        src = src.replace(forward_edit[0], forward_edit[1], 1)
    if solution_edit:
        assert solution_edit[0] in sol
        sol = sol.replace(solution_edit[0], solution_edit[1], 1)
    (tmp_path / "solution.py").write_text(sol)
    src = re.sub(r"'triton': '[^']*'", "'triton': 'solution.py'", src)
    path = tmp_path / f"{task.id}.py"
    path.write_text(src)
    return path


def test_fast_checks_catch_broken_solutions_and_degenerate_references(suite_tasks, tmp_path):
    task = next(t for t in suite_tasks if t.metadata["template"] == "elementwise")
    cases = {"wrong": (None, ("v.to(out_ptr.dtype.element_ty)", "(v * 1.01).to(out_ptr.dtype.element_ty)")),
             "torch": (None, ("        return out", "        return out + 0")),
             "zeros": (("        return t\n", "        return t * 0\n"), None)}
    paths = {}
    for name, (fwd, sol) in cases.items():
        (tmp_path / name).mkdir()
        paths[name] = _copy_task(task, tmp_path / name, forward_edit=fwd, solution_edit=sol)
    results = dict(zip(paths, checks.check_tasks(list(paths.values()), jobs=1, trials=1)))
    assert (results["wrong"].stage, results["wrong"].reason) == ("solution", "value_mismatch")
    assert results["torch"].stage == "solution" and results["torch"].reason in ("torch_compute_in_forward",
                                                                                   "static:torch_fallback")
    assert (results["zeros"].stage, results["zeros"].reason) == ("reference", "all_zero_output")


def test_tasks_check_command(tmp_path):
    out = tmp_path / "check.json"
    res = CliRunner().invoke(main, ["tasks", "check", "procedural:train?n=4", "--verify-sample", "0", "--json",
                                    "--out", str(out)])
    assert res.exit_code == 0, res.output[-2000:]
    summary = json.loads(res.stdout)
    assert summary["fast"]["checked"] == summary["fast"]["ok"] == 4 and "verifier" not in summary
    assert len(json.loads(out.read_text())["results"]) == 4
    res = CliRunner().invoke(main, ["tasks", "check", "builtin:all"])
    assert res.exit_code == 2 and "procedural" in res.output


def test_demo_runs_a_procedural_suite():
    res = CliRunner().invoke(main, ["demo", "--device", "cpu", "--from", "procedural:train?n=2", "--json"])
    assert res.exit_code == 0, res.output[-2000:]
    verdicts = json.loads(res.output[res.output.index("["):])
    assert [v["status"] for v in verdicts] == ["ok", "ok"]
    assert all(v["env"]["suite_version"].startswith("procedural-") for v in verdicts)


@pytest.mark.slow
def test_hip_solutions_compile_for_gfx942(suite_tasks):
    """Templated HIP solutions compile for MI300X with the real hipcc 7 (one per code family x dtype)."""
    from amdkv.verify.backends.hip import verify_hip_compile_only

    require_hipcc("gfx942")
    family = {"none": "elementwise", "sum": "sum", "mean": "sum", "amax": "extreme", "amin": "extreme",
              "softmax": "softmax", "log_softmax": "softmax", "layernorm": "layernorm", "rmsnorm": "rmsnorm"}
    picked: dict[tuple[str, str], object] = {}
    for t in load_procedural("procedural:train?n=300"):  # one per HIP code family x dtype, params if any
        core = t.metadata["composition"].split(" | ")[1]
        key = (family[core.split("+")[0]], t.dtypes[0]) if checks.solution_file(t, "hip") else None
        if key and (key not in picked or ("+params" in core and "+params" not in picked[key].metadata["composition"])):
            picked[key] = t
    assert len(picked) == 12
    for t in picked.values():
        v = verify_hip_compile_only(t.path, checks.solution_file(t, "hip"))
        assert v["compiled"], (t.id, v["diagnostics"][-1500:])
