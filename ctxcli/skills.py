"""Skills: Markdown files with YAML front matter, listed cheaply and loaded lazily.

A skill is a tool an agent can call. Two layouts are found in each skills directory:

- flat: ``DIR/NAME.md``;
- Agent Skills (agentskills.io specification): ``DIR/NAME/SKILL.md``, with optional
  ``scripts/``, ``references/`` and ``assets/`` beside it.

Both start with YAML front matter between ``---`` lines: ``name``, ``description``,
``parameters`` (ctxcli's extension: a map of parameter name to ``{type, description,
required, enum, default, items, ...}``, or a whole JSON Schema object) and the spec's optional
``license``, ``compatibility``, ``metadata`` and ``allowed-tools``.

Progressive disclosure, as in the Agent Skills spec: :func:`list_skills` reads only the front
matter of each file (tier 1: it stops at the closing ``---`` and never reads a body);
:func:`load_detail` reads one body and lists, without reading them, the skill's other files
(tier 2, with tier 3 left to the caller).
"""

from __future__ import annotations

import html
import io
import json
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml

from ctxcli import yamlio
from ctxcli.errors import SkillError, YamlError

Layout = Literal["flat", "directory"]
ExportFormat = Literal["json", "openai", "anthropic", "mcp", "xml"]
Severity = Literal["error", "warning"]

EXPORT_FORMATS: tuple[ExportFormat, ...] = ("json", "openai", "anthropic", "mcp", "xml")
SKILL_FILE = "SKILL.md"
# OpenAI function names and Anthropic tool names (the stricter, 64-character form).
FUNCTION_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
# Agent Skills spec: lowercase letters and digits, single hyphens inside, at most 64.
SPEC_NAME_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
# Anthropic's input_schema property keys.
PARAMETER_NAME_RE = re.compile(r"^[a-zA-Z0-9_.-]{1,64}$")
JSON_SCHEMA_TYPES = frozenset({"string", "number", "integer", "boolean", "array", "object", "null"})
SPEC_DESCRIPTION_MAX = 1024  # characters, Agent Skills spec
SPEC_COMPATIBILITY_MAX = 500  # characters, Agent Skills spec
MAX_FRONT_MATTER_BYTES = yamlio.MAX_BYTES
_FIRST_CHUNK = 512  # bytes; most front matter fits, so most files cost one read() call
_BOM = b"\xef\xbb\xbf"
_TYPE_HINTS = {
    "str": "string", "int": "integer", "float": "number", "bool": "boolean",
    "list": "array", "dict": "object", "none": "null",
}  # fmt: skip

__all__ = [
    "EXPORT_FORMATS",
    "FrontMatter",
    "Problem",
    "ScanResult",
    "Skill",
    "SkillDetail",
    "TokenReport",
    "check_name",
    "count_tokens",
    "export_skills",
    "get_skill",
    "list_skills",
    "load_detail",
    "parameters_schema",
    "read_front_matter",
    "scan_skills",
    "skill_json",
    "token_report",
]


@dataclass(frozen=True)
class FrontMatter:
    """The parsed front matter of one file and where its body starts.

    ``data`` is the YAML mapping as ``yaml.safe_load`` builds it. ``body_offset`` is in bytes
    from the start of the file (BOM included); ``body_line`` is the 1-based file line of the
    first body line. ``bytes_read`` counts every byte the process read from the file, which
    is at least ``body_offset`` and, because reads are chunked, a little more.
    ``key_lines`` maps a key path such as ``("name",)`` or ``("parameters", "path")`` to its
    1-based file line, so later checks can point at the line.
    """

    data: dict[str, Any]
    body_offset: int
    body_line: int
    bytes_read: int
    key_lines: dict[tuple[str, ...], int]


