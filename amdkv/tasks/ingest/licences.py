"""The licence filter of corpus ingestion: an allow-list of permissive SPDX licences.

A row is kept only when it names at least one licence and every licence it names is on the
allow-list (KernelBook's `licenses` lists every licence detected in the source repository; one
copyleft or unknown licence among them is enough to make reuse doubtful). Matching ignores case
and maps common spellings ("apache 2.0", "bsd-3") to SPDX ids.
"""

from __future__ import annotations

import json
import re
from typing import Any

DEFAULT_ALLOWED = ("MIT", "MIT-0", "Apache-2.0", "BSD-2-Clause", "BSD-3-Clause", "0BSD", "ISC", "Unlicense",
                   "CC0-1.0", "Zlib", "BSL-1.0", "Python-2.0", "PSF-2.0", "UPL-1.0", "X11")
# SPDX ids we recognise (so that a non-permissive one is reported by its proper name).
KNOWN = DEFAULT_ALLOWED + ("GPL-2.0", "GPL-2.0-only", "GPL-2.0-or-later", "GPL-3.0", "GPL-3.0-only",
                           "GPL-3.0-or-later", "LGPL-2.1", "LGPL-3.0", "AGPL-3.0", "MPL-2.0", "EPL-1.0",
                           "EPL-2.0", "CC-BY-4.0", "CC-BY-SA-4.0", "CC-BY-NC-4.0", "CC-BY-NC-SA-4.0",
                           "Artistic-2.0", "WTFPL", "OFL-1.1")
ALIASES = {"apache 2.0": "Apache-2.0", "apache2": "Apache-2.0", "apache-2": "Apache-2.0", "apache license 2.0": "Apache-2.0",
           "bsd-3": "BSD-3-Clause", "bsd3": "BSD-3-Clause", "bsd-2": "BSD-2-Clause", "bsd2": "BSD-2-Clause",
           "mit license": "MIT", "cc0": "CC0-1.0", "psf": "PSF-2.0", "gpl-2": "GPL-2.0", "gpl-3": "GPL-3.0"}
NO_LICENCE = "no_licence"
NOT_ALLOWED = "licence_not_allowed"
_CANONICAL = {k.lower(): k for k in KNOWN}


def canonical(name: str) -> str:
    """SPDX spelling of a licence name (unknown names come back stripped, as given)."""
    key = name.strip().lower()
    return _CANONICAL.get(key) or ALIASES.get(key) or name.strip()


def parse_licences(value: Any) -> list[str]:
    """Licences from a row's field: a list, a JSON list in a string, or a string of names separated by
    commas, semicolons, `AND`, `OR` or `/`. Nothing (None, "", []) gives []."""
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        items = [str(v) for v in value if v is not None]
    else:
        text = str(value).strip()
        if text.startswith("["):
            try:
                return parse_licences(json.loads(text))
            except ValueError:
                pass
        items = re.split(r"\s*(?:,|;|/|\bAND\b|\bOR\b)\s*", text)
    return [canonical(i) for i in items if i and i.strip()]


def licence_verdict(licences: list[str], allowed: tuple[str, ...]) -> tuple[str | None, str]:
    """(None, SPDX expression) when the row may be kept, else (reason code, explanation)."""
    if not licences:
        return NO_LICENCE, "the row names no licence"
    allowed_keys = {canonical(a).lower() for a in allowed}
    refused = [name for name in licences if name.lower() not in allowed_keys]
    if refused:
        return NOT_ALLOWED, f"licence(s) {refused} not on the allow-list"
    return None, " AND ".join(dict.fromkeys(licences))
