"""Redact credentials in a saved HTTP request/response log before showing it.

Usage: python redact_headers.py LOG_FILE > redacted.txt

Replaces the values of Authorization, Proxy-Authorization, Cookie, Set-Cookie and any
header whose name contains "token", "secret" or "api-key" with "[REDACTED]".
"""

from __future__ import annotations

import re
import sys

SENSITIVE = re.compile(
    r"^(?P<name>(proxy-)?authorization|cookie|set-cookie|[\w-]*(token|secret|api-key)[\w-]*)"
    r"(?P<sep>\s*:\s*).*$",
    re.IGNORECASE | re.MULTILINE,
)


def redact(text: str) -> str:
    """Return ``text`` with the value of every sensitive header replaced."""
    return SENSITIVE.sub(lambda m: f"{m['name']}{m['sep']}[REDACTED]", text)


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as f:
        sys.stdout.write(redact(f.read()))