@dataclass(frozen=True)
class Skill:
    """Tier 1 of a skill: what a listing shows, read from the front matter alone.

    ``parameters`` is a JSON Schema object (``{"type": "object", "properties": {...},
    "required": [...]}``) built from the front matter. ``path`` is the skill file as found
    under ``root`` (the skills directory it came from); ``frontmatter`` is the mapping as
    written, unknown keys included. Offsets and counts are in bytes.
    """

    name: str
    description: str
    parameters: dict[str, Any]
    path: Path
    root: Path
    layout: Layout
    frontmatter: dict[str, Any]
    body_offset: int
    body_line: int
    bytes_read: int

    @property
    def directory(self) -> Path | None:
        """The skill's own folder in the directory layout, else None."""
        return self.path.parent if self.layout == "directory" else None


@dataclass(frozen=True)
class SkillDetail:
    """Tier 2 of a skill: its body (the usage guide) and the names of its other files.

    ``body`` is the text after the closing ``---``, with CRLF turned into LF and surrounding
    blank space trimmed. ``files`` are POSIX paths relative to the skill folder (directory
    layout only), sorted, listed without being read.
    """

    skill: Skill
    body: str
    files: tuple[str, ...]


@dataclass(frozen=True)
class Problem:
    """One finding of :func:`scan_skills`: a file, a 1-based line if known, a message."""

    path: Path
    line: int | None
    message: str
    severity: Severity = "error"

    def __str__(self) -> str:
        where = f"{self.path}:{self.line}" if self.line is not None else str(self.path)
        return f"{where}: {self.severity}: {self.message}"


@dataclass(frozen=True)
class ScanResult:
    """Every skill that could be read, and every problem found on the way."""

    skills: tuple[Skill, ...]
    problems: tuple[Problem, ...]
    checked: int  # skill files found, readable or not

    @property
    def errors(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if p.severity == "error")

    @property
    def warnings(self) -> tuple[Problem, ...]:
        return tuple(p for p in self.problems if p.severity == "warning")

    def raise_errors(self) -> None:
        """Raise SkillError listing every error, one per line; return if there are none."""
        _raise_errors(self.errors)


@dataclass(frozen=True)
class TokenReport:
    """What lazy loading saves, in tokens of ``encoding``.

    ``listing`` is the whole listing as exported in one format; ``bodies`` is the sum of the
    full bodies. ``per_skill`` holds ``(name, listing tokens, body tokens)`` per skill, its
    listing being that skill's entry exported alone.
    """

    listing: int
    bodies: int
    per_skill: tuple[tuple[str, int, int], ...]
    encoding: str = "o200k_base"


# --------------------------------------------------------------------------- front matter


class _ChunkReader:
    """Lines from an unbuffered binary file, reading small chunks and counting the bytes."""

    def __init__(self, raw: io.RawIOBase) -> None:
        self._raw = raw
        self._buf = b""
        self._chunk = _FIRST_CHUNK
        self.bytes_read = 0

    def readline(self) -> bytes:
        while True:
            nl = self._buf.find(b"\n")
            if nl >= 0:
                line, self._buf = self._buf[: nl + 1], self._buf[nl + 1 :]
                return line
            data = self._raw.read(self._chunk)
            if not data:
                line, self._buf = self._buf, b""
                return line
            self.bytes_read += len(data)
            self._buf += data
            # Long front matter: fewer calls, and the cap below still bounds the total.
            self._chunk = min(self._chunk * 2, 16 * 1024)


def _is_fence(line: bytes) -> bool:
    return line.rstrip() == b"---"


