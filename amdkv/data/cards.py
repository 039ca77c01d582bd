"""The dataset card: `hub_cards/dataset.md` filled with the real statistics of a build.

The template is `string.Template` text (`$name` fields; a missing field is an error, so code and
template cannot drift apart silently). The YAML header besides `configs` and `dataset_info`
(which `hub_layout` writes exactly as `push_to_hub` does) holds the Hub's own fields (licence,
pretty name, tags, task category, size category) and an `amdkv` block a program can read:
`execution_verified` (true only when every row was verified on a GPU), the verdict platforms,
the schema versions and the build policy.
"""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any

from amdkv.data.builder import Plan
from amdkv.data.schemas import COLUMN_DOCS, SCHEMA_VERSIONS
from amdkv.errors import BadInputError

TEMPLATE = "dataset.md"

KIND_TEXT = {
    "translation": "a PyTorch task and one verified kernel for it",
    "optimisation": "a slower correct kernel and a faster correct kernel of the same task, same platform",
    "trajectories": "multi-turn write / verify / fix attempts, the verdict after every turn",
    "rocm_qa": "questions about ROCm libraries answered from their source, with file, lines and commit",
}
PLATFORM_TEXT = {"rocm": "an AMD GPU (ROCm)", "cuda": "an NVIDIA GPU (CUDA)", "cpu": "the Triton CPU interpreter"}


def template_dir() -> Path:
    """`$AMDKV_HUB_CARDS`, else the repository's `hub_cards/` (a source checkout or editable install)."""
    from amdkv.config import DataConfig

    env = DataConfig.from_env().hub_cards
    return Path(env) if env else Path(__file__).resolve().parents[2] / "hub_cards"


def load_template(name: str = TEMPLATE) -> string.Template:
    path = template_dir() / name
    if not path.is_file():
        raise BadInputError(f"dataset card template {path} not found",
                            hint="run from a source checkout (make install) or set AMDKV_HUB_CARDS to a folder "
                                 "holding dataset.md")
    return string.Template(path.read_text(encoding="utf-8"))


def size_category(n: int) -> str:
    for limit, label in ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"),
                         (10_000_000, "1M<n<10M")):
        if n < limit:
            return label
    return "10M<n<100M"


def platforms_of(stats: dict[str, Any]) -> list[str]:
    return sorted({p for c in stats["configs"].values() for p in c.get("platforms", {}) if p != "none"})


def execution_verified(stats: dict[str, Any]) -> bool:
    """True only when every kernel row of the dataset is an ok verdict from a GPU platform."""
    rows = [c for c in stats["configs"].values() if c["kind"] != "rocm_qa"]
    return bool(rows) and all(c.get("execution_verified", 0) == c["rows"] for c in rows)


def card_metadata(plan: Plan, stats: dict[str, Any]) -> dict[str, Any]:
    """The YAML fields of the card besides `configs` and `dataset_info`."""
    licences = sorted({lic for c in stats["configs"].values() for lic in c["licences"]})
    total = sum(c["rows"] for c in stats["configs"].values())
    language_tag = plan.spec.language or "rocm"
    return {
        "license": licences[0].lower() if len(licences) == 1 and licences[0] != "unknown" else "other",
        "pretty_name": plan.spec.pretty_name,
        "language": ["en"],
        "tags": ["code", "gpu-kernels", "amd", "rocm", language_tag, "amdkv"],
        "task_categories": ["text-generation"],
        "size_categories": [size_category(total)],
        "amdkv": {
            "execution_verified": execution_verified(stats),
            "platforms": platforms_of(stats),
            "schema_versions": {c: SCHEMA_VERSIONS[plan.spec.kind(c)] for c in plan.configs()},
            "licences": licences,
            "policy": json.loads(json.dumps(plan.policy.to_dict())),  # plain YAML (lists, not tuples)
        },
    }


def render_body(plan: Plan, stats: dict[str, Any], repo_id: str) -> str:
    spec, report = plan.spec, plan.report
    configs = plan.configs()
    fields = {
        "pretty_name": spec.pretty_name,
        "summary": _summary(plan, stats),
        "verification": _verification(stats),
        "repo_id": repo_id,
        "default_config": spec.default_config,
        "load_examples": "\n".join(f'ds = load_dataset("{repo_id}", "{c}")' for c in configs),
        "configs_table": _configs_table(plan, stats),
        "statistics": _statistics(stats),
        "build": _build(plan),
        "dedup": _dedup(report.to_dict()),
        "fields": _fields(plan),
        "licences": _table(["licence", "rows"], _merge(c["licences"] for c in stats["configs"].values()).items()),
        "citation": _citation(spec.name, repo_id),
    }
    return load_template().substitute(fields)


