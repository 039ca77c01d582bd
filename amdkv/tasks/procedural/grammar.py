"""The grammar procedural tasks are composed from (docs/procedural_tasks.md).

A composition is `prologue -> core -> epilogue`:

- **prologue**: 0-2 elementwise steps on the input `x`, each a unary op (abs, neg, square) or a
  binary op (add, sub, mul, maximum, minimum) with an operand that broadcasts against `x`: a
  scalar (an `__init__` argument), a row vector (one value per column, shape `(N,)`), a column
  vector (one value per row, shape `(*lead, 1)`) or a full tensor (same shape as `x`);
- **core**: one of none (elementwise only), a row reduction (sum, mean, amax, amin), softmax,
  log_softmax, layernorm, rmsnorm (with or without learned parameters), matmul (`x @ w`, `w` an
  input) or linear (learned weight, with or without bias);
- **epilogue**: 0-2 activations (relu, leaky_relu, sigmoid, tanh, silu, gelu, softplus), then
  optionally a cast to the other float dtype.

Everything here is plain data and pure functions (no torch): compositions must be drawn and
described identically on every machine, and without importing torch.
"""

from __future__ import annotations

import dataclasses
import math

UNARY_OPS = ("abs", "neg", "square")
BINARY_OPS = ("add", "sub", "mul", "maximum", "minimum")
OPERAND_KINDS = ("scalar", "row", "col", "full")
ACTIVATIONS = ("relu", "leaky_relu", "sigmoid", "tanh", "silu", "gelu", "softplus")
REDUCTIONS = ("sum", "mean", "amax", "amin")
ROW_CORES = REDUCTIONS + ("softmax", "log_softmax", "layernorm", "rmsnorm")
MATMUL_CORES = ("matmul", "linear")
CORES = ("none",) + ROW_CORES + MATMUL_CORES
# Cores whose learned parameters are optional (norm weight/bias, linear bias); linear's weight is always there.
PARAM_CORES = ("layernorm", "rmsnorm", "linear")
DTYPES = ("fp32", "fp16")
OTHER_DTYPE = {"fp32": "fp16", "fp16": "fp32"}

# Which code template a core uses; each template is one fused kernel.
TEMPLATES = {"none": "elementwise", **{c: "rowwise" for c in ROW_CORES}, **{c: "matmul" for c in MATMUL_CORES}}
OP_FAMILY = {"none": "elementwise", **{c: "reduction" for c in REDUCTIONS}, "softmax": "softmax",
             "log_softmax": "softmax", "layernorm": "norm", "rmsnorm": "norm", "matmul": "matmul", "linear": "matmul"}

# Held-out compositions: any composition that contains one of these pairs is held out, i.e. it
# appears only in `procedural:heldout` and never in `procedural:train`. Each names a pair of
# pieces that both appear in training, just never together, so the held-out split measures
# generalisation to new combinations, not to unseen primitives (tests check both properties).
HELDOUT_CORE_ACTIVATION = (
    ("softmax", "silu"), ("layernorm", "gelu"), ("rmsnorm", "sigmoid"), ("matmul", "tanh"),
    ("linear", "softplus"), ("sum", "leaky_relu"), ("amax", "gelu"), ("log_softmax", "sigmoid"),
    ("none", "softplus"),
)
HELDOUT_PROLOGUE_CORE = (
    ("mul.col", "layernorm"), ("sub.full", "matmul"), ("maximum.row", "softmax"), ("square", "mean"),
)

# The degeneracy rules below track a coarse state of the values flowing through a composition:
# their sign, magnitude and one-sided bound, so that the generator refuses compositions whose
# output is (nearly) constant: relu of negatives is all zeros, tanh of values of magnitude 5 or
# more is +-1 in fp16, sigmoid of values ~1e-3 is 0.5 in fp16, the row minimum of |x| is ~0.
POS, NEG, MIXED, MOSTLY_POS, MOSTLY_NEG = "pos", "neg", "mixed", "mostly_pos", "mostly_neg"
_FLIP = {POS: NEG, NEG: POS, MIXED: MIXED, MOSTLY_POS: MOSTLY_NEG, MOSTLY_NEG: MOSTLY_POS}
NEGATIVE = (NEG, MOSTLY_NEG)
POSITIVE = (POS, MOSTLY_POS)
# Magnitudes: SMALL |v| << 1 (softmax, a mean of signed values), UNIT ~1 (inputs, norms, matmul
# with a 1/sqrt(K) weight), MEDIUM ~3-20 (row extremes, log_softmax), LARGE >= ~30 (row sums).
SMALL, UNIT, MEDIUM, LARGE = "small", "unit", "medium", "large"
# One-sided bounds that a row extreme would hit: max(t, c) >= c, |t| >= 0, ...
BELOW, ABOVE = "below", "above"
_FLIP_BOUND = {BELOW: ABOVE, ABOVE: BELOW, None: None}


