"""`amdkv publish DIR --repo-id ORG/NAME`: upload a built Hub-layout folder as a dataset repo.

The folder is checked first (`hub_layout.check_layout`: the README's configs, every data file
pattern matched, every parquet shard readable with the README's features), so a broken build is
never uploaded. Then `HfApi.create_repo(repo_type="dataset", exist_ok=True)` and
`HfApi.upload_folder(..., delete_patterns=...)`: like `push_to_hub`, the files of each config's
data folder that this build no longer has (e.g. a shard count that shrank) are deleted in the
same commit. `--dry-run` lists what would be uploaded and deleted and calls nothing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from amdkv.errors import BadInputError, InfrastructureError


def plan_upload(folder: str | os.PathLike[str]) -> dict[str, Any]:
    """What `publish` would send: files with sizes, configs, and the delete patterns."""
    from amdkv.data.hub_layout import check_layout

    folder = Path(folder)
    layout = check_layout(folder)
    files = sorted((str(p.relative_to(folder)), p.stat().st_size) for p in folder.rglob("*")
                   if p.is_file() and not any(part.startswith(".") for part in p.relative_to(folder).parts))
    data_dirs = sorted({path.split("/", 1)[0] for entry in layout.values() for paths in entry["data_files"].values()
                        for path in paths})
    return {"folder": str(folder), "configs": {c: sorted(e["data_files"]) for c, e in layout.items()},
            "default_config": next(c for c, e in layout.items() if e["default"]),
            "files": [{"path": p, "bytes": n} for p, n in files], "bytes": sum(n for _, n in files),
            "delete_patterns": [f"{d}/*" for d in data_dirs]}


def publish(folder: str | os.PathLike[str], repo_id: str, *, private: bool = False, dry_run: bool = False,
            token: str | None = None, commit_message: str | None = None) -> dict[str, Any]:
    """Upload `folder` to the dataset repo `repo_id` (see the module docstring)."""
    if repo_id.count("/") != 1 or not all(repo_id.split("/")):
        raise BadInputError(f"--repo-id {repo_id!r} is not ORG/NAME", hint="e.g. --repo-id amdkv/triton")
    plan = plan_upload(folder)
    plan.update(repo_id=repo_id, private=private, dry_run=dry_run)
    if dry_run:
        return plan
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    api = HfApi(token=token)
    try:
        repo = api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        commit = api.upload_folder(folder_path=str(folder), repo_id=repo_id, repo_type="dataset",
                                   commit_message=commit_message or f"amdkv publish ({len(plan['files'])} files)",
                                   delete_patterns=plan["delete_patterns"], ignore_patterns=[".*", "*/.*"])
    except OfflineModeIsEnabled as exc:
        raise InfrastructureError("the Hugging Face Hub is switched off here (HF_HUB_OFFLINE=1)",
                                  hint="unset HF_HUB_OFFLINE to publish, or use --dry-run") from exc
    except HfHubHTTPError as exc:
        status = getattr(exc.response, "status_code", None)
        hint = ("log in (`hf auth login`) or set HF_TOKEN with write access to the organisation"
                if status in (401, 403) else "check the repo id and your network, then run it again")
        raise InfrastructureError(f"the Hub refused the upload ({status}): {exc}", hint=hint) from exc
    plan.update(url=str(repo), commit=getattr(commit, "oid", None), commit_url=getattr(commit, "commit_url", None))
    return plan