# ------------------------------------------------------------------------------ sections
def _summary(plan: Plan, stats: dict[str, Any]) -> str:
    total = sum(c["rows"] for c in stats["configs"].values())
    lang = {"hip": "HIP", "triton": "Triton"}.get(plan.spec.language or "", "ROCm-libraries")
    what = f"{lang} kernels for AMD Instinct GPUs" if plan.spec.language else "question-answer pairs grounded in ROCm library sources"
    return (f"{total:,} rows of {what}, built by amdkv from verified records "
            f"({plan.report.records:,} records read). Configs: "
            + ", ".join(f"`{c}` ({stats['configs'][c]['rows']:,})" for c in plan.configs()) + ".")


def _verification(stats: dict[str, Any]) -> str:
    platforms = platforms_of(stats)
    if not platforms:
        return "**Verification:** these rows are grounded in library sources, not executed (`execution_verified: false`)."
    if execution_verified(stats):
        where = " and ".join(PLATFORM_TEXT[p] for p in platforms)
        note = " NVIDIA timings are not AMD measurements: every row names its platform." if "cuda" in platforms else ""
        return f"**Execution-verified** (`execution_verified: true`): every kernel was compiled, run and checked on {where}.{note}"
    if platforms == ["cpu"]:
        lines = ["**Not execution-verified on a GPU** (`execution_verified: false`)."]
        lines.append("Every verdict comes from the Triton CPU interpreter (`platform: cpu`): correctness under the "
                     "interpreter only, no timings, no speedups (`interpreter_verified: true`). Re-verify on an AMD GPU "
                     "with `amdkv reverify` before relying on it as execution-verified.")
    else:
        lines = ["**Not every row is execution-verified on a GPU** (`execution_verified: false` for the dataset)."]
        for name, c in stats["configs"].items():
            if "platforms" in c:
                parts = ", ".join(f"{n:,} on {PLATFORM_TEXT.get(p, p)}" for p, n in c["platforms"].items())
                lines.append(f"- `{name}`: {parts}; {c.get('execution_verified', 0):,} execution-verified.")
    return "\n".join(lines)


def _configs_table(plan: Plan, stats: dict[str, Any]) -> str:
    rows = []
    for c in plan.configs():
        kind = plan.spec.kind(c)
        splits = ", ".join(f"{s}: {n:,}" for s, n in stats["configs"][c]["splits"].items())
        default = " (default)" if c == plan.spec.default_config else ""
        rows.append((f"`{c}`{default}", KIND_TEXT[kind], splits, str(SCHEMA_VERSIONS[kind])))
    missing = [c for c in plan.spec.configs if c not in plan.configs()]
    table = _table(["config", "rows are", "splits", "schema"], rows)
    if missing:
        table += "\n\nNot in this build (no rows): " + ", ".join(f"`{c}`" for c in missing) + "."
    return table


def _statistics(stats: dict[str, Any]) -> str:
    out = []
    for name, c in stats["configs"].items():
        out.append(f"### `{name}`\n")
        for key, title in (("platforms", "platform"), ("levels", "level"), ("op_families", "op family"),
                           ("statuses", "status"), ("pair_sources", "pair source"), ("libraries", "library")):
            if c.get(key):
                out.append(_table([title, "rows"], c[key].items()) + "\n")
        if "tasks" in c:
            out.append(f"{c['tasks']:,} tasks; {c.get('execution_verified', 0):,} rows execution-verified (GPU), "
                       f"{c.get('interpreter_verified', 0):,} interpreter-verified.\n")
        for p, dist in (c.get("speedup") or {}).items():
            out.append(_distribution(f"speedup vs eager PyTorch on {p}", dist))
        if c.get("gain"):
            out.append(_distribution("optimisation gain (speedup_after / speedup_before)", c["gain"]))
        if "ending_correct" in c:
            out.append(f"{c['ending_correct']:,} of {c['rows']:,} trajectories reach a correct program.\n")
    if stats.get("pass"):
        out.append("### Pass distribution (every judged program in scope, before selection)\n")
        statuses = sorted({s for counts in stats["pass"].values() for s in counts})
        rows = [(p, *(str(stats["pass"][p].get(s, 0)) for s in statuses),
                 f"{stats['pass'][p].get('ok', 0) / max(1, sum(stats['pass'][p].values())):.1%}")
                for p in stats["pass"]]
        out.append(_table(["platform", *statuses, "pass rate"], rows) + "\n")
    return "\n".join(out).strip()


