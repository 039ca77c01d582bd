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
    the input's), `nonneg`/`nonpos` whether they are known to be >= 0 / <= 0; the sign is derived
    from them: a shift of a quarter of the spread decides the sign of row sums and means."""

    sign: str = MIXED
    size: str = UNIT
    bound: str | None = None      # BELOW / ABOVE: bounded on that side by a value rows share
    row_operand: bool = False     # a row operand (the same for every row) went into the values
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


def _mirrored(v: ValueState) -> ValueState:
    """The state of -values."""
    return v.replace(mean=-v.mean, nonneg=v.nonpos, nonpos=v.nonneg, bound=_FLIP_BOUND[v.bound])


def after_step(v: ValueState, step: Step, scalar: float | None) -> ValueState | str:
    """The state after one prologue step, or the reason the step makes the values (nearly) constant."""
    m, sd = v.mean, v.spread
    if step.op == "abs":
        out = v.replace(mean=max(abs(m), 0.8 * sd), spread=0.6 * sd, nonneg=True, nonpos=False, bound=BELOW)
    elif step.op == "square":
        out = v.replace(mean=m * m + sd * sd, spread=sd * (sd + 2 * abs(m)) * 1.4, nonneg=True, nonpos=False,
                        bound=BELOW)
    elif step.op == "neg":
        out = _mirrored(v)
    elif step.operand != "scalar":  # a standard-normal tensor operand
        v = v.replace(row_operand=v.row_operand or step.operand == "row")
        if step.op in ("add", "sub"):
            out = v.replace(spread=(sd * sd + 1.0) ** 0.5, nonneg=False, nonpos=False, bound=None)
        elif step.op == "mul":
            out = v.replace(mean=0.0, spread=(m * m + sd * sd) ** 0.5, nonneg=False, nonpos=False, bound=None)
        elif step.op == "maximum":  # E max(X, Y) of two standard normals is 0.56
            out = v.replace(mean=max(m, 0.0) + 0.56, nonpos=False, bound=BELOW)
        else:
            out = v.replace(mean=min(m, 0.0) - 0.56, nonneg=False, bound=ABOVE)
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
            out = v.replace(mean=max(m, c), nonneg=v.nonneg or c >= 0, nonpos=False, bound=BELOW)
        else:                       # min(t, c) is c wherever t > c
            if (v.nonneg and c <= 0) or m - sd > c:
                return "minimum with a scalar below (nearly) all the values is that scalar"
            out = v.replace(mean=min(m, c), nonpos=v.nonpos or c <= 0, nonneg=False, bound=ABOVE)
    return out.settled()


def after_core(v: ValueState, core: str) -> ValueState | str:
    """The state of the core's output, or the reason it is (nearly) constant."""
    if core == "none":
        return v
    if core in ("sum", "mean"):    # law of large numbers: a row sum has the sign most values have
        sign = {MOSTLY_POS: POS, MOSTLY_NEG: NEG}.get(v.sign, v.sign)
        size = LARGE if core == "sum" else (SMALL if v.sign == MIXED else v.size)
        return ValueState(sign=sign, size=size)
    if core in ("amax", "amin"):
        if v.row_operand:
            return f"{core} over columns of values with a row operand is dominated by that operand's extreme"
        if (core == "amax" and v.bound == ABOVE) or (core == "amin" and v.bound == BELOW):
            return f"{core} of values bounded on that side is (nearly) the bound"
        sign = {MIXED: MOSTLY_POS if core == "amax" else MOSTLY_NEG}.get(v.sign, v.sign)
        return ValueState(sign=sign, size=MEDIUM)
    if core == "softmax":
        return ValueState(sign=POS, size=SMALL)
    if core == "log_softmax":
        return ValueState(sign=NEG, size=MEDIUM)
    if core == "rmsnorm":
        return ValueState(sign=v.sign, size=UNIT)
    return ValueState()  # layernorm centres each row; matmul/linear mix signs through a random weight


def activation_degenerate(act: str, v: ValueState) -> bool:
    """True when `act` of such values is (nearly) constant, at fp16 precision."""
    neg = v.sign in NEGATIVE
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
    if act == "sigmoid":
        return ValueState(sign=POS, size=UNIT)
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
