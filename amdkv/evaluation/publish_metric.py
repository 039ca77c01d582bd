"""`amdkv publish-metric DIR --repo-id ORG/NAME [--tasks SPEC] [--dry-run]`: an `evaluate` module as a Space.

`evaluate.load("ORG/NAME")` downloads `NAME.py` from the Space `ORG/NAME`, so publishing is:
stage the module folder (the module `NAME.py`, its card `README.md`, plus a generated `index.html`
and `requirements.txt`), check it the way a user will use it (`evaluate.load` of the staged folder
must find the `evaluate.Metric` subclass), then `HfApi.create_repo(repo_type="space",
space_sdk="static")` and `HfApi.upload_folder` (TOOLCHAINS.md: evaluate-cli's own `create` is broken
with huggingface_hub >= 1.0). A static Space runs nothing on the Hub; the module runs where it is
loaded.

`--tasks SPEC` also publishes the suite's original files, in the checkout's own layout (so
`SPEC_PREFIX:<download>` loads them), with the licence files and a dataset card, as the dataset
`ORG/NAME-tasks`, which the module downloads when called without `tasks=`. A benchmark whose licence
does not allow redistribution (ROCmBench) is refused.
"""

from __future__ import annotations

import ast
import shutil
import tempfile
from pathlib import Path
from typing import Any

from amdkv.errors import BadInputError
from amdkv.source_ast import parse as parse_source

