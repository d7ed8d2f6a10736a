"""What a skill's front matter must hold: its fields (name, description, the Agent
Skills spec's optional ones) and its parameters, a JSON Schema object or ctxcli's
shorter map of parameter name to schema.

Each check returns :class:`ctxcli.problems.Problem` objects at the line of the key
they are about (``KeyLines`` of :mod:`ctxcli.skills.frontmatter`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, Literal

from ctxcli.problems import Problem, Severity
from ctxcli.skills.frontmatter import FrontMatter, KeyLines, problem_at

Layout = Literal["flat", "directory"]

#: OpenAI function names and Anthropic tool names (the stricter, 64-character form).
FUNCTION_NAME_RE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
#: Agent Skills spec: lowercase letters and digits, single hyphens inside, at most 64.
SPEC_NAME_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
#: Anthropic's ``input_schema`` property keys.
PARAMETER_NAME_RE = re.compile(r"^[a-zA-Z0-9_.-]{1,64}$")
JSON_SCHEMA_TYPES = frozenset({"string", "number", "integer", "boolean", "array", "object", "null"})
SPEC_DESCRIPTION_MAX = 1024  # characters, Agent Skills spec
SPEC_COMPATIBILITY_MAX = 500  # characters, Agent Skills spec
#: The JSON Schema type meant by a Python-ish one, for the error's hint.
TYPE_HINTS = {
    "str": "string", "int": "integer", "float": "number", "bool": "boolean",
    "list": "array", "dict": "object", "none": "null",
}  # fmt: skip
#: Line of the first front matter key: problems of the front matter as a whole go there.
FIRST_LINE = 2


def parameters_schema(parameters: Mapping[str, Any] | None) -> dict[str, Any]:
    """Turn a front matter ``parameters`` value into a JSON Schema object.

    Accepts the ctxcli map (``{NAME: {type, description, required: bool, ...}}``), which
    becomes ``{"type": "object", "properties": {NAME: {...without required}}, "required":
    [names with required: true]}``, or a JSON Schema object already (``type: object``), which
    is returned as a copy with ``properties`` and ``required`` filled in. None gives the empty
    object schema. Does not validate; :func:`check` does.
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
        properties[str(name)] = {key: value for key, value in spec.items() if key != "required"}
        if spec.get("required") is True:
            required.append(str(name))
    return {"type": "object", "properties": properties, "required": required}


def _is_schema_form(parameters: Mapping[str, Any]) -> bool:
    # In the map form every value is a mapping, so a string "object" means a schema.
    return parameters.get("type") == "object"


def check(path: Path, layout: Layout, front: FrontMatter, *, strict: bool) -> list[Problem]:
    """Every problem of one skill file's front matter, in this order: its required
    fields, its name (:func:`_name`), its optional fields (:func:`_optional`) and its
    parameters (:func:`_parameters`). ``strict`` adds the Agent Skills rules."""
    data, lines = front.data, front.key_lines
    problems = []
    for key in ("name", "description"):
        if data.get(key) is None:
            detail = f"missing required field in front matter: {key}"
            problems.append(problem_at("missing-field", path, FIRST_LINE, detail))
        elif not isinstance(data[key], str) or not data[key].strip():
            line = lines.get((key,), FIRST_LINE)
            detail = f"field '{key}' must be a non-empty string"
            problems.append(problem_at("empty-field", path, line, detail))
    name = data.get("name")
    if isinstance(name, str) and name.strip():
        problems.extend(_name(path, layout, lines, name, strict=strict))
    problems.extend(_optional(path, front, strict=strict))
    problems.extend(_parameters(data.get("parameters"), path, lines))
    return problems


def _optional(path: Path, front: FrontMatter, *, strict: bool) -> Iterator[Problem]:
    """Problems of the fields' types, and with ``strict`` of their lengths."""
    data, lines = front.data, front.key_lines

    def at(key: str, rule: str, detail: str) -> Problem:
        return problem_at(rule, path, lines.get((key,), FIRST_LINE), detail)

    yield from _spec_length(data, "description", SPEC_DESCRIPTION_MAX, strict, at)
    for key in ("license", "compatibility", "allowed-tools"):
        if key in data and not isinstance(data[key], str):
            yield at(key, "field-type", f"field '{key}' must be a string")
    if "metadata" in data and not isinstance(data["metadata"], Mapping):
        yield at("metadata", "field-type", "field 'metadata' must be a mapping")
    yield from _spec_length(data, "compatibility", SPEC_COMPATIBILITY_MAX, strict, at)


def _spec_length(
    data: Mapping[str, Any],
    key: str,
    limit: int,
    strict: bool,
    at: Callable[[str, str, str], Problem],
) -> Iterator[Problem]:
    """With ``strict``, the problem of a string field ``key`` longer than the Agent
    Skills spec's ``limit`` (characters)."""
    value = data.get(key)
    if strict and isinstance(value, str) and len(value) > limit:
        yield at(
            key,
            f"spec-{key}",
            f"{key} is {len(value)} characters; the Agent Skills limit is {limit}",
        )


