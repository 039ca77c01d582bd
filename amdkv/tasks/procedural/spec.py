"""The suite spec of procedural tasks: `procedural:<split>[?n=<count>&seed=<seed>]`.

`<split>` is `train`, `heldout` or `all` (both); `n` is the number of tasks of each named split
(for `all`: of train, and n // 10 of heldout, at least 1); `seed` picks the family. Examples:
`procedural:train`, `procedural:heldout?n=200`, `procedural:train?n=5000&seed=3`.
"""

from __future__ import annotations

import dataclasses
from urllib.parse import parse_qsl

from amdkv.errors import BadInputError

PREFIX = "procedural:"
SPLITS = ("train", "heldout", "all")
DEFAULT_N = {"train": 1000, "heldout": 200}
MAX_N = 100_000
HELP = ("procedural:<split>[?n=<count>&seed=<seed>] with split train, heldout or all, "
        "e.g. procedural:train?n=5000&seed=0")


@dataclasses.dataclass(frozen=True)
class ProceduralSpec:
    split: str
    n: int
    seed: int

    def counts(self) -> dict[str, int]:
        """Tasks per generated split."""
        if self.split == "all":
            return {"train": self.n, "heldout": max(1, self.n // 10)}
        return {self.split: self.n}


def _int_param(name: str, text: str, spec: str, low: int, high: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise BadInputError(f"{spec!r}: {name}={text!r} is not an integer", hint=HELP) from None
    if not low <= value <= high:
        raise BadInputError(f"{spec!r}: {name}={value} is out of range [{low}, {high}]", hint=HELP)
    return value


def parse(spec: str) -> ProceduralSpec:
    """Parse and validate a procedural suite spec; every mistake is a BadInputError naming it."""
    if not spec.startswith(PREFIX):
        raise BadInputError(f"{spec!r} is not a procedural suite spec", hint=HELP)
    body = spec[len(PREFIX):]
    split, _, query = body.partition("?")
    if split not in SPLITS:
        raise BadInputError(f"{spec!r}: unknown procedural split {split!r}", hint=HELP)
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise BadInputError(f"{spec!r}: cannot read the options {query!r}", hint=HELP) from None
    params = dict(pairs)
    if len(params) != len(pairs):
        raise BadInputError(f"{spec!r}: an option is given twice", hint=HELP)
    unknown = sorted(set(params) - {"n", "seed"})
    if unknown:
        raise BadInputError(f"{spec!r}: unknown option(s) {unknown}", hint=HELP)
    default_n = DEFAULT_N.get(split, DEFAULT_N["train"])
    n = _int_param("n", params["n"], spec, 1, MAX_N) if "n" in params else default_n
    seed = _int_param("seed", params["seed"], spec, 0, 2**31 - 1) if "seed" in params else 0
    return ProceduralSpec(split=split, n=n, seed=seed)
