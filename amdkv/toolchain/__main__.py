"""`python -m amdkv.toolchain install hip` works before the `amdkv` console script is wired."""

from amdkv.toolchain.cli import toolchain_group

if __name__ == "__main__":
    toolchain_group(prog_name="python -m amdkv.toolchain")
