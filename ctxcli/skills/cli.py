"""``ctxcli skills``: list, show and validate skills. Parse, call ctxcli.skills, print."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

import click

from ctxcli import jsonio
from ctxcli import skills as lib
from ctxcli.clihelp import Group, option
from ctxcli.errors import SkillError

F = TypeVar("F", bound=Callable[..., Any])
CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"]}
DESCRIPTION_WIDTH = 60  # characters of a description shown in the table
PARAMETERS_WIDTH = 32  # characters of the parameter names shown in the table


def dir_option(func: F) -> F:
    """``--dir PATH``, repeatable, else ``CTXCLI_SKILLS_DIR``, else ``./skills`` when it
    exists, else the skills shipped with ctxcli (see :func:`_dirs`)."""
    return option(
        "--dir",
        "dirs",
        multiple=True,
        envvar="CTXCLI_SKILLS_DIR",
        show_envvar=True,
        shown="./skills if it exists, else the skills shipped with ctxcli",
        type=click.Path(exists=True, file_okay=False, path_type=Path),
        help="Skills directory (flat NAME.md or NAME/SKILL.md); repeat for several. "
        "A folder given here replaces the shipped skills.",
    )(func)


def _examples(lines: str) -> str:
    """A help epilog of example command lines, kept as written."""
    return "Examples:\n\n\b\n" + lines


def _dirs(given: tuple[Path, ...]) -> tuple[Path, ...]:
    """The folders to read: those given, else :func:`ctxcli.skills.default_dirs`,
    saying on stderr when that is the shipped skills."""
    if given:
        return given
    found, shipped = lib.default_dirs()
    if shipped:
        click.echo(
            f"note: no ./skills folder here: using the skills shipped with ctxcli "
            f"({found[0]}); --dir or CTXCLI_SKILLS_DIR names others",
            err=True,
        )
    return tuple(found)


@click.group(
    cls=Group,
    context_settings=CONTEXT_SETTINGS,
    short_help="List, show and validate skills (Markdown tools).",
    epilog="""Examples:

\b
  ctxcli skills list
  ctxcli skills show read_file
  ctxcli skills list --format openai > tools.json
""",
)
def skills() -> None:
    """List, show and validate skills: Markdown tools with YAML front matter.

    A listing reads each file's front matter only; the usage guide is read when a
    skill is shown. Without --dir, CTXCLI_SKILLS_DIR or a ./skills folder, the
    skills shipped with ctxcli are used (a note on stderr says so).
    """


@skills.command(
    name="list",
    context_settings=CONTEXT_SETTINGS,
    epilog=_examples(
        """\
  ctxcli skills list
  ctxcli skills list --tokens
  ctxcli skills list --format anthropic --dir skills --dir ~/.agents/skills
"""
    ),
)
@dir_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["table", *lib.EXPORT_FORMATS]),
    default="table",
    show_default=True,
    help="table for people; json; openai/anthropic/mcp tool definitions; xml prompt block.",
)
@option(
    "--tokens",
    is_flag=True,
    shown="off",
    help="Also count tokens (o200k_base) of the listing and of every full body.",
)
def skills_list(dirs: tuple[Path, ...], fmt: str, tokens: bool) -> None:
    """List skills from their front matter alone; no body is read.

    A skill whose file has an error, or whose name another skill has, is left out:
    the others are listed, then the errors are printed and the exit status is 1.

    With --tokens the bodies are read to count them, showing what lazy loading
    saves; the table gets token columns and other formats get a summary on stderr.
    For the table the listing is counted as the xml prompt block.
    """
    dirs = _dirs(dirs)
    result = lib.scan_skills(dirs)
    _echo_warnings(result)
    found = list(result.listable)
    if found or not result.errors or fmt != "table":  # a tool listing stays valid: []
        _list(found, dirs, fmt, tokens)
    result.raise_errors(left_out=bool(found))


def _list(found: list[lib.Skill], dirs: tuple[Path, ...], fmt: str, tokens: bool) -> None:
    """Print the listing of ``found`` in ``fmt`` (see :func:`skills_list`)."""
    export_fmt: lib.ExportFormat = "xml" if fmt == "table" else _export_format(fmt)
    report = lib.token_report(found, export_fmt) if tokens else None
    if fmt == "table":
        if not found:
            click.echo(f"No skills found in {', '.join(map(str, dirs))}", err=True)
            return
        click.echo(_table(found, report))
        if report is not None:
            click.echo(_token_summary(report, export_fmt))
        return
    click.echo(lib.export_skills(found, export_fmt))
    if report is not None:
        click.echo(_token_summary(report, export_fmt), err=True)


@skills.command(
    name="show",
    context_settings=CONTEXT_SETTINGS,
    epilog=_examples(
        """\
  ctxcli skills show read_file
  ctxcli skills show search_code --format json --dir ~/.agents/skills