@dataclasses.dataclass(frozen=True)
class Step:
    """One prologue step: `op` applied to the running value, with an operand for binary ops."""

    op: str
    operand: str | None = None  # scalar | row | col | full (binary ops only)

    @property
    def key(self) -> str:
        return self.op if self.operand is None else f"{self.op}.{self.operand}"


@dataclasses.dataclass(frozen=True)
class Composition:
    """A whole composition, without the values drawn per task (dtype, scalars, shapes)."""

    prologue: tuple[Step, ...]
    core: str
    core_params: bool
    activations: tuple[str, ...]
    cast: bool

    @property
    def template(self) -> str:
        return TEMPLATES[self.core]

    @property
    def op_family(self) -> str:
        if self.core == "none" and not self.prologue and self.activations:
            return "activation"
        return OP_FAMILY[self.core]

    @property
    def n_ops(self) -> int:
        """Operations a kernel fuses (the core counts when it is not `none`)."""
        return len(self.prologue) + (self.core != "none") + len(self.activations) + int(self.cast)

    @property
    def level(self) -> int:
        """1: a single operation; 2: fused operations (docs/task_format.md levels)."""
        return 1 if self.n_ops <= 1 else 2

    @property
    def core_key(self) -> str:
        if self.core in PARAM_CORES:
            return f"{self.core}{'+params' if self.core_params else ''}"
        return self.core

    @property
    def key(self) -> str:
        """Canonical text of the composition: equal keys mean equal compositions."""
        pro = "+".join(s.key for s in self.prologue) or "-"
        epi = "+".join(self.activations + (("cast",) if self.cast else ())) or "-"
        return f"{pro} | {self.core_key} | {epi}"

    def pairs(self) -> set[tuple[str, str]]:
        """The (piece, piece) pairs held-out rules are written against."""
        out = {(self.core, a) for a in self.activations}
        out |= {(s.key, self.core) for s in self.prologue}
        return out

    @property
    def heldout_pairs(self) -> list[tuple[str, str]]:
        held = set(HELDOUT_CORE_ACTIVATION) | set(HELDOUT_PROLOGUE_CORE)
        return sorted(self.pairs() & held)

    @property
    def is_heldout(self) -> bool:
        return bool(self.heldout_pairs)

    def describe(self, dtype: str) -> str:
        """One line for humans: `fp16 x -> mul(row) -> softmax -> gelu -> cast fp32`."""
        parts = [f"{dtype} x"]
        parts += [s.op if s.operand is None else f"{s.op}({s.operand})" for s in self.prologue]
        if self.core != "none":
            parts.append(self.core_key)
        parts += list(self.activations)
        if self.cast:
            parts.append(f"cast {OTHER_DTYPE[dtype]}")
        return " -> ".join(parts)


@dataclasses.dataclass(frozen=True)
class ValueState:
    """Coarse description of the values at one point of a composition (inputs: standard normal).

    In the prologue `mean` and `spread` follow the values' mean and standard deviation (in units of
    the input's, treating them as roughly normal), `nonneg`/`nonpos` whether they are known to be
    >= 0 / <= 0; the sign of elementwise values is derived from them."""

    sign: str = MIXED
    size: str = UNIT
    bound: str | None = None      # BELOW / ABOVE: bounded on that side by a value rows share
    row_operand: bool = False     # a row operand (the same for every row) went into the values
    shared_shift: bool = False    # ... and shifts every row's sum/mean by the same amount
    mean: float = 0.0
    spread: float = 1.0
    nonneg: bool = False
    nonpos: bool = False

    def replace(self, **kw: object) -> "ValueState":
        return dataclasses.replace(self, **kw)

    def settled(self) -> "ValueState":
        """The sign implied by the tracked mean, spread and known bounds."""
        if self.nonneg:
            sign = POS
        elif self.nonpos:
            sign = NEG
        elif self.mean > 0.25 * self.spread:
            sign = MOSTLY_POS
        elif self.mean < -0.25 * self.spread:
            sign = MOSTLY_NEG
        else:
            sign = MIXED
        return self.replace(sign=sign)


