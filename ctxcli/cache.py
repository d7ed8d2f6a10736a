"""A persistent cache of summaries: one SQLite file, safe to share between threads."""

from __future__ import annotations

import hashlib
import sqlite3
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ctxcli import jsonio
from ctxcli.errors import ConfigError

FILE_NAME = "summaries.sqlite"
#: The longest text (characters) the cache holds: a summary is a few thousand at most,
#: so anything longer is not one (an older ctxcli cached raw replies).
MAX_TEXT_CHARS = 64 * 1024


def default_dir(environ: Mapping[str, str]) -> Path:
    """``$XDG_CACHE_HOME/ctxcli``, else ``~/.cache/ctxcli`` (the XDG Base Directory
    default): the summary cache and the parsed tokenizer live there. ``environ`` is
    passed in: the CLI reads the environment."""
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ctxcli"


def default_path(environ: Mapping[str, str]) -> Path:
    """``$XDG_CACHE_HOME/ctxcli/summaries.sqlite``, else ``~/.cache/ctxcli/…``."""
    return default_dir(environ) / FILE_NAME


def key(*parts: Any) -> str:
    """A stable SHA-256 hex key of JSON-serialisable ``parts`` (exact, order-sensitive)."""
    return hashlib.sha256(jsonio.dumps(list(parts), sort_keys=True)).hexdigest()


class SummaryCache:
    """Maps a key (see :func:`key`) to a summary text, persisted in the SQLite file
    ``path`` (created with its folder when missing).

    One connection is shared by all threads behind a lock; SQLite's WAL journal lets
    several processes use the same file. Raises :class:`ConfigError` naming the path
    when the file cannot be opened or is not a cache.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, check_same_thread=False, timeout=30)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS summaries (key TEXT PRIMARY KEY, text TEXT NOT NULL)"
            )
            self._db.commit()
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(f"{self.path}: cannot use as summary cache: {exc}") from None

    def get(self, cache_key: str) -> str | None:
        """The stored text for ``cache_key``, or ``None`` (also for a text over
        :data:`MAX_TEXT_CHARS`, or when the file cannot be read just now: the cache is an
        optimisation, never a reason to fail a run)."""
        try:
            with self._lock:
                row = self._db.execute(
                    "SELECT text FROM summaries WHERE key = ? AND length(text) <= ?",
                    (cache_key, MAX_TEXT_CHARS),
                ).fetchone()
        except sqlite3.Error:
            return None
        return None if row is None else str(row[0])

    def put(self, cache_key: str, text: str) -> bool:
        """Store ``text`` under ``cache_key`` (replacing an older one); ``False`` when
        it was not written: over :data:`MAX_TEXT_CHARS`, or the file could not be written
        (disk full, locked too long)."""
        if len(text) > MAX_TEXT_CHARS:
            return False
        try:
            with self._lock:
                self._db.execute(
                    "INSERT OR REPLACE INTO summaries (key, text) VALUES (?, ?)",
                    (cache_key, text),
                )
                self._db.commit()
        except sqlite3.Error:
            return False
        return True

    def close(self) -> None:
        with self._lock:
            self._db.close()
