"""The runner behind `dataset_scripts/<name>.py`: one published dataset's whole chain, from its
YAML config (generate -> build -> publish).

    python dataset_scripts/triton.py                          # build (records must exist)
    python dataset_scripts/triton.py --steps generate,build   # run the generation command first
    python dataset_scripts/triton.py --publish --dry-run      # build, then list what would be uploaded

Config keys: `dataset` (hip | triton | rocm-qa), `repo_id`, `records` (the record store), `out`
(the Hub-layout folder), `generate.command` (the command that fills `records`: `amdkv gen ...`,
run as a list of arguments), `policy` (BuildPolicy settings, docs/data.md), `private`.
Relative paths are relative to the current directory.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Any

STEPS = ("generate", "build", "publish")


def load_config(path: str | Path) -> dict[str, Any]:
    import yaml

    from amdkv.errors import BadInputError

    config = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    missing = [k for k in ("dataset", "repo_id", "records", "out") if k not in config]
    if missing:
        raise BadInputError(f"{path} lacks {missing}", hint="see amdkv/data/scripts.py for the keys")
    return config


def main(config_path: str | Path, argv: list[str] | None = None) -> int:
    from amdkv.data.api import build_dataset, load_policy
    from amdkv.data.cli import print_build_report
    from amdkv.data.publish import publish
    from amdkv.errors import AmdkvError, BadInputError

    parser = argparse.ArgumentParser(description=f"the {Path(config_path).stem} dataset from {config_path}")
    parser.add_argument("--steps", default="build", help=f"comma-separated, from {', '.join(STEPS)}")
    parser.add_argument("--publish", action="store_true", help="add the publish step")
    parser.add_argument("--dry-run", action="store_true", help="publish: list the files, upload nothing")
    args = parser.parse_args(argv)
    steps = [s.strip() for s in args.steps.split(",") if s.strip()] + (["publish"] if args.publish else [])
    try:
        unknown = sorted(set(steps) - set(STEPS))
        if unknown:
            raise BadInputError(f"unknown step(s) {unknown}", hint=f"steps: {', '.join(STEPS)}")
        config = load_config(config_path)
        if "generate" in steps:
            command = (config.get("generate") or {}).get("command")
            if not command:
                raise BadInputError(f"{config_path} has no generate.command", hint="add the command that writes records")
            print("$ " + " ".join(map(str, command)), file=sys.stderr)
            subprocess.run([str(c) for c in command], check=True)
        if "build" in steps:
            policy = load_policy(None, config.get("policy") or {})
            report = build_dataset(config["dataset"], config["records"], config["out"], policy=policy, overwrite=True,
                                   repo_id=config["repo_id"])
            print_build_report(report, config["out"])
        if "publish" in steps:
            result = publish(config["out"], config["repo_id"], private=bool(config.get("private")), dry_run=args.dry_run)
            action = "would upload" if args.dry_run else "uploaded"
            print(f"{action} {len(result['files'])} files ({result['bytes']:,} bytes) to datasets/{config['repo_id']}")
    except AmdkvError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except subprocess.CalledProcessError as exc:
        print(f"error: the generation command failed with exit code {exc.returncode}", file=sys.stderr)
        return 3
    return 0
