"""The verifier's static rules, worded for the system prompt from the verifier's own tables.

The allow-list of imports, the refused modules and the refused calls are read from
`amdkv.verify.static_checks`, so the prompt cannot drift from what the verifier enforces: a rule
added there shows up in the next rendered prompt (the template text around it is versioned).
"""

from __future__ import annotations

from amdkv.verify import static_checks


def _names(items: frozenset[str] | set[str]) -> str:
    return ", ".join(f"`{n}`" for n in sorted(items))


def _grouped_calls(module: str, names: frozenset[str] | set[str], min_group: int = 3) -> str:
    """`os.exec*()` for a family of 3+ names sharing a 4-letter prefix, the others one by one:
    the same refusals in a third of the words."""
    by_prefix: dict[str, list[str]] = {}
    for n in sorted(names):
        by_prefix.setdefault(n[:4], []).append(n)
    out = []
    for prefix, group in sorted(by_prefix.items()):
        if len(group) >= min_group:
            stem = group[0]
            for other in group[1:]:
                while not other.startswith(stem):
                    stem = stem[:-1]
            out.append(f"`{module}.{stem}*()`")
        else:
            out += [f"`{module}.{n}()`" for n in group]
    return ", ".join(out)


def rule_fields(language: str) -> dict[str, str]:
    """`$placeholders` for the rules section of the system prompt."""
    allowed = set(static_checks.ALLOWED_IMPORT_ROOTS) - {"__future__"}
    refused = set(static_checks.DENIED_IMPORTS)
    if language == "hip":
        # HIP candidates build their extension with load_inline/load (the harness runs the build).
        refused -= {"torch.utils.cpp_extension"}
    return {
        "allowed_imports": _names(allowed),
        "refused_imports": _names(refused),
        "refused_calls": _names({f"{c}()" for c in static_checks.DENIED_BUILTIN_CALLS}),
        "refused_os_calls": _grouped_calls("os", static_checks.DENIED_OS_ATTRS),
        "narrow_exceptions": _names(static_checks.NARROW_EXCEPTIONS),
    }
