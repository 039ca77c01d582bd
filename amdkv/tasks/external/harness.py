"""Runs a kernel-file benchmark's own tests inside amdkv's verifier (reference and candidate alike).

A TritonBench-G or ROCmBench task is a program: kernel code, then the benchmark's tests (adapted by
`testcode.transform`), then an adapter that defines `ModelNew` (verify/program.py). The task file
that the loader generates (`kernel_file.py`) defines `Model` as the same program run with the
benchmark's reference kernel, so reference and candidate go through exactly this code:

    forward(seed) -> seed torch/random/numpy -> run every test (each parametrisation of a pytest
                     test) -> the tests' outputs, flattened to a tuple of leaves

- `seed` is a one-element int64 tensor that the verifier draws per trial from its seeded RNG, so
  each trial re-runs the tests with fresh random inputs wherever the tests draw them (GEAK-eval's
  `set_seed()` helper is rebound to seed with the trial's seed instead of a constant 42).
- Each test call is seeded on its own (trial seed + call index), so one test's random draws do not
  depend on how many random numbers an earlier test's kernel used.
- The tests run with autograd on (27 TritonBench-G tests call `backward`); the verifier calls
  forward under `torch.no_grad()`.
- pytest-style tests (ROCmBench): `parametrize` marks are expanded as pytest does (ids joined with
  '-', earlier marks varying slowest), `skip`/`skipif` marks and `pytest.skip()` skip a call,
  `request.node.name` is `test_x[id-id]`. Their outputs are the module's `result_gold` dict, reset
  per forward, in sorted key order.
- TritonBench-G tests return their outputs (a dict of results): those, in order, are the outputs.
- A reference run in which every test skipped raises: comparing nothing with nothing would pass any
  candidate.

Imported inside worker processes: standard library and torch at module level (numpy and pytest only
where the tests themselves use them).
"""

from __future__ import annotations

import importlib.util
import os
import random
import sys
from pathlib import Path
from typing import Any, Callable, Mapping

import torch

SEED_BOUND = 2 ** 31 - 1
_PROGRAMS: dict[str, Any] = {}   # reference programs imported in this process, by path


class BenchmarkTestsSkipped(RuntimeError):
    """Every test of the benchmark skipped here: there is nothing to compare."""


# ------------------------------------------------------------------------------- the task file side
def seed_inputs() -> list[torch.Tensor]:
    """The task's inputs: one seed per trial, drawn from the verifier's seeded RNG."""
    return [torch.randint(0, SEED_BOUND, (1,), dtype=torch.int64)]


def reference_model(task_file: str, program_name: str) -> type:
    """`Model` of a generated task file: the program built from the benchmark's own kernel (the
    same program a candidate's kernel goes into), which lies beside the task file, imported on first
    use in the reference worker. (Named relative to the task file, so the task's source, and with it
    every cache key, does not depend on where the cache dir is.)"""
    program_path = os.path.join(os.path.dirname(os.path.abspath(task_file)), program_name)

    class Model(torch.nn.Module):
        def forward(self, seed: torch.Tensor) -> tuple[Any, ...]:
            module = _PROGRAMS.get(program_path)
            if module is None:
                module = _PROGRAMS[program_path] = _import_program(program_path)
            return module.ModelNew.run_reference(seed)

    return Model


def _import_program(path: str) -> Any:
    resolved = str(Path(path).resolve())
    name = f"amdkv_reference_program_{abs(hash(resolved))}"
    spec = importlib.util.spec_from_file_location(name, resolved)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # @triton.jit reads the source through inspect
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------------------- the program side
def device_name() -> str:
    """The device the tests' 'cuda' strings mean here: cpu under the Triton interpreter."""
    if os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available():
        return "cpu"
    return "cuda"


def synchronize() -> None:
    if device_name() == "cuda":
        torch.cuda.synchronize()


