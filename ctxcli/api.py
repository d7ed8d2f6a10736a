"""The Python API: what each ``ctxcli`` command does, as one function.

Importing this module loads none of the pipeline, tiktoken or YAML: each function
imports what it needs when called. The settings keywords (``max_tokens``,
``stages``, ``model``, ``encoding``, ``format``, ``messages_key``, ``on_error``,
``stage_options``, ``summarizer``) are those of :func:`ctxcli.config.resolve`, with
the command's defaults; every function raises :class:`ctxcli.errors.CtxcliError`
(a subclass naming the file and line) for a bad input or setting.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

#: A file's path: a string or a :class:`pathlib.Path` (any ``os.PathLike``).
FilePath: TypeAlias = "str | os.PathLike[str]"

if TYPE_CHECKING:
    from ctxcli.compress import FileStats
    from ctxcli.skills import Skill, SkillDetail
    from ctxcli.store import RestoreStats
    from ctxcli.validate import Problem


def compress_records(
    records: Iterable[Mapping[str, Any]],
    *,
    max_tokens: int | None = None,
    stages: str | None = None,
    format: str | None = None,
    store: FilePath | None = None,
    **settings: Any,
) -> list[dict[str, Any]]:
    """Compress ``records`` as ``ctxcli compress`` compresses a JSON lines file of
    them, and return the records it writes: each in the format it was read in
    (OpenAI, Anthropic, ShareGPT, ...: detected per record unless ``format`` names
    one), a record no stage changed equal to its input. The lines of one Claude Code
    session (or another whole-file format) are one conversation, and come back as
    the session's lines.

    ``max_tokens`` is the budget of each conversation (default 8000; 0 for none),
    ``stages`` the comma-separated stages (default ``placeholder,summary,priority``).
    The originals placeholders replace are added to ``store`` (a JSON lines file that
    :func:`restore_file` reads back; never replaced, so calls may share one), or go
    nowhere when it is ``None``. A bad record
    raises :class:`ctxcli.errors.InputError` naming it ``records[record N]`` (from 0).

    Example::

        ctxcli.compress_records([{"messages": [...]}], max_tokens=2000, stages="window")
    """
    from ctxcli import jsonio
    from ctxcli.compress import Compressor
    from ctxcli.config import resolve
    from ctxcli.errors import ConfigError, InputError

    if isinstance(records, (Mapping, str, bytes)):  # one record, or text: no list of them
        raise ConfigError(
            f"records must be a list of records (objects), not {type(records).__name__}: "
            "give one record as [record]"
        )
    options = resolve(stages=stages, max_tokens=max_tokens, format=format, **settings)
    with tempfile.TemporaryDirectory(prefix="ctxcli-") as folder:
        source, target = os.path.join(folder, "in.jsonl"), os.path.join(folder, "out.jsonl")
        with open(source, "wb") as file:
            file.writelines(jsonio.dumps(record) + b"\n" for record in records)
        try:
            Compressor(options).file(
                source,
                target,
                store_path=_name(store) or os.devnull,
                add_to_store=store is not None,  # as compress_file adds to it
            )
        except InputError as error:
            if error.path != source:
                raise
            # named as the caller knows it, not by a temporary file that is gone
            record = None if error.line is None else error.line - 1
            raise InputError("records", None, error.reason, record=record) from None
        return [jsonio.loads(line, target, number) for number, line in jsonio.iter_lines(target)]


def compress_file(
    path: FilePath,
    output: FilePath | None = None,
    *,
    store: FilePath | None = None,
    stats: FilePath | None = None,
    **settings: Any,
) -> FileStats:
    """Compress the file ``path`` into ``output`` as ``ctxcli compress PATH -o OUTPUT``
    does (default ``<name>.compressed.<ext>`` beside it, with the stats and the store
    beside that: see :func:`ctxcli.inputs.plan`), and return its
    :class:`ctxcli.compress.FileStats` (``.to_json()`` is the stats file)."""
    from ctxcli.compress import Compressor, planned
    from ctxcli.config import resolve
    from ctxcli.inputs import plan

    options = resolve(**settings)
    restorable = "placeholder" in options.stage_names
    [item] = plan(
        [os.fspath(path)],
        output=_name(output),
        stats=_name(stats),
        store=_name(store),
        restorable=restorable,
    )
    return planned(Compressor(options), item)  # a named store added to, as by the CLI


def count_tokens(path: FilePath, **settings: Any) -> int:
    """The tokens of the conversations in ``path``, counted as ``ctxcli count`` (and
    so ``compress``, for its "tokens before") counts them with the same settings."""
    from ctxcli.config import resolve
    from ctxcli.count import Counting

    return Counting(resolve(**settings)).file(os.fspath(path)).tokens


def validate_file(
    path: FilePath, *, format: str | None = None, messages_key: str | None = None
) -> list[Problem]:
    """Every problem ``ctxcli validate`` finds in ``path``, in file order (empty when
    the file keeps every rule of its format); ``str()`` of each is the line it
    prints. Raises :class:`ctxcli.errors.ConfigError` for an unknown ``format`` or
    an empty ``messages_key`` (as :func:`ctxcli.config.resolve` does; an empty key
    had meant no key)."""
    from ctxcli import validate
    from ctxcli.config import resolve

    settings = resolve(format=format, messages_key=messages_key)
    found = validate.validate_file(
        os.fspath(path), format=settings.format, messages_key=settings.messages_key
    )
    return list(found)


def restore_file(
    compressed: FilePath, output: FilePath, store: FilePath | None = None
) -> RestoreStats:
    """Write ``compressed`` with the originals back in place of its placeholders to
    ``output``, as ``ctxcli restore`` does, from ``store`` (default the store
    ``compress`` wrote beside it). Raises :class:`ctxcli.errors.StoreError` naming
    the placeholders the store cannot resolve (and writes nothing)."""
    from ctxcli import store as stores
    from ctxcli.errors import ConfigError
    from ctxcli.inputs import store_of

    found = _name(store) or store_of(os.fspath(compressed))
    if found is None:
        raise ConfigError("give the store when the compressed file is read from stdin")
    return stores.restore_file(os.fspath(compressed), os.fspath(output), found)


def _name(path: FilePath | None) -> str | None:
    """``path`` as the ``str`` the commands take (a :class:`pathlib.Path` had raised
    AttributeError deep inside), ``None`` as it is."""
    return None if path is None else os.fspath(path)


def list_skills(dirs: FilePath | Sequence[FilePath] | None = None) -> list[Skill]:
    """The skills in ``dirs`` (a folder or a list of them; default ``./skills``, else
    the skills shipped with ctxcli), as ``ctxcli skills list`` lists them: from their
    front matter alone."""
    from ctxcli import skills

    return skills.list_skills(_folders(dirs))


def show_skill(name: str, dirs: FilePath | Sequence[FilePath] | None = None) -> SkillDetail:
    """One skill in full, as ``ctxcli skills show NAME`` shows it: its metadata, its
    usage guide (the body) and the names of its other files (``dirs``: see
    :func:`list_skills`)."""
    from ctxcli import skills

    return skills.load_detail(skills.get_skill(name, _folders(dirs)))


def _folders(dirs: FilePath | Sequence[FilePath] | None) -> Sequence[FilePath]:
    """The skills folders ``dirs`` names: one folder as a list of it (a string was
    read as a list of one-letter folders: "skills directory not found: t"), the
    default ones for ``None``."""
    from ctxcli import skills

    if dirs is None:
        return skills.default_dirs()[0]
    return [dirs] if isinstance(dirs, (str, os.PathLike)) else dirs