def _distribution(title: str, dist: dict[str, Any]) -> str:
    if not dist.get("count"):
        return f"{title}: no values.\n"
    head = (f"{title}: {dist['count']:,} values, geometric mean {dist['geomean']:.2f}, median {dist['median']:.2f} "
            f"(p10 {dist['p10']:.2f}, p90 {dist['p90']:.2f}, max {dist['max']:.2f}).\n")
    return head + "\n" + _table(["range", "rows"], dist["buckets"].items()) + "\n"


def _build(plan: Plan) -> str:
    p, report = plan.policy, plan.report
    lines = [
        f"- records read: {report.records:,} ({', '.join(f'{k}: {v:,}' for k, v in report.records_by_kind.items())})",
        f"- selection: `{p.select}`" + (f" (speedup >= {p.min_speedup})" if p.select == "faster" else "")
        + f"; platforms: {', '.join(p.platforms) if p.platforms else 'all found (GPU vendors never merged silently)'}",
        f"- trajectories: `{p.trajectories}`; correct turns also as translation rows: {p.expand_trajectories}",
        f"- optimisation pairs: `{p.pairs}`, gain >= {p.min_gain}, at most {p.max_pairs_per_task} per task from "
        "same-task pairing",
        f"- splits: {', '.join(f'{n} {f:.0%}' for n, f in p.splits)} by near-duplicate cluster (seed {p.seed}): "
        f"{report.clusters.get('clusters', 0):,} clusters, the largest has {report.clusters.get('largest', 0):,} "
        "tasks; no task and no near-duplicate cluster is in two splits, in any config",
        f"- built with amdkv (`amdkv build {plan.spec.name}`); phase times (s): "
        + ", ".join(f"{k} {v:.1f}" for k, v in report.seconds.items()),
        "",
        _table(["phase", "removed", "by reason"],
               [(ph.name, f"{ph.removed:,}", "; ".join(f"{k}: {v:,}" for k, v in ph.detail.items()))
                for ph in report.phases]),
    ]
    return "\n".join(lines)


def _dedup(report: dict[str, Any]) -> str:
    phases = {ph["name"]: ph for ph in report["phases"]}
    dec = report.get("decontamination") or {}
    policy = report["policy"]
    lines = [
        f"- exact duplicates (same task, same program after normalising whitespace and comment lines): "
        f"{phases.get('exact duplicates', {}).get('removed', 0):,} removed",
        f"- near duplicates (MinHash over 5-word shingles, 64 permutations, LSH, Jaccard >= "
        f"{policy['near_threshold']}): {phases.get('near duplicates', {}).get('removed', 0):,} removed; the kept copy "
        "is GPU-verified first, then the fastest",
        f"- decontaminated against {', '.join(f'`{s}`' for s in dec.get('suites', [])) or 'nothing'} "
        f"({dec.get('eval_tasks', 0):,} eval tasks, {dec.get('eval_texts', 0):,} texts: task sources and reference "
        f"solutions): {dec.get('removed', 0):,} removed "
        f"({', '.join(f'{k}: {v:,}' for k, v in (dec.get('by_reason') or {}).items()) or 'none'}); task sources at "
        f"Jaccard >= {dec.get('task_threshold')}, kernels at >= {dec.get('text_threshold')}",
    ]
    return "\n".join(lines)


def _fields(plan: Plan) -> str:
    out = []
    for config in plan.configs():
        feats = plan.features(config)
        rows = [(f"`{name}`", _type_name(feat), COLUMN_DOCS.get(name, "")) for name, feat in feats.items()]
        out.append(f"### `{config}`\n\n" + _table(["column", "type", "meaning"], rows))
    return "\n\n".join(out)


def _type_name(feature: Any) -> str:
    from datasets import List, Value

    if isinstance(feature, Value):
        return feature.dtype
    if isinstance(feature, List):
        return f"list of {_type_name(feature.feature)}"
    if isinstance(feature, dict):
        return "struct(" + ", ".join(feature) + ")"
    return type(feature).__name__


def _citation(name: str, repo_id: str) -> str:
    import amdkv

    return (f"@misc{{amdkv_{name.replace('-', '_')},\n  title  = {{amdkv: execution-verified GPU kernels for AMD "
            f"Instinct GPUs ({name} dataset)}},\n  note   = {{Built with amdkv {amdkv.__version__}}},\n"
            f"  howpublished = {{\\url{{https://huggingface.co/datasets/{repo_id}}}}}\n}}")


def _merge(dicts) -> dict[str, int]:
    out: dict[str, int] = {}
    for d in dicts:
        for k, v in d.items():
            out[k] = out.get(k, 0) + v
    return out


def _table(header: list[str], rows) -> str:
    rows = [tuple(str(x) for x in r) for r in rows]
    if not rows:
        return "(none)"
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in r) + " |" for r in rows]
    return "\n".join(lines)
