"""A listing of skills as other tools read it: JSON, the OpenAI, Anthropic and MCP
tool definitions, the Agent Skills prompt block; and what lazy loading saves, in
tokens."""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ctxcli import jsonio
from ctxcli.errors import SkillError, TokenizerError
from ctxcli.skills.discovery import Skill, load_detail

ExportFormat = Literal["json", "openai", "anthropic", "mcp", "xml"]
EXPORT_FORMATS: tuple[ExportFormat, ...] = ("json", "openai", "anthropic", "mcp", "xml")


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


def to_json(value: Any) -> str:
    """``value`` as JSON indented by 2, non-ASCII as it is; values JSON has no type
    for (YAML's dates) as their ``str``."""
    return jsonio.std_dumps(value, indent=2, ensure_ascii=False, default=str)


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


def _xml(skills: Sequence[Skill]) -> str:
    # The `skills-ref to-prompt` form, byte for byte: one value per line, escaped.
    parts = ["<available_skills>"]
    for skill in skills:
        parts += [
            "<skill>",
            "<name>", html.escape(skill.name), "</name>",
            "<description>", html.escape(skill.description), "</description>",
            "<location>", str(skill.path.resolve()), "</location>",
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
    entries = [entry(skill) for skill in skills]
    return to_json({"tools": entries} if fmt == "mcp" else entries)


def count_tokens(text: str) -> int:
    """Tokens of ``text`` in tiktoken's ``o200k_base`` encoding (special tokens as text),
    by :class:`ctxcli.tokens.TokenCounter`.

    An estimate for Claude models, which use another tokenizer. Raises SkillError when the
    encoding cannot be loaded (tiktoken downloads it once, then reads its cache directory).
    """
    from ctxcli.tokens import get_counter  # lazily: a plain listing loads no encoding

    try:
        return get_counter("o200k_base").text(text)
    except TokenizerError as error:
        raise SkillError(str(error)) from error


def token_report(
    skills: Sequence[Skill],
    fmt: ExportFormat,
    *,
    count: Callable[[str], int] | None = None,
) -> TokenReport:
    """Tokens of the listing in ``fmt`` against those of every full body.

    Reads every body (tier 2) through :func:`ctxcli.skills.load_detail`; ``count`` maps
    text to tokens (default :func:`count_tokens`). Raises SkillError as ``load_detail``
    does.
    """
    count = count or count_tokens
    per_skill = tuple(
        (skill.name, count(export_skills([skill], fmt)), count(load_detail(skill).body))
        for skill in skills
    )
    return TokenReport(
        listing=count(export_skills(skills, fmt)),
        bodies=sum(body for _, _, body in per_skill),
        per_skill=per_skill,
    )
