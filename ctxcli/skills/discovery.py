"""Finding skills: the files of a skills folder, checked and listed from their front
matter alone (tier 1), and one skill's body read on demand (tier 2)."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ctxcli.errors import SkillError
from ctxcli.problems import Problem
from ctxcli.skills import schema
from ctxcli.skills.frontmatter import FrontMatter, FrontMatterError, problem_at, read_front_matter
from ctxcli.skills.schema import FUNCTION_NAME_RE, Layout

SKILL_FILE = "SKILL.md"
#: The folder a skills command reads when given none, when it exists (relative to the
#: working directory).
DEFAULT_DIR = "skills"


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
class ScanResult:
    """Every skill that could be read, every problem found on the way (each a
    :class:`ctxcli.problems.Problem` whose text is ``PATH:LINE: error: detail``), and
    how many skill files were ``checked`` (readable or not)."""

    skills: tuple[Skill, ...]
    problems: tuple[Problem, ...]
    checked: int

    @property
    def errors(self) -> tuple[Problem, ...]:
        return tuple(problem for problem in self.problems if problem.severity == "error")

    @property
    def warnings(self) -> tuple[Problem, ...]:
        return tuple(problem for problem in self.problems if problem.severity == "warning")

    @property
    def listable(self) -> tuple[Skill, ...]:
        """The skills a listing may show: those whose own file has no error, and whose
        name no other skill has (of two skills of one name, neither is known to be the
        one meant: a listing with either would shadow the other in silence)."""
        broken = {problem.path for problem in self.errors}
        names = Counter(skill.name for skill in self.skills)
        return tuple(
            skill
            for skill in self.skills
            if str(skill.path) not in broken and names[skill.name] == 1
        )

    def raise_errors(self, *, left_out: bool = False) -> None:
        """Raise SkillError listing every error, one per line; return if there are none.
        ``left_out``: the message says the skills with errors were left out of what was
        shown (:attr:`listable`)."""
        _raise_errors(self.errors, left_out=left_out)


def shipped_dir() -> Path:
    """The skills that ship with ctxcli: package data, ``ctxcli/shipped_skills`` (the
    repository's top-level ``skills`` is a link to it)."""
    return Path(__file__).resolve().parents[1] / "shipped_skills"


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
    """Skill files directly in ``root`` (flat) or one folder down (``SKILL.md``), sorted;
    a broken symlink where one would be too (:func:`_read` names it)."""
    for entry in sorted(root.iterdir(), key=lambda entry: entry.name):
        if entry.name.startswith("."):
            continue
        if entry.is_dir():
            for file_name in (SKILL_FILE, "skill.md"):
                if (entry / file_name).is_file() or _broken(entry / file_name):
                    yield entry / file_name, "directory"
                    break
        elif _flat_skill_file(entry):
            yield entry, "flat"


def _flat_skill_file(entry: Path) -> bool:
    """Whether ``entry`` is a flat skill file: a ``.md`` file but a README (or a broken
    symlink named so)."""
    named = entry.suffix == ".md" and entry.name.lower() != "readme.md"
    return named and (entry.is_file() or _broken(entry))


def _broken(path: Path) -> bool:
    """Whether ``path`` is a symlink whose target is gone."""
    return path.is_symlink() and not path.exists()


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
    at most 500 (:mod:`ctxcli.skills.schema` says each rule).

    Returns every skill whose front matter gave a name and a description, with all problems
    (errors and warnings) in file order. Raises SkillError only when a directory is missing.
    """
    skills: list[Skill] = []
    problems: list[Problem] = []
    checked = 0
    for root in _roots(dirs):
        for path, layout in _candidates(root):
            checked += 1
            skill, found = _read(path, root, layout, strict=strict)
            problems.extend(found)
            if skill is not None:
                skills.append(skill)
    problems.extend(_duplicates(skills))
    return ScanResult(tuple(skills), tuple(problems), checked)


def _roots(dirs: Sequence[str | os.PathLike[str]]) -> list[Path]:
    """The folders of ``dirs``, each once (the same one given twice is not a duplicate
    of every skill); raises SkillError for one that is missing."""
    roots: dict[Path, Path] = {}
    for folder in map(Path, dirs):
        if not folder.is_dir():
            raise SkillError(f"skills directory not found: {folder}")
        roots.setdefault(folder.resolve(), folder)
    return list(roots.values())


def _read(
    path: Path, root: Path, layout: Layout, *, strict: bool
) -> tuple[Skill | None, list[Problem]]:
    """One skill file's skill (when its front matter gives a name and a description)
    and problems."""
    if _broken(path):  # skipped in silence, it passed `skills validate` in CI
        detail = f"broken symlink (to {os.readlink(path)}); not read"
        return None, [problem_at("broken-symlink", path, None, detail)]
    if not _inside(path, root):
        detail = "symlink leads outside the skills directory; not read"
        return None, [problem_at("symlink-outside", path, None, detail)]
    try:
        front = read_front_matter(path)
    except FrontMatterError as error:
        return None, [error.problem]
    return _skill(path, root, layout, front), schema.check(path, layout, front, strict=strict)


def _skill(path: Path, root: Path, layout: Layout, front: FrontMatter) -> Skill | None:
    """The skill ``front`` describes, or ``None`` without a name and a description."""
    name, description = front.data.get("name"), front.data.get("description")
    if not (isinstance(name, str) and name.strip() and isinstance(description, str)):
        return None
    parameters = front.data.get("parameters")
    if not isinstance(parameters, Mapping):
        parameters = None
    return Skill(
        name=name,
        description=description.strip(),
        parameters=schema.parameters_schema(parameters),
        path=path,
        root=root,
        layout=layout,
        frontmatter=front.data,
        body_offset=front.body_offset,
        body_line=front.body_line,
        bytes_read=front.bytes_read,
    )


def _duplicates(skills: Sequence[Skill]) -> list[Problem]:
    """An error for each skill whose name an earlier one has, naming both paths."""
    first: dict[str, Skill] = {}
    problems: list[Problem] = []
    for skill in skills:
        if skill.name in first:
            detail = (
                f"duplicate skill name {skill.name!r}: also defined in {first[skill.name].path}"
            )
            problems.append(problem_at("duplicate-name", skill.path, None, detail))
        else:
            first[skill.name] = skill
    return problems


def _raise_errors(errors: Sequence[Problem], *, left_out: bool = False) -> None:
    if errors:
        noun = "problem" if len(errors) == 1 else "problems"
        lines = "\n".join(f"  {problem}" for problem in errors)
        # a duplicate name's problem names two skills, both left out
        they = "it names" if len(errors) == 1 else "they name"
        note = f"; the skills {they} are not listed" if left_out else ""
        raise SkillError(f"{len(errors)} skill {noun}{note}:\n{lines}")


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
    named ``NAME.md`` or ``NAME/SKILL.md`` that gave no skill; a skill whose file has
    errors is not available, as it cannot be shown), a duplicated name (naming
    both paths) or errors in the skill's own file. Errors in other skills do not stop it.
    """
    check_name(name)
    result = scan_skills(dirs)
    matches = [skill for skill in result.skills if skill.name == name]
    if not matches:
        # A file named for the skill whose front matter could not be read: say why.
        _raise_errors([problem for problem in result.errors if _names(problem, name)])
        broken = {problem.path for problem in result.errors}
        unshown = {skill.name for skill in result.skills if str(skill.path) in broken}
        shown = {skill.name for skill in result.skills} - unshown  # a duplicate too
        message = f"unknown skill {name!r}; available: {', '.join(sorted(shown)) or 'none'}"
        if result.errors:  # a skill with an error cannot be shown: not available
            message += f" ({len(broken)} skill files have errors)"
        raise SkillError(message)
    paths = {str(match.path) for match in matches}
    _raise_errors([problem for problem in result.errors if problem.path in paths])
    return matches[0]


def _names(problem: Problem, name: str) -> bool:
    """Whether ``problem`` is of a file named for the skill ``name`` (``NAME.md`` or
    ``NAME/SKILL.md``)."""
    path = Path(problem.path or "")
    return name in (path.stem, path.parent.name)


def load_detail(skill: Skill) -> SkillDetail:
    """Tier 2: read the skill's body and list (not read) its other files.

    The front matter is read again so an edit since listing cannot shift the body. Files are
    listed only in the directory layout, hidden ones and symlinks leading out of the skills
    directory left out. Raises SkillError if the file now lies outside its skills directory,
    or its body is not UTF-8 (with the file line).
    """
    if not _inside(skill.path, skill.root):
        raise SkillError(f"{skill.path}: symlink leads outside the skills directory; not read")
    front = read_front_matter(skill.path)
    try:
        with open(skill.path, "rb") as file:
            file.seek(front.body_offset)
            raw = file.read()
    except OSError as error:
        raise SkillError(f"{skill.path}: cannot read: {error.strerror or error}") from error
    try:
        body = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = front.body_line + raw.count(b"\n", 0, error.start)
        raise SkillError(f"{skill.path}:{line}: body is not valid UTF-8") from error
    body = body.replace("\r\n", "\n").strip()
    return SkillDetail(skill=skill, body=body, files=_other_files(skill))


def _other_files(skill: Skill) -> tuple[str, ...]:
    """The files of a directory-layout skill beside its ``SKILL.md``, not read."""
    folder = skill.directory
    if folder is None:
        return ()
    found: list[str] = []
    for top, folders, file_names in os.walk(folder):
        folders[:] = sorted(name for name in folders if not name.startswith("."))
        here = Path(top)
        for file_name in sorted(file_names):
            path = here / file_name
            if file_name.startswith(".") or path == skill.path:
                continue
            if path.is_symlink() and not _inside(path, skill.root):
                continue
            found.append(path.relative_to(folder).as_posix())
    return tuple(found)