def _phi(z: float) -> float:
    return math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)


def _Phi(z: float) -> float:
    return 0.5 * (1.0 + math.erf(z / math.sqrt(2)))


def _mean_max(m: float, sd: float, c: float) -> float:
    """E[max(X, c)] for X ~ N(m, sd^2)."""
    a = (c - m) / sd
    return c * _Phi(a) + m * (1.0 - _Phi(a)) + sd * _phi(a)


def _mirrored(v: ValueState) -> ValueState:
    """The state of -values."""
    return v.replace(mean=-v.mean, nonneg=v.nonpos, nonpos=v.nonneg, bound=_FLIP_BOUND[v.bound])


def after_step(v: ValueState, step: Step, scalar: float | None) -> ValueState | str:
    """The state after one prologue step, or the reason the step makes the values (nearly) constant."""
    m, sd = v.mean, v.spread
    if step.op == "abs":
        mean = sd * math.sqrt(2 / math.pi) * math.exp(-m * m / (2 * sd * sd)) + m * (1 - 2 * _Phi(-m / sd))
        out = v.replace(mean=mean, spread=math.sqrt(max(m * m + sd * sd - mean * mean, 1e-6)), nonneg=True,
                        nonpos=False, bound=BELOW)
    elif step.op == "square":
        out = v.replace(mean=m * m + sd * sd, spread=math.sqrt(2 * sd ** 4 + 4 * m * m * sd * sd), nonneg=True,
                        nonpos=False, bound=BELOW)
    elif step.op == "neg":
        out = _mirrored(v)
    elif step.operand != "scalar":  # a standard-normal tensor operand
        row = step.operand == "row"
        # a row operand added, or compared, or multiplying values with a non-zero mean, moves every
        # row's sum by the same amount (its own sum over the columns)
        shifts = row and (step.op != "mul" or abs(m) > 0.25 * sd)
        v = v.replace(row_operand=v.row_operand or row, shared_shift=v.shared_shift or shifts)
        if step.op == "minimum" and step.operand == "col" and v.nonneg:
            return "minimum of non-negative values with a column operand is that operand on whole rows"
        if step.op == "maximum" and step.operand == "col" and v.nonpos:
            return "maximum of non-positive values with a column operand is that operand on whole rows"
        both = math.sqrt(sd * sd + 1.0)
        if step.op in ("add", "sub"):
            out = v.replace(spread=both, nonneg=False, nonpos=False, bound=None)
        elif step.op == "mul":
            out = v.replace(mean=0.0, spread=math.sqrt(m * m + sd * sd), nonneg=False, nonpos=False, bound=None)
        elif step.op == "maximum":  # E max(X, Y) = m Phi(m/s) + s phi(m/s), s the sd of X - Y
            out = v.replace(mean=m * _Phi(m / both) + both * _phi(m / both), nonpos=False, bound=BELOW)
        else:
            out = v.replace(mean=m * _Phi(-m / both) - both * _phi(m / both), nonneg=False, bound=ABOVE)
    else:
        assert scalar is not None
        c = scalar
        if step.op in ("add", "sub"):
            shift = c if step.op == "add" else -c
            out = v.replace(mean=m + shift, nonneg=v.nonneg and shift > 0, nonpos=v.nonpos and shift < 0)
        elif step.op == "mul":
            scaled = v.replace(mean=m * abs(c), spread=sd * abs(c))
            out = scaled if c > 0 else _mirrored(scaled)
        elif step.op == "maximum":  # max(t, c) is c wherever t < c
            if (v.nonpos and c >= 0) or m + sd < c:
                return "maximum with a scalar above (nearly) all the values is that scalar"
            out = v.replace(mean=_mean_max(m, sd, c), spread=0.8 * sd, nonneg=v.nonneg or c >= 0, nonpos=False,
                            bound=BELOW)
        else:                       # min(t, c) is c wherever t > c; min(t, c) = t + c - max(t, c)
            if (v.nonneg and c <= 0) or m - sd > c:
                return "minimum with a scalar below (nearly) all the values is that scalar"
            out = v.replace(mean=m + c - _mean_max(m, sd, c), spread=0.8 * sd, nonpos=v.nonpos or c <= 0,
                            nonneg=False, bound=ABOVE)
    return out.settled()