def candidate_model(namespace: dict[str, Any], spec: Mapping[str, Any]) -> type:
    """`ModelNew` of a program: runs the benchmark's tests found in `namespace` (the program's globals)."""

    class ModelNew(torch.nn.Module):
        def forward(self, seed: torch.Tensor) -> tuple[Any, ...]:
            return run_tests(namespace, seed, spec, reference=False)

        @staticmethod
        def run_reference(seed: torch.Tensor) -> tuple[Any, ...]:
            return run_tests(namespace, seed, spec, reference=True)

    return ModelNew


def run_tests(ns: dict[str, Any], seed: torch.Tensor, spec: Mapping[str, Any], *, reference: bool) -> tuple[Any, ...]:
    base = int(seed.reshape(-1)[0].item())
    outputs: list[Any] = []
    calls = 0
    skips: list[str] = []  # why each skipped call skipped: said when every call did
    with torch.enable_grad():
        if spec["style"] == "pytest":
            ns["result_gold"] = {}
            current = {"seed": base}
            if callable(ns.get("set_seed")):
                ns["set_seed"] = lambda *a, **k: _seed_all(current["seed"])
            for name in spec["tests"]:
                for kwargs in _pytest_calls(ns[name], ns, skips):
                    current["seed"] = (base + calls) % SEED_BOUND
                    calls += 1
                    _seed_all(current["seed"])
                    if not _call_pytest(ns[name], kwargs, skips):
                        calls -= 1
            gold = ns.get("result_gold") or {}
            for key in sorted(gold):
                outputs.append(_leaves(gold[key]))
        else:
            for name in spec["tests"]:
                _seed_all((base + calls) % SEED_BOUND)
                calls += 1
                outputs.append(_leaves(ns[name]()))
    if reference and calls == 0:
        reasons = sorted(set(skips))
        said = "; ".join(reasons[:6]) + (f"; ... ({len(reasons) - 6} more)" if len(reasons) > 6 else "")
        raise BenchmarkTestsSkipped(f"every test of {spec.get('task_id', 'this task')} skipped on this platform"
                                    + (f" ({said})" if said else ""))
    flat: list[Any] = []
    for leaves in outputs:
        flat.extend(leaves)
    return tuple(flat)


def _seed_all(seed: int) -> None:
    torch.manual_seed(seed)
    random.seed(seed)
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed(seed)


def _leaves(value: Any) -> list[Any]:
    """A test's result as flat leaves the verifier can save and compare: tensors, numbers, strings,
    None. Dicts in their key order, sequences in order, numpy arrays as tensors, torch.Size as ints,
    dtypes/devices as text, anything else as its type's name (so ref and candidate agree on it)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in _leaves(v)]
    if isinstance(value, (list, tuple)):  # torch.Size and namedtuples included
        return [leaf for v in value for leaf in _leaves(v)]
    if value is None or isinstance(value, (bool, int, float, str)):
        return [value]
    if isinstance(value, (torch.dtype, torch.device)):
        return [str(value)]
    if type(value).__module__ == "numpy":
        return [torch.as_tensor(value)]
    return [type(value).__name__]


# ------------------------------------------------------------------------------- pytest semantics
class _Node:
    def __init__(self, name: str) -> None:
        self.name = name


class _Request:
    """The part of pytest's `request` fixture the benchmark's tests use (`request.node.name`)."""

    def __init__(self, name: str) -> None:
        self.node = _Node(name)


def _idval(value: Any, argname: str, index: int) -> str:
    """pytest's id for one parameter value."""
    if isinstance(value, str):
        return value.encode("unicode_escape").decode("ascii")
    if value is None or isinstance(value, (bool, int, float, complex)):
        return str(value)
    if isinstance(value, type) or callable(value) and hasattr(value, "__name__"):
        return getattr(value, "__name__", f"{argname}{index}")
    return f"{argname}{index}"


def _is_param_set(value: Any) -> bool:
    return isinstance(value, tuple) and all(hasattr(value, a) for a in ("values", "marks", "id"))


def _skip_marks(marks: list[Any], ns: dict[str, Any]) -> str | None:
    """Why the marks skip a call ("skipif(<reason>)"), or None when they do not."""
    for m in marks:
        if m.name == "skip":
            return f"skip({m.kwargs.get('reason') or (m.args[0] if m.args else '')})"
        if m.name == "skipif":
            conds = list(m.args) or [m.kwargs.get("condition", False)]
            if any(eval(c, ns) if isinstance(c, str) else bool(c) for c in conds):  # noqa: S307 - trusted test code
                return f"skipif({m.kwargs.get('reason', '')})"
    return None