def read_front_matter(path: str | os.PathLike[str]) -> FrontMatter:
    """Read the front matter of one skill file, stopping at the closing ``---`` line.

    The body is never read (beyond the rest of the last chunk of at most 16 KiB, usually
    under 512 bytes). A UTF-8 BOM and CRLF line ends are accepted.

    Raises SkillError, as ``PATH:LINE: message`` with file line numbers, when the file does
    not start with ``---``, the front matter is not closed within
    ``MAX_FRONT_MATTER_BYTES`` bytes, is not UTF-8, is not valid YAML within the bounds of
    :mod:`ctxcli.yamlio` (no aliases, nesting at most 100 deep) or is not a mapping; and as
    ``PATH: message`` when the file cannot be opened.
    """
    p = Path(path)
    try:
        # Unbuffered so the byte count is what the process asked the OS for.
        with open(p, "rb", buffering=0) as raw:
            reader = _ChunkReader(raw)
            first = reader.readline()
            consumed = len(first)
            if first.startswith(_BOM):
                first = first[len(_BOM) :]
            if not _is_fence(first):
                raise SkillError(f"{p}:1: no front matter: the file must start with a '---' line")
            lines: list[bytes] = []
            line_no = 1
            while True:
                line = reader.readline()
                if not line:
                    raise SkillError(f"{p}:1: front matter is not closed with a '---' line")
                line_no += 1
                consumed += len(line)
                if _is_fence(line):
                    break
                if consumed > MAX_FRONT_MATTER_BYTES:
                    raise SkillError(
                        f"{p}:1: front matter is longer than {MAX_FRONT_MATTER_BYTES} bytes"
                        " (no closing '---' line found)"
                    )
                lines.append(line)
    except OSError as e:
        raise SkillError(f"{p}: cannot read: {e.strerror or e}") from e
    raw_yaml = b"".join(lines)
    try:
        text = raw_yaml.decode("utf-8")
    except UnicodeDecodeError as e:
        bad_line = 2 + raw_yaml.count(b"\n", 0, e.start)
        raise SkillError(f"{p}:{bad_line}: front matter is not valid UTF-8") from e
    data, key_lines = _parse_yaml(text, p, first_line=2)
    return FrontMatter(
        data=data,
        body_offset=consumed,
        body_line=line_no + 1,
        bytes_read=reader.bytes_read,
        key_lines=key_lines,
    )


def _parse_yaml(
    text: str, path: Path, *, first_line: int
) -> tuple[dict[str, Any], dict[tuple[str, ...], int]]:
    """Bounded ``yaml.safe_load`` (:func:`ctxcli.yamlio.parse`: no aliases, a size and
    depth bound) plus the file line of each top-level and parameter key."""
    try:
        document = yamlio.parse(text, path=str(path), first_line=first_line)
    except YamlError as e:
        line = e.line if e.line is not None else first_line
        raise SkillError(f"{path}:{line}: invalid YAML in front matter: {e.reason}") from e
    data, node = document.data, document.node
    if not isinstance(data, dict):
        kind = "empty" if data is None else type(data).__name__
        raise SkillError(
            f"{path}:{first_line}: front matter must be a YAML mapping of fields, not {kind}"
        )
    key_lines: dict[tuple[str, ...], int] = {}
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if not isinstance(key, yaml.ScalarNode):
                continue
            key_lines[(key.value,)] = first_line + key.start_mark.line
            if key.value == "parameters" and isinstance(value, yaml.MappingNode):
                for pkey, _ in value.value:
                    if isinstance(pkey, yaml.ScalarNode):
                        key_lines[("parameters", pkey.value)] = first_line + pkey.start_mark.line
    return data, key_lines


# --------------------------------------------------------------------------- parameters


def parameters_schema(parameters: Mapping[str, Any] | None) -> dict[str, Any]:
    """Turn a front matter ``parameters`` value into a JSON Schema object.

    Accepts the ctxcli map (``{NAME: {type, description, required: bool, ...}}``), which
    becomes ``{"type": "object", "properties": {NAME: {...without required}}, "required":
    [names with required: true]}``, or a JSON Schema object already (``type: object``), which
    is returned as a copy with ``properties`` and ``required`` filled in. None gives the empty
    object schema. Does not validate; :func:`scan_skills` does.
    """
    if not parameters:
        return {"type": "object", "properties": {}, "required": []}
    if _is_schema_form(parameters):
        schema = dict(parameters)
        schema.setdefault("properties", {})
        schema.setdefault("required", [])
        return schema
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, spec in parameters.items():
        spec = spec if isinstance(spec, Mapping) else {}
        properties[str(name)] = {k: v for k, v in spec.items() if k != "required"}
        if spec.get("required") is True:
            required.append(str(name))
    return {"type": "object", "properties": properties, "required": required}


