"""The argument layout every generated file of a task agrees on (reference, Triton, HIP).

`Model.__init__` takes the prologue's scalars, then the core's sizes (norm features, or linear
in/out features); `forward` takes `x`, then one tensor per tensor-operand prologue step, then `w`
for a matmul core. The solutions take exactly the same arguments in the same order, and keep the
reference's parameter names (`weight`, `bias`) so the verifier loads the reference's values.
"""

from __future__ import annotations

import dataclasses

from amdkv.tasks.procedural.grammar import OTHER_DTYPE, Composition
from amdkv.tasks.procedural.sampler import CaseShape, TaskSpec

TORCH_DTYPE = {"fp32": "torch.float32", "fp16": "torch.float16"}
NORM_EPS = {"layernorm": 1e-5, "rmsnorm": 1e-6}
LEAKY_SLOPE = 0.01
SOFTPLUS_THRESHOLD = 20.0


@dataclasses.dataclass(frozen=True)
class Operand:
    """A tensor operand of a prologue step: forward argument `name`, broadcast as `kind`."""

    name: str
    kind: str  # row | col | full
    step: int


@dataclasses.dataclass(frozen=True)
class Layout:
    spec: TaskSpec

    @property
    def comp(self) -> Composition:
        return self.spec.composition

    @property
    def operands(self) -> list[Operand]:
        return [Operand(f"{s.operand}{i}", s.operand, i) for i, s in enumerate(self.comp.prologue)
                if s.operand is not None and s.operand != "scalar"]

    @property
    def scalar_names(self) -> list[str]:
        return [f"s{i}" for i, s in enumerate(self.comp.prologue) if s.operand == "scalar"]

    @property
    def size_names(self) -> list[str]:
        if self.comp.core == "linear":
            return ["in_features", "out_features"]
        if self.comp.core in ("layernorm", "rmsnorm") and self.comp.core_params:
            return ["n_features"]
        return []

    @property
    def init_names(self) -> list[str]:
        return self.scalar_names + self.size_names

    @property
    def forward_names(self) -> list[str]:
        return ["x"] + [o.name for o in self.operands] + (["w"] if self.comp.core == "matmul" else [])

    @property
    def param_names(self) -> list[str]:
        """Learned parameters, in the order the kernels take them."""
        core = self.comp.core
        if core == "linear":
            return ["weight"] + (["bias"] if self.comp.core_params else [])
        if core == "layernorm" and self.comp.core_params:
            return ["weight", "bias"]
        if core == "rmsnorm" and self.comp.core_params:
            return ["weight"]
        return []

    @property
    def in_dtype(self) -> str:
        return self.spec.dtype

    @property
    def out_dtype(self) -> str:
        return OTHER_DTYPE[self.spec.dtype] if self.comp.cast else self.spec.dtype

    @property
    def reduces_rows(self) -> bool:
        """The output drops the last dimension (row reductions)."""
        return self.comp.core in ("sum", "mean", "amax", "amin")

    def init_values(self, case: CaseShape) -> list[float | int]:
        sizes = {"in_features": case.k, "out_features": case.n, "n_features": case.n}
        return list(self.spec.scalars) + [sizes[n] for n in self.size_names]

    def dtypes(self) -> list[str]:
        return [self.in_dtype] + ([self.out_dtype] if self.out_dtype != self.in_dtype else [])
