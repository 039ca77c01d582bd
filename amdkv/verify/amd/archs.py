"""Moved to `amdkv/archs.py` (issue 20): the HIP toolchain reads the same table and must not import
the verifier. Re-exported here for code that imports `amdkv.verify.amd.archs`; new code imports
`amdkv.archs`."""

from amdkv.archs import ARCHS, DEFAULT_ARCHS, AmdArch, get_arch, lds_limit, lds_occupancy_cap  # noqa: F401
