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

The modules: :mod:`~ctxcli.skills.frontmatter` reads front matter,
:mod:`~ctxcli.skills.schema` says what it must hold, :mod:`~ctxcli.skills.discovery`
finds and checks skills, :mod:`~ctxcli.skills.export` writes listings for other tools,
and :mod:`~ctxcli.skills.cli` is the ``ctxcli skills`` group.
"""

from __future__ import annotations

from ctxcli.problems import Problem
from ctxcli.skills.discovery import (
    DEFAULT_DIR,
    SKILL_FILE,
    ScanResult,
    Skill,
    SkillDetail,
    check_name,
    default_dirs,
    get_skill,
    list_skills,
    load_detail,
    scan_skills,
    shipped_dir,
)
from ctxcli.skills.export import (
    EXPORT_FORMATS,
    ExportFormat,
    TokenReport,
    count_tokens,
    export_skills,
    skill_json,
    to_json,
    token_report,
)
from ctxcli.skills.frontmatter import MAX_FRONT_MATTER_BYTES, FrontMatter, read_front_matter
from ctxcli.skills.schema import (
    FUNCTION_NAME_RE,
    JSON_SCHEMA_TYPES,
    PARAMETER_NAME_RE,
    SPEC_COMPATIBILITY_MAX,
    SPEC_DESCRIPTION_MAX,
    SPEC_NAME_RE,
    Layout,
    parameters_schema,
)

__all__ = [
    "DEFAULT_DIR",
    "EXPORT_FORMATS",
    "FUNCTION_NAME_RE",
    "JSON_SCHEMA_TYPES",
    "MAX_FRONT_MATTER_BYTES",
    "PARAMETER_NAME_RE",
    "SKILL_FILE",
    "SPEC_COMPATIBILITY_MAX",
    "SPEC_DESCRIPTION_MAX",
    "SPEC_NAME_RE",
    "ExportFormat",
    "FrontMatter",
    "Layout",
    "Problem",
    "ScanResult",
    "Skill",
    "SkillDetail",
    "TokenReport",
    "check_name",
    "count_tokens",
    "default_dirs",
    "export_skills",
    "get_skill",
    "list_skills",
    "load_detail",
    "parameters_schema",
    "read_front_matter",
    "scan_skills",
    "shipped_dir",
    "skill_json",
    "to_json",
    "token_report",
]