# id(mark) -> (the mark, its argvalues as a list). In this module, not in the tests' namespace, which
# the candidate's code shares: nothing it defines can reach the values the harness expands.
_PARAM_VALUES: dict[int, tuple[Any, list[Any]]] = {}


def _argvalues(mark: Any) -> list[Any]:
    """A parametrize mark's values as a list, the same list every time. pytest reads them once, at
    collection; the harness expands the marks on every forward (one per seeded trial), and a test
    that passes a one-shot iterator (ROCmBench's test_gemm_no_scf: `itertools.chain(...)`) gave its
    calls on the first trial and none on the next, which read as "every test skipped" (2026-12-05)."""
    key = id(mark)
    if key not in _PARAM_VALUES:
        raw = mark.args[1] if len(mark.args) > 1 else mark.kwargs["argvalues"]
        _PARAM_VALUES[key] = (mark, list(raw))  # the mark is kept so that its id is never reused
    return _PARAM_VALUES[key][1]


def _pytest_calls(fn: Callable[..., Any], ns: dict[str, Any], skips: list[str] | None = None) -> list[dict[str, Any]]:
    """One kwargs dict per collected call of a pytest test function (skipped ones left out, their
    reasons appended to `skips`)."""
    skips = [] if skips is None else skips
    marks = list(getattr(fn, "pytestmark", []))
    why = _skip_marks(marks, ns)
    if why:
        skips.append(f"{fn.__name__}: {why}")
        return []
    calls: list[tuple[dict[str, Any], list[str], list[Any]]] = [({}, [], [])]
    for mark in marks:
        if mark.name != "parametrize":
            continue
        argnames = mark.args[0] if mark.args else mark.kwargs["argnames"]
        argvalues = _argvalues(mark)
        names = [n.strip() for n in argnames.split(",") if n.strip()] if isinstance(argnames, str) else list(argnames)
        ids = mark.kwargs.get("ids")
        expanded = []
        for params, id_parts, pmarks in calls:
            for index, raw in enumerate(argvalues):
                values, extra_marks, explicit = (tuple(raw.values), list(raw.marks), raw.id) if _is_param_set(raw) \
                    else ((raw,) if len(names) == 1 else tuple(raw), [], None)
                if explicit is None and isinstance(ids, (list, tuple)) and index < len(ids):
                    explicit = ids[index]
                label = explicit if explicit is not None else "-".join(
                    _idval(v, n, index) for v, n in zip(values, names))
                expanded.append(({**params, **dict(zip(names, values))}, id_parts + [str(label)], pmarks + extra_marks))
        calls = expanded
    out = []
    for params, id_parts, pmarks in calls:
        why = _skip_marks(pmarks, ns)
        if why:
            skips.append(f"{fn.__name__}: {why}")
            continue
        name = fn.__name__ + (f"[{'-'.join(id_parts)}]" if id_parts else "")
        out.append({**params, "__node_name__": name})
    return out


def _call_pytest(fn: Callable[..., Any], kwargs: dict[str, Any], skips: list[str] | None = None) -> bool:
    """Call one collected test; False when it skipped itself (`pytest.skip()`; its message appended
    to `skips`)."""
    import inspect

    kwargs = dict(kwargs)
    node_name = kwargs.pop("__node_name__")
    if "request" in inspect.signature(fn).parameters:
        kwargs["request"] = _Request(node_name)
    try:
        fn(**kwargs)
    except BaseException as exc:  # noqa: BLE001 - only pytest's skip outcome is swallowed
        outcomes = sys.modules.get("_pytest.outcomes")  # imported by the tests' own `import pytest`
        if outcomes is not None and isinstance(exc, outcomes.Skipped):
            if skips is not None:
                skips.append(f"{fn.__name__}: pytest.skip({str(exc.msg if hasattr(exc, 'msg') else exc)[:120]})")
            return False
        raise
    return True