def _is_schema_form(parameters: Mapping[str, Any]) -> bool:
    # In the map form every value is a mapping, so a string "object" means a schema.
    return parameters.get("type") == "object"


def _check_schema(schema: Any, where: str) -> list[str]:
    """Messages for JSON Schema fragments whose types or required lists are wrong."""
    if not isinstance(schema, Mapping):
        return [f"{where} must be a mapping, not {type(schema).__name__}"]
    messages: list[str] = []
    if "type" in schema:
        declared = schema["type"]
        for t in declared if isinstance(declared, list) else [declared]:
            if not isinstance(t, str) or t not in JSON_SCHEMA_TYPES:
                hint = _TYPE_HINTS.get(str(t).lower())
                suggestion = f" (did you mean '{hint}'?)" if hint else ""
                messages.append(
                    f"{where}: type {t!r} is not a JSON Schema type{suggestion};"
                    f" use one of {', '.join(sorted(JSON_SCHEMA_TYPES))}"
                )
    if "enum" in schema and not isinstance(schema["enum"], list):
        messages.append(f"{where}: enum must be a list")
    if "items" in schema:
        messages.extend(_check_schema(schema["items"], f"{where}.items"))
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping):
        messages.append(f"{where}: properties must be a mapping")
        properties = {}
    for name, sub in properties.items():
        messages.extend(_check_schema(sub, f"{where}.{name}"))
    required = schema.get("required", [])
    if not isinstance(required, list):
        messages.append(f"{where}: required must be a list of property names")
    else:
        for name in required:
            if name not in properties:
                messages.append(f"{where}: required parameter {name!r} is not in properties")
    return messages


def _check_parameters(
    parameters: Any, path: Path, lines: Mapping[tuple[str, ...], int]
) -> list[Problem]:
    line = lines.get(("parameters",))
    if parameters is None:
        return []
    if not isinstance(parameters, Mapping):
        return [Problem(path, line, "parameters must be a mapping of parameter name to schema")]
    if _is_schema_form(parameters):
        return [Problem(path, line, m) for m in _check_schema(parameters, "parameters")]
    problems: list[Problem] = []
    for name, spec in parameters.items():
        where = lines.get(("parameters", str(name)), line)
        if not isinstance(name, str) or not PARAMETER_NAME_RE.match(name):
            problems.append(
                Problem(
                    path, where, f"parameter name {name!r} must match {PARAMETER_NAME_RE.pattern}"
                )
            )
        if not isinstance(spec, Mapping):
            problems.append(
                Problem(
                    path, where, f"parameter {name!r} must be a mapping such as {{type: string}}"
                )
            )
            continue
        if "required" in spec and not isinstance(spec["required"], bool):
            problems.append(
                Problem(path, where, f"parameter {name!r}: required must be true or false")
            )
        rest = {k: v for k, v in spec.items() if k != "required"}
        problems.extend(Problem(path, where, m) for m in _check_schema(rest, f"parameter {name!r}"))
    return problems


# --------------------------------------------------------------------------- discovery

#: The folder a skills command reads when given none, when it exists (relative to the
#: working directory).
DEFAULT_DIR = "skills"


def shipped_dir() -> Path:
    """The skills that ship with ctxcli: package data, ``ctxcli/shipped_skills`` (the
    repository's top-level ``skills`` is a link to it)."""
    return Path(__file__).resolve().parent / "shipped_skills"