def _name(
    path: Path, layout: Layout, lines: KeyLines, name: str, *, strict: bool
) -> Iterator[Problem]:
    """Problems of a (non-empty) name: a valid function name, the same as its folder
    (an error) or file (a warning, unless ``strict``), and with ``strict`` the spec's
    form."""
    line = lines.get(("name",), FIRST_LINE)
    expected = path.parent.name if layout == "directory" else path.stem
    if not FUNCTION_NAME_RE.match(name):
        yield problem_at(
            "function-name",
            path,
            line,
            f"name {name!r} is not a valid OpenAI/Anthropic function name:"
            " use 1-64 letters, digits, '_' or '-'",
        )
    elif name != expected:
        where = "folder" if layout == "directory" else "file"
        severity: Severity = "error" if layout == "directory" or strict else "warning"
        detail = f"name {name!r} differs from its {where} name {expected!r}"
        yield problem_at("name-mismatch", path, line, detail, severity)
    if strict and not (len(name) <= 64 and SPEC_NAME_RE.match(name)):
        yield problem_at(
            "spec-name",
            path,
            line,
            f"name {name!r} breaks the Agent Skills rule: lowercase letters, digits and"
            " single hyphens, not at the start or end",
        )


def _parameters(parameters: Any, path: Path, lines: KeyLines) -> list[Problem]:
    """Problems of the ``parameters`` field, in either form."""
    line = lines.get(("parameters",))
    if parameters is None:
        return []
    if not isinstance(parameters, Mapping):
        detail = "parameters must be a mapping of parameter name to schema"
        return [problem_at("parameters", path, line, detail)]
    if _is_schema_form(parameters):
        return [
            problem_at("parameters", path, line, detail)
            for detail in _schema(parameters, "parameters")
        ]
    problems: list[Problem] = []
    for name, spec in parameters.items():
        where = lines.get(("parameters", str(name)), line)
        found = []
        for detail in _parameter(name, spec):
            field = _field_of(detail, f"parameter {name!r}")
            at = lines.get(("parameters", str(name), field), where) if field else where
            found.append(problem_at("parameters", path, at, detail))
        problems += sorted(found, key=lambda problem: problem.line or 0)  # in file order
    return problems


def _field_of(detail: str, where: str) -> str | None:
    """The key of a parameter's mapping a problem ``detail`` about ``where`` is at:
    ``type`` of ``parameter 'p': type 'strng' is not …``, ``items`` of ``parameter
    'p'.items …``; ``None`` when it names none."""
    rest = detail.removeprefix(where)
    if rest.startswith(".items"):
        return "items"
    if rest.startswith("."):
        return "properties"
    return rest[2:].split(" ", 1)[0] if rest.startswith(": ") else None


def _parameter(name: Any, spec: Any) -> Iterator[str]:
    """What is wrong with one parameter of the map form, as the words users read."""
    if not isinstance(name, str) or not PARAMETER_NAME_RE.match(name):
        yield f"parameter name {name!r} must match {PARAMETER_NAME_RE.pattern}"
    if not isinstance(spec, Mapping):
        yield f"parameter {name!r} must be a mapping such as {{type: string}}"
        return
    if "required" in spec and not isinstance(spec["required"], bool):
        yield f"parameter {name!r}: required must be true or false"
    rest = {key: value for key, value in spec.items() if key != "required"}
    yield from _schema(rest, f"parameter {name!r}")


def _schema(schema: Any, where: str) -> list[str]:
    """What is wrong with a JSON Schema fragment's types, enum, items, properties and
    required list, as the words users read (``where`` names the fragment)."""
    if not isinstance(schema, Mapping):
        return [f"{where} must be a mapping, not {type(schema).__name__}"]
    messages = _types(schema, where)
    if "enum" in schema and not isinstance(schema["enum"], list):
        messages.append(f"{where}: enum must be a list")
    if "items" in schema:
        messages.extend(_schema(schema["items"], f"{where}.items"))
    properties = schema.get("properties", {})
    if not isinstance(properties, Mapping):
        messages.append(f"{where}: properties must be a mapping")
        properties = {}
    for name, sub in properties.items():
        messages.extend(_schema(sub, f"{where}.{name}"))
    required = schema.get("required", [])
    if not isinstance(required, list):
        messages.append(f"{where}: required must be a list of property names")
    else:
        messages.extend(
            f"{where}: required parameter {name!r} is not in properties"
            for name in required
            if name not in properties
        )
    return messages


def _types(schema: Mapping[str, Any], where: str) -> list[str]:
    """The fragment's declared types that are not JSON Schema types, with a hint."""
    declared = schema.get("type")
    if "type" not in schema:
        return []
    messages = []
    for kind in declared if isinstance(declared, list) else [declared]:
        if not isinstance(kind, str) or kind not in JSON_SCHEMA_TYPES:
            hint = TYPE_HINTS.get(str(kind).lower())
            suggestion = f" (did you mean '{hint}'?)" if hint else ""
            messages.append(
                f"{where}: type {kind!r} is not a JSON Schema type{suggestion};"
                f" use one of {', '.join(sorted(JSON_SCHEMA_TYPES))}"
            )
    return messages