SPACE_SDK = "static"
INDEX_HTML = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title></head>
<body><h1>{title}</h1>
<p>An <code>evaluate</code> metric module published by amdkv. Use it from Python:</p>
<pre>import os, evaluate
os.environ["HF_ALLOW_CODE_EVAL"] = "1"   # it compiles and runs model-written kernels
metric = evaluate.load("{repo_id}")
metric.compute(predictions=[[source, ...], ...], references=[task_id, ...])</pre>
<p>The card (README.md in this Space's files) says what it measures and where its tasks come from.</p>
</body></html>
"""


def _front_matter(readme: str) -> dict[str, Any]:
    if not readme.startswith("---\n"):
        return {}
    end = readme.find("\n---", 4)
    if end < 0:
        return {}
    out: dict[str, Any] = {}
    for line in readme[4:end].splitlines():
        key, sep, value = line.partition(":")
        if sep and not line.startswith((" ", "-")):
            out[key.strip()] = value.strip()
    return out


def check_module_dir(module_dir: str | Path) -> tuple[Path, str]:
    """(folder, module name) after checking the folder is an evaluate module with a Space card."""
    folder = Path(module_dir)
    name = folder.resolve().name
    script = folder / f"{name}.py"
    readme = folder / "README.md"
    if not script.is_file():
        raise BadInputError(f"{folder} has no {name}.py", hint="an evaluate module folder NAME/ holds NAME.py")
    if not readme.is_file():
        raise BadInputError(f"{folder} has no README.md (the metric card)", hint="write the card first")
    tree = parse_source(script.read_text(encoding="utf-8"))
    if not any(isinstance(n, ast.ClassDef) and any(ast.unparse(b) in ("evaluate.Metric", "Metric") for b in n.bases)
               for n in tree.body):
        raise BadInputError(f"{script} defines no `evaluate.Metric` subclass", hint="see eval/metrics/*/ for examples")
    meta = _front_matter(readme.read_text(encoding="utf-8"))
    missing = [k for k in ("title", "sdk", "tags") if k not in meta]
    if missing:
        raise BadInputError(f"{readme}: the YAML front matter lacks {missing}",
                            hint=f"start the card with ---, title:, sdk: {SPACE_SDK}, tags: [evaluate, metric], ---")
    return folder, name


def stage_space(folder: Path, name: str, repo_id: str, into: Path) -> list[str]:
    into.mkdir(parents=True, exist_ok=True)
    for f in (f"{name}.py", "README.md"):
        shutil.copy2(folder / f, into / f)
    title = _front_matter((folder / "README.md").read_text(encoding="utf-8")).get("title", name)
    (into / "index.html").write_text(INDEX_HTML.format(title=title, repo_id=repo_id), encoding="utf-8")
    (into / "requirements.txt").write_text("evaluate>=0.4.6\ndatasets\namdkv\n", encoding="utf-8")
    return sorted(p.name for p in into.iterdir())


def check_loads(staged: Path, name: str) -> str:
    """`evaluate.load` of the staged folder, as a user would: the module must load (imports included)."""
    import evaluate

    module = evaluate.load(str(staged / f"{name}.py"))
    return type(module).__name__


def stage_tasks(tasks_spec: str, into: Path, repo_id: str) -> dict[str, Any]:
    """The suite's original files in their checkout layout, licence files and a dataset card."""
    from amdkv.evaluation.benchmarks import benchmark_of
    from amdkv.tasks.external.common import parse_spec
    from amdkv.tasks.suites import load_suite

    tasks = load_suite(tasks_spec)
    info = benchmark_of(tasks)
    if info is None:
        raise BadInputError(f"{tasks_spec} is not an external benchmark suite", hint="e.g. --tasks kernelbench:PATH")
    closed = sorted({t.id for t in tasks if t.metadata.get("redistributable") is False})
    if not info.redistributable or closed:
        raise BadInputError(f"{info.display}'s files may not be republished ({info.tasks_source})",
                            hint="publish the metric without --tasks; users pass tasks= with their checkout")
    spec_root, _ = parse_spec(tasks_spec.partition(":")[2], info.name, ("levels", "only", "index", "instructions"))
    spec_root = spec_root.resolve()
    copied, root = [], spec_root
    for t in tasks:
        rel = t.metadata["provenance_detail"]["file"]  # relative to the repository checkout
        root = next((p for p in [spec_root, *spec_root.parents] if (p / rel).is_file()), None)
        if root is None:
            raise BadInputError(f"cannot find {rel} of task {t.id} under {spec_root}", hint="pass the checkout")
        (into / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / rel, into / rel)
        copied.append(rel)
    # licence files, TritonBench-G's index and instructions, KernelBench's prompt templates and examples
    extras = [p for pattern in ("LICENSE*", "data/TritonBench_G*.json", "src/kernelbench/prompts/**/*")
              for p in root.glob(pattern) if p.is_file()]
    for p in extras:
        rel = p.relative_to(root)
        (into / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(p, into / rel)
    licences = sorted({t.licence for t in tasks})
    card = ["---", f"license: {licences[0].lower() if len(licences) == 1 else 'other'}",
            "tags: [amdkv, gpu-kernels, benchmark]", "---", "",
            f"# {info.display} tasks (for the `{repo_id.split('/')[-1]}` metric)", "",
            f"The original files of {info.display}, unchanged and in their repository's layout, so that "
            f"`amdkv` loads them with `{info.name}:<this folder>`. Licence: {', '.join(licences)} "
            "(the LICENSE file(s) here are the repository's own).", "", "## Provenance", ""]
    card += [f"- `{t.id}`: {t.provenance}" for t in tasks]
    (into / "README.md").write_text("\n".join(card) + "\n", encoding="utf-8")
    return {"benchmark": info.name, "files": len(copied) + len(extras), "licences": licences}


def publish_metric(module_dir: str, repo_id: str, *, tasks_spec: str | None = None, private: bool = False,
                   dry_run: bool = False) -> dict[str, Any]:
    if repo_id.count("/") != 1:
        raise BadInputError(f"--repo-id {repo_id!r} is not ORG/NAME", hint="e.g. --repo-id amdkv/rocmbench")
    folder, name = check_module_dir(module_dir)
    if repo_id.split("/")[1] != name:
        raise BadInputError(f"the Space is named {repo_id.split('/')[1]!r} but the module is {name!r}",
                            hint=f"evaluate.load('ORG/NAME') looks for NAME.py: use --repo-id ORG/{name}")
    staging = Path(tempfile.mkdtemp(prefix="amdkv-publish-"))
    log: list[str] = []
    result: dict[str, Any] = {"repo_id": repo_id, "dry_run": dry_run, "log": log}
    try:
        files = stage_space(folder, name, repo_id, staging / "space")
        result["space_files"] = files
        result["loads_as"] = check_loads(staging / "space", name)
        log.append(f"staged Space {repo_id}: {', '.join(files)} (evaluate.load finds {result['loads_as']})")
        tasks_repo = f"{repo_id}-tasks"
        if tasks_spec:
            result["tasks"] = stage_tasks(tasks_spec, staging / "tasks", repo_id)
            result["tasks"]["repo_id"] = tasks_repo
            log.append(f"staged dataset {tasks_repo}: {result['tasks']['files']} files, licence(s) "
                       f"{', '.join(result['tasks']['licences'])}")
        if dry_run:
            log.append("dry run: nothing uploaded")
            return result
        from huggingface_hub import HfApi

        api = HfApi()
        api.create_repo(repo_id, repo_type="space", space_sdk=SPACE_SDK, private=private, exist_ok=True)
        commit = api.upload_folder(folder_path=str(staging / "space"), repo_id=repo_id, repo_type="space",
                                   commit_message=f"amdkv publish-metric {name}")
        result["space_commit"] = str(getattr(commit, "oid", commit))
        log.append(f"uploaded Space {repo_id}")
        if tasks_spec:
            api.create_repo(tasks_repo, repo_type="dataset", private=private, exist_ok=True)
            api.upload_folder(folder_path=str(staging / "tasks"), repo_id=tasks_repo, repo_type="dataset",
                              commit_message=f"amdkv publish-metric {name}: tasks")
            log.append(f"uploaded dataset {tasks_repo}")
        return result
    finally:
        shutil.rmtree(staging, ignore_errors=True)
