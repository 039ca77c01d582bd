"""Real AMD compilers on machines without ROCm: find, install (Debian sid chroot) and run hipcc.

See docs/amd_compile.md. Public API: `find_toolchain`, `HipCompiler`, `CompileResult`,
`install_hip_toolchain`.
"""

from amdkv.toolchain.errors import ToolchainError, ToolchainNotInstalled
from amdkv.toolchain.locate import HipToolchain, find_toolchain, find_toolchains, toolchain_dir
from amdkv.toolchain.hipcc import CompileResult, HipCompiler

__all__ = ["ToolchainError", "ToolchainNotInstalled", "HipToolchain", "find_toolchain", "find_toolchains",
           "toolchain_dir", "CompileResult", "HipCompiler"]