def default_dirs(cwd: str | os.PathLike[str] = ".") -> tuple[list[Path], bool]:
    """Where to look for skills when no folder is given: ``cwd/skills`` when it is a
    folder, else :func:`shipped_dir`; and whether that is the shipped one."""
    local = Path(cwd) / DEFAULT_DIR
    if local.is_dir():
        return [Path(DEFAULT_DIR) if str(cwd) == "." else local], False
    return [shipped_dir()], True


def _inside(path: Path, root: Path) -> bool:
    """Whether ``path``, with every symlink followed, stays under ``root`` (resolved)."""
    try:
        path.resolve().relative_to(root.resolve())
    except (ValueError, OSError):
        return False
    return True


def _candidates(root: Path) -> Iterable[tuple[Path, Layout]]:
    """Skill files directly in ``root`` (flat) or one folder down (``SKILL.md``), sorted."""
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            for file_name in (SKILL_FILE, "skill.md"):
                if (entry / file_name).is_file():
                    yield entry / file_name, "directory"
                    break
        elif entry.suffix == ".md" and entry.name.lower() != "readme.md" and entry.is_file():
            yield entry, "flat"


def scan_skills(dirs: Sequence[str | os.PathLike[str]], *, strict: bool = False) -> ScanResult:
    """Find and check every skill in ``dirs``, reading front matter only.

    Checks: front matter present and parseable; ``name`` and ``description`` non-empty
    strings; ``name`` a function name valid for OpenAI and Anthropic
    (``^[a-zA-Z0-9_-]{1,64}$``) and, in the directory layout, equal to its folder name (a flat
    file whose stem differs is a warning); parameter types are JSON Schema types and every
    required parameter exists; optional spec fields have their spec types; no two skills
    share a name (an error naming both paths); no skill file is a symlink leading out of its
    directory (refused unread). ``strict`` adds the Agent Skills rules: name of lowercase
    letters, digits and single hyphens; description at most 1024 characters; compatibility
    at most 500.

    Returns every skill whose front matter gave a name and a description, with all problems
    (errors and warnings) in file order. Raises SkillError only when a directory is missing.
    """
    skills: list[Skill] = []
    problems: list[Problem] = []
    checked = 0
    seen_roots: set[Path] = set()
    for d in dirs:
        root = Path(d)
        if not root.is_dir():
            raise SkillError(f"skills directory not found: {root}")
        if root.resolve() in seen_roots:
            continue  # the same directory given twice is not a duplicate of every skill
        seen_roots.add(root.resolve())
        for path, layout in _candidates(root):
            checked += 1
            if not _inside(path, root):
                problems.append(
                    Problem(path, None, "symlink leads outside the skills directory; not read")
                )
                continue
            try:
                fm = read_front_matter(path)
            except SkillError as e:
                problems.append(_problem_from_error(path, e))
                continue
            skill, found = _check_front_matter(path, root, layout, fm, strict=strict)
            problems.extend(found)
            if skill is not None:
                skills.append(skill)
    problems.extend(_duplicates(skills))
    return ScanResult(tuple(skills), tuple(problems), checked)


def _problem_from_error(path: Path, error: SkillError) -> Problem:
    # read_front_matter says "PATH:LINE: message"; keep the line, drop the repeated path.
    text = str(error)
    prefix = f"{path}:"
    if text.startswith(prefix):
        rest = text[len(prefix) :]
        head, sep, message = rest.partition(": ")
        if sep and head.isdigit():
            return Problem(path, int(head), message)
        return Problem(path, None, rest.lstrip())
    return Problem(path, None, text)


