"""Errors of the toolchain layer: all are infrastructure problems, never a candidate's fault."""

from __future__ import annotations

from amdkv.errors import InfrastructureError


class ToolchainError(InfrastructureError):
    """A compiler toolchain is missing, broken, or could not be installed."""


class ToolchainNotInstalled(ToolchainError):
    """No usable hipcc was found for the requested architecture."""