def after_core(v: ValueState, core: str) -> ValueState | str:
    """The state of the core's output, or the reason it is (nearly) constant."""
    if core == "none":
        return v
    if core in ("sum", "mean"):
        # a row of 37-8192 values: the sum has the sign of their mean unless that mean is within
        # about a twentieth of their spread of zero
        if v.nonneg or v.mean > 0.05 * v.spread:
            sign = POS
        elif v.nonpos or v.mean < -0.05 * v.spread:
            sign = NEG
        else:
            sign = MIXED
        size = LARGE if core == "sum" else (SMALL if sign == MIXED else v.size)
        return ValueState(sign=sign, size=size, shared_shift=v.shared_shift)
    if core in ("amax", "amin"):
        if v.row_operand:
            return f"{core} over columns of values with a row operand is dominated by that operand's extreme"
        if (core == "amax" and v.bound == ABOVE) or (core == "amin" and v.bound == BELOW):
            return f"{core} of values bounded on that side is (nearly) the bound"
        # the extreme of 37-8192 values lies 2 to 4 spreads from their mean
        near, far = (v.mean + 2 * v.spread, v.mean + 4 * v.spread) if core == "amax" else \
            (v.mean - 2 * v.spread, v.mean - 4 * v.spread)
        sign = POS if min(near, far) > 0 else NEG if max(near, far) < 0 else \
            (MOSTLY_POS if core == "amax" else MOSTLY_NEG)
        return ValueState(sign=sign, size=MEDIUM)
    if core == "softmax" and v.spread > 3.5:  # x**4 has a spread of ~10
        return "softmax of values as heavy-tailed as x**4 is (nearly) one-hot"
    if core == "softmax":
        return ValueState(sign=POS, size=SMALL)
    if core == "log_softmax":
        return ValueState(sign=NEG, size=MEDIUM)
    if core == "rmsnorm":
        return ValueState(sign=v.sign, size=UNIT)
    return ValueState()  # layernorm centres each row; matmul/linear mix signs through a random weight


SQUASHING_NEGATIVES = ("relu", "gelu", "silu", "softplus")


def activation_degenerate(act: str, v: ValueState) -> bool:
    """True when `act` of such values is (nearly) constant, at fp16 precision."""
    neg = v.sign in NEGATIVE
    if v.shared_shift and act in SQUASHING_NEGATIVES:
        return True                                            # whole trials of zeros when the shift is < 0
    if act == "relu":
        return neg                                             # zeros
    if act == "gelu":
        return neg and v.size in (MEDIUM, LARGE)               # gelu(-5) = -1.4e-6: zeros
    if act == "silu":
        return neg and v.size == LARGE                         # silu(-50) = -1e-20: zeros
    if act == "softplus":
        return v.size == SMALL or (neg and v.size == LARGE)    # log(2) everywhere / zeros
    if act == "sigmoid":                                       # 0.5 everywhere / 0 or 1 / ~1
        return v.size in (SMALL, LARGE) or (v.size == MEDIUM and v.sign in POSITIVE)
    if act == "tanh":
        return v.size in (MEDIUM, LARGE)                       # +-1
    return False                                               # leaky_relu


def after_activation(v: ValueState, act: str) -> ValueState:
    """The state after an activation that was not degenerate on its input."""
    neg = v.sign in NEGATIVE
    if act == "relu":
        return v.replace(sign=POS)
    if act == "sigmoid":                                       # sigmoid(-7) = 1e-3
        return ValueState(sign=POS, size=SMALL if neg and v.size in (MEDIUM, LARGE) else UNIT)
    if act in ("silu", "gelu"):
        return v.replace(size=SMALL) if neg else v
    if act == "softplus":
        return ValueState(sign=POS, size=SMALL if neg else v.size)
    return v  # leaky_relu, tanh


def degenerate_reason(comp: Composition, scalars: list[float]) -> str | None:
    """Why this composition would give a (nearly) constant output, or None when it would not.

    The checks (amdkv/tasks/procedural/checks.py) measure every task's outputs; these rules keep
    the generator from drawing compositions that are degenerate by construction."""
    if comp.n_ops == 0:
        return "nothing to compute (the output would be a copy of the input)"
    state: ValueState | str = ValueState()
    it = iter(scalars)
    for step in comp.prologue:
        state = after_step(state, step, next(it) if step.operand == "scalar" else None)
        if isinstance(state, str):
            return state
    state = after_core(state, comp.core)
    if isinstance(state, str):
        return state
    for act in comp.activations:
        if activation_degenerate(act, state):
            return f"{act} of {state.size} {state.sign} values is (nearly) constant"
        state = after_activation(state, act)
    return None