def _check_front_matter(
    path: Path, root: Path, layout: Layout, fm: FrontMatter, *, strict: bool
) -> tuple[Skill | None, list[Problem]]:
    data, lines = fm.data, fm.key_lines
    problems: list[Problem] = []

    def field_problem(key: str, message: str, severity: Severity = "error") -> None:
        problems.append(Problem(path, lines.get((key,), 2), message, severity))

    name = data.get("name")
    description = data.get("description")
    for key, value in (("name", name), ("description", description)):
        if value is None:
            problems.append(Problem(path, 2, f"missing required field in front matter: {key}"))
        elif not isinstance(value, str) or not value.strip():
            field_problem(key, f"field '{key}' must be a non-empty string")
    if isinstance(name, str) and name.strip():
        expected = path.parent.name if layout == "directory" else path.stem
        if not FUNCTION_NAME_RE.match(name):
            field_problem(
                "name",
                f"name {name!r} is not a valid OpenAI/Anthropic function name:"
                " use 1-64 letters, digits, '_' or '-'",
            )
        elif name != expected:
            where = "folder" if layout == "directory" else "file"
            severity: Severity = "error" if layout == "directory" or strict else "warning"
            field_problem(
                "name", f"name {name!r} differs from its {where} name {expected!r}", severity
            )
        if strict and not (len(name) <= 64 and SPEC_NAME_RE.match(name)):
            field_problem(
                "name",
                f"name {name!r} breaks the Agent Skills rule: lowercase letters, digits and"
                " single hyphens, not at the start or end",
            )
    if strict and isinstance(description, str) and len(description) > SPEC_DESCRIPTION_MAX:
        field_problem(
            "description",
            f"description is {len(description)} characters; the Agent Skills limit is"
            f" {SPEC_DESCRIPTION_MAX}",
        )
    for key in ("license", "compatibility", "allowed-tools"):
        if key in data and not isinstance(data[key], str):
            field_problem(key, f"field '{key}' must be a string")
    if "metadata" in data and not isinstance(data["metadata"], Mapping):
        field_problem("metadata", "field 'metadata' must be a mapping")
    compatibility = data.get("compatibility")
    if strict and isinstance(compatibility, str) and len(compatibility) > SPEC_COMPATIBILITY_MAX:
        field_problem(
            "compatibility",
            f"compatibility is {len(compatibility)} characters; the Agent Skills limit is"
            f" {SPEC_COMPATIBILITY_MAX}",
        )
    problems.extend(_check_parameters(data.get("parameters"), path, lines))

    if not (isinstance(name, str) and name.strip() and isinstance(description, str)):
        return None, problems
    raw_parameters = data.get("parameters")
    skill = Skill(
        name=name,
        description=description.strip(),
        parameters=parameters_schema(
            raw_parameters if isinstance(raw_parameters, Mapping) else None
        ),
        path=path,
        root=root,
        layout=layout,
        frontmatter=data,
        body_offset=fm.body_offset,
        body_line=fm.body_line,
        bytes_read=fm.bytes_read,
    )
    return skill, problems


def _duplicates(skills: Sequence[Skill]) -> list[Problem]:
    first: dict[str, Skill] = {}
    problems: list[Problem] = []
    for skill in skills:
        if skill.name in first:
            problems.append(
                Problem(
                    skill.path,
                    None,
                    f"duplicate skill name {skill.name!r}:"
                    f" also defined in {first[skill.name].path}",
                )
            )
        else:
            first[skill.name] = skill
    return problems


def _raise_errors(errors: Sequence[Problem]) -> None:
    if errors:
        noun = "problem" if len(errors) == 1 else "problems"
        lines = "\n".join(f"  {p}" for p in errors)
        raise SkillError(f"{len(errors)} skill {noun}:\n{lines}")


# --------------------------------------------------------------------------- public lookups


def list_skills(dirs: Sequence[str | os.PathLike[str]]) -> list[Skill]:
    """Tier 1: every skill in ``dirs``, in directory order then file name order.

    Reads front matter only. Raises SkillError listing every error :func:`scan_skills`
    finds (malformed front matter, missing name, duplicate names, ...), or naming a
    missing directory; warnings are ignored.
    """
    result = scan_skills(dirs)
    result.raise_errors()
    return list(result.skills)