"""
    ),
)
@click.argument("name")
@dir_option
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text for people, json for programs.",
)
def skills_show(name: str, dirs: tuple[Path, ...], fmt: str) -> None:
    """Show one skill in full: metadata, parameters, usage guide and other files.

    Files beside a SKILL.md are listed, not read. NAME is the front matter name;
    names with '/' or '..' are refused.
    """
    try:
        lib.check_name(name)
    except SkillError as error:
        raise click.BadParameter(str(error), param_hint="NAME") from error
    dirs = _dirs(dirs)
    detail = lib.load_detail(lib.get_skill(name, dirs))
    if fmt == "json":
        data = {**lib.skill_json(detail.skill), "body": detail.body, "files": list(detail.files)}
        click.echo(lib.to_json(data))
    else:
        click.echo(_show_text(detail))


@skills.command(
    name="validate",
    context_settings=CONTEXT_SETTINGS,
    epilog=_examples(
        """\
  ctxcli skills validate --dir skills
  ctxcli skills validate --dir my-skills --strict
"""
    ),
)
@dir_option
@option(
    "--strict",
    is_flag=True,
    shown="off",
    help="Add the Agent Skills rules: lowercase-hyphen names, descriptions <= 1024 characters.",
)
def skills_validate(dirs: tuple[Path, ...], strict: bool) -> None:
    """Check every skill's front matter; exit 1 on any error, for CI.

    Prints one line per problem, PATH:LINE: error|warning: message, then a
    summary on stderr.

    Use --strict for skills to be shared under the Agent Skills rules (the bundled
    ones are named like tools, read_file, which those rules do not allow).
    """
    dirs = _dirs(dirs)
    result = lib.scan_skills(dirs, strict=strict)
    for problem in result.problems:
        click.echo(str(problem))
    summary = (
        f"{result.checked} skill files: {_plural(len(result.errors), 'error')},"
        f" {_plural(len(result.warnings), 'warning')}"
    )
    if result.errors:
        raise click.ClickException(summary)
    click.echo(summary, err=True)


def _export_format(fmt: str) -> lib.ExportFormat:
    for known in lib.EXPORT_FORMATS:
        if known == fmt:
            return known
    raise click.BadParameter(f"unknown format {fmt!r}", param_hint="--format")


def _echo_warnings(result: lib.ScanResult) -> None:
    for warning in result.warnings:
        click.echo(str(warning), err=True)


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def _short(text: str, width: int) -> str:
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"


def _table(found: Sequence[lib.Skill], report: lib.TokenReport | None) -> str:
    header = ["NAME", "PARAMETERS"]
    rows = [
        [
            skill.name,
            _short(", ".join(skill.parameters.get("properties", {})) or "-", PARAMETERS_WIDTH),
        ]
        for skill in found
    ]
    align: list[Literal["<", ">"]] = ["<", "<"]
    if report is not None:
        header += ["LIST_TOK", "BODY_TOK"]
        align += [">", ">"]
        for row, (_, listing, body) in zip(rows, report.per_skill, strict=True):
            row += [str(listing), str(body)]
    header.append("DESCRIPTION")
    for row, skill in zip(rows, found, strict=True):
        row.append(_short(skill.description, DESCRIPTION_WIDTH))
    widths = [max(len(row[column]) for row in [header, *rows]) for column in range(len(header) - 1)]

    def line(row: list[str]) -> str:
        cells = [
            f"{cell:{side}{width}}"
            for cell, side, width in zip(row[:-1], align, widths, strict=True)
        ]
        return "  ".join([*cells, row[-1]]).rstrip()

    return "\n".join(line(row) for row in [header, *rows])


def _token_summary(report: lib.TokenReport, fmt: str) -> str:
    total = report.listing + report.bodies
    saved = 100 * report.bodies / total if total else 0.0
    return (
        f"tokens ({report.encoding}): listing {report.listing} ({fmt}),"
        f" all bodies {report.bodies}; lazy loading saves {report.bodies}"
        f" of {total} ({saved:.0f}%)"
    )


def _parameter_line(name: str, spec: dict[str, Any], required: bool) -> str:
    kind = spec.get("type", "any")
    facts = [" | ".join(kind) if isinstance(kind, list) else str(kind)]
    if required:
        facts.append("required")
    if "default" in spec:
        facts.append(f"default {jsonio.std_dumps(spec['default'], default=str)}")
    if "enum" in spec:
        facts.append("one of " + ", ".join(map(str, spec["enum"])))
    description = " ".join(str(spec.get("description", "")).split())
    return f"  {name} ({'; '.join(facts)})" + (f": {description}" if description else "")


def _show_text(detail: lib.SkillDetail) -> str:
    skill = detail.skill
    lines = [f"name: {skill.name}", f"description: {' '.join(skill.description.split())}"]
    lines.append(f"path: {skill.path}")
    for key in ("license", "compatibility", "allowed-tools"):
        if key in skill.frontmatter:
            lines.append(f"{key}: {skill.frontmatter[key]}")
    properties: dict[str, Any] = skill.parameters.get("properties", {})
    required = set(skill.parameters.get("required", []))
    lines.append("parameters:" if properties else "parameters: none")
    for name, spec in properties.items():
        lines.append(
            _parameter_line(name, spec if isinstance(spec, dict) else {}, name in required)
        )
    if detail.files:
        lines.append("files (not loaded):")
        lines.extend(f"  {file}" for file in detail.files)
    lines += ["", detail.body]
    return "\n".join(lines)