def check_name(name: str) -> str:
    """Return ``name`` if it can name a skill; raise SkillError otherwise.

    Names with ``/``, ``\\`` or ``..`` are refused first, with that reason, since a name
    must never become a path.
    """
    if "/" in name or "\\" in name or ".." in name:
        raise SkillError(f"invalid skill name {name!r}: a name may not contain '/', '\\' or '..'")
    if not FUNCTION_NAME_RE.match(name):
        raise SkillError(f"invalid skill name {name!r}: use 1-64 letters, digits, '_' or '-'")
    return name


def get_skill(name: str, dirs: Sequence[str | os.PathLike[str]]) -> Skill:
    """Tier 1 of one skill, found by its front matter name in ``dirs``.

    The name is checked with :func:`check_name` before any file is touched, and the file is
    found by scanning, never by joining the name onto a path. Raises SkillError for an unsafe
    name, an unknown name (naming the available skills, or listing the errors of a file
    named ``NAME.md`` or ``NAME/SKILL.md`` that gave no skill), a duplicated name (naming
    both paths) or errors in the skill's own file. Errors in other skills do not stop it.
    """
    check_name(name)
    result = scan_skills(dirs)
    matches = [s for s in result.skills if s.name == name]
    if not matches:
        # A file named for the skill whose front matter could not be read: say why.
        _raise_errors([p for p in result.errors if name in (p.path.stem, p.path.parent.name)])
        available = ", ".join(sorted({s.name for s in result.skills})) or "none"
        message = f"unknown skill {name!r}; available: {available}"
        if result.errors:
            message += f" ({len(result.errors)} skill files have errors)"
        raise SkillError(message)
    paths = {m.path for m in matches}
    _raise_errors([p for p in result.errors if p.path in paths])
    return matches[0]


def load_detail(skill: Skill) -> SkillDetail:
    """Tier 2: read the skill's body and list (not read) its other files.

    The front matter is read again so an edit since listing cannot shift the body. Files are
    listed only in the directory layout, hidden ones and symlinks leading out of the skills
    directory left out. Raises SkillError if the file now lies outside its skills directory,
    or its body is not UTF-8 (with the file line).
    """
    if not _inside(skill.path, skill.root):
        raise SkillError(f"{skill.path}: symlink leads outside the skills directory; not read")
    fm = read_front_matter(skill.path)
    try:
        with open(skill.path, "rb") as f:
            f.seek(fm.body_offset)
            raw = f.read()
    except OSError as e:
        raise SkillError(f"{skill.path}: cannot read: {e.strerror or e}") from e
    try:
        body = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = fm.body_line + raw.count(b"\n", 0, e.start)
        raise SkillError(f"{skill.path}:{line}: body is not valid UTF-8") from e
    body = body.replace("\r\n", "\n").strip()
    return SkillDetail(skill=skill, body=body, files=_other_files(skill))


def _other_files(skill: Skill) -> tuple[str, ...]:
    folder = skill.directory
    if folder is None:
        return ()
    found: list[str] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        here = Path(dirpath)
        for file_name in sorted(filenames):
            path = here / file_name
            if file_name.startswith(".") or path == skill.path:
                continue
            if path.is_symlink() and not _inside(path, skill.root):
                continue
            found.append(path.relative_to(folder).as_posix())
    return tuple(found)


# --------------------------------------------------------------------------- exports


def _openai(skill: Skill) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": skill.name,
            "description": skill.description,
            "parameters": skill.parameters,
        },
    }


def _anthropic(skill: Skill) -> dict[str, Any]:
    return {"name": skill.name, "description": skill.description, "input_schema": skill.parameters}


def _mcp(skill: Skill) -> dict[str, Any]:
    return {"name": skill.name, "description": skill.description, "inputSchema": skill.parameters}


def skill_json(skill: Skill) -> dict[str, Any]:
    """One skill's metadata as JSON-ready values (what ``skills list --format json``
    prints for each): name, description, path, layout, parameters, front matter."""
    return {
        "name": skill.name,
        "description": skill.description,
        "path": str(skill.path),
        "layout": skill.layout,
        "parameters": skill.parameters,
        "frontmatter": skill.frontmatter,
    }


def _dumps(value: Any) -> str:
    # default=str: YAML may hold dates, which JSON has no type for.
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def _xml(skills: Sequence[Skill]) -> str:
    # The `skills-ref to-prompt` form, byte for byte: one value per line, escaped.
    parts = ["<available_skills>"]
    for s in skills:
        parts += [
            "<skill>",
            "<name>", html.escape(s.name), "</name>",
            "<description>", html.escape(s.description), "</description>",
            "<location>", str(s.path.resolve()), "</location>",
            "</skill>",
        ]  # fmt: skip
    parts.append("</available_skills>")
    return "\n".join(parts)


_ENTRY_EXPORTERS: dict[str, Callable[[Skill], dict[str, Any]]] = {
    "json": skill_json,
    "openai": _openai,
    "anthropic": _anthropic,
    "mcp": _mcp,
}


def export_skills(skills: Sequence[Skill], fmt: ExportFormat) -> str:
    """Render a listing as text, without a trailing newline.

    - ``json``: a list of ``{name, description, path, layout, parameters, frontmatter}``;
    - ``openai``: the Chat Completions ``tools`` list,
      ``[{"type": "function", "function": {name, description, parameters}}]``;
    - ``anthropic``: the Messages API ``tools`` list, ``[{name, description, input_schema}]``;
    - ``mcp``: a ``tools/list`` result, ``{"tools": [{name, description, inputSchema}]}``;
    - ``xml``: the ``<available_skills>`` prompt block of the Agent Skills client guide, as
      ``skills-ref to-prompt`` writes it (absolute locations).

    Raises SkillError for an unknown format, naming the known ones.
    """
    if fmt == "xml":
        return _xml(skills)
    try:
        entry = _ENTRY_EXPORTERS[fmt]
    except KeyError:
        raise SkillError(
            f"unknown skill format {fmt!r}; known: {', '.join(EXPORT_FORMATS)}"
        ) from None
    entries = [entry(s) for s in skills]
    return _dumps({"tools": entries} if fmt == "mcp" else entries)


# --------------------------------------------------------------------------- tokens


def count_tokens(text: str) -> int:
    """Tokens of ``text`` in tiktoken's ``o200k_base`` encoding (special tokens as text),
    by :class:`ctxcli.tokens.TokenCounter`.

    An estimate for Claude models, which use another tokenizer. Raises SkillError when the
    encoding cannot be loaded (tiktoken downloads it once, then reads its cache directory).
    """
    from ctxcli.errors import TokenizerError
    from ctxcli.tokens import get_counter  # lazily: a plain listing loads no encoding

    try:
        return get_counter("o200k_base").text(text)
    except TokenizerError as e:
        raise SkillError(str(e)) from e


def token_report(
    skills: Sequence[Skill],
    fmt: ExportFormat,
    *,
    count: Callable[[str], int] | None = None,
) -> TokenReport:
    """Tokens of the listing in ``fmt`` against those of every full body.

    Reads every body (tier 2) through :func:`load_detail`; ``count`` maps text to tokens
    (default :func:`count_tokens`). Raises SkillError as :func:`load_detail` does.
    """
    count = count or count_tokens
    per_skill = tuple(
        (s.name, count(export_skills([s], fmt)), count(load_detail(s).body)) for s in skills
    )
    return TokenReport(
        listing=count(export_skills(skills, fmt)),
        bodies=sum(body for _, _, body in per_skill),
        per_skill=per_skill,
    )
