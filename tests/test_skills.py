"""Tests of ctxcli.skills (the library) and ctxcli.skills_cli (the `skills` group)."""

from __future__ import annotations

import io
import json
import os
import string
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from click.testing import CliRunner, Result
from helpers import run_cli_bounded, yaml_bomb
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxcli import skills as lib
from ctxcli import yamlio
from ctxcli.errors import SkillError
from ctxcli.skills import discovery, export, frontmatter
from ctxcli.skills_cli import skills

REPO = Path(__file__).resolve().parent.parent

# The Chat Completions `tools` request parameter, written from the API reference and the
# openai-python types (ChatCompletionFunctionToolParam, shared.FunctionDefinition): at most
# 128 tools; each {"type": "function", "function": {name, description?, parameters?,
# strict?}}; name "a-z, A-Z, 0-9, or underscores and dashes, with a maximum length of 64";
# parameters "a JSON Schema object".
CHAT_COMPLETIONS_TOOLS_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "array",
    "maxItems": 128,
    "items": {
        "type": "object",
        "required": ["type", "function"],
        "additionalProperties": False,
        "properties": {
            "type": {"const": "function"},
            "function": {
                "type": "object",
                "required": ["name"],
                "additionalProperties": False,
                "properties": {
                    "name": {"type": "string", "pattern": "^[a-zA-Z0-9_-]{1,64}$"},
                    "description": {"type": "string"},
                    "parameters": {
                        "allOf": [
                            {"$ref": "https://json-schema.org/draft/2020-12/schema"},
                            {
                                "type": "object",
                                "required": ["type"],
                                "properties": {
                                    "type": {"const": "object"},
                                    "properties": {"type": "object"},
                                    "required": {"type": "array", "items": {"type": "string"}},
                                },
                            },
                        ]
                    },
                    "strict": {"type": ["boolean", "null"]},
                },
            },
        },
    },
}


# --------------------------------------------------------------------------- helpers


def write_skill(
    root: Path,
    name: str,
    front: str | None = None,
    body: str | bytes = "# Guide\n\nUse it.\n",
    *,
    layout: str = "flat",
) -> Path:
    """Write a skill file and return its path; ``front`` is the YAML between the fences."""
    if front is None:
        front = f"name: {name}\ndescription: Does {name}.\n"
    path = root / f"{name}.md" if layout == "flat" else root / name / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    raw_body = body if isinstance(body, bytes) else body.encode()
    path.write_bytes(b"---\n" + front.encode() + b"---\n" + raw_body)
    return path


def invoke(*args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(skills, list(args), env=env)


class CountingFile(io.RawIOBase):
    """A file proxy that counts every byte handed to the caller."""

    def __init__(self, inner: Any, log: dict[str, int], key: str) -> None:
        self._inner, self._log, self._key = inner, log, key

    def _count(self, data: bytes) -> bytes:
        self._log[self._key] = self._log.get(self._key, 0) + len(data)
        return data

    def read(self, size: int = -1) -> bytes:
        return self._count(self._inner.read(size))

    def readline(self, size: int | None = -1) -> bytes:
        return self._count(self._inner.readline(size))

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = 0) -> int:
        return int(self._inner.seek(offset, whence))

    def close(self) -> None:
        self._inner.close()
        super().close()


@pytest.fixture
def opened(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Bytes read through ``open`` inside ctxcli.skills, by file name; opened files only."""
    log: dict[str, int] = {}
    real_open = open

    def counting_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        log.setdefault(str(file), 0)
        return CountingFile(real_open(file, mode, *args, **kwargs), log, str(file))

    for module in (frontmatter, discovery):  # the modules of ctxcli.skills that open files
        monkeypatch.setattr(module, "open", counting_open, raising=False)
    return log


@pytest.fixture
def two(tmp_path: Path) -> Path:
    """A skills directory with one flat skill and one in the directory layout."""
    root = tmp_path / "skills"
    write_skill(
        root,
        "alpha",
        "name: alpha\ndescription: First skill.\nparameters:\n"
        "  path:\n    type: string\n    description: A path.\n    required: true\n"
        "  count:\n    type: integer\n    default: 3\n",
    )
    folder = write_skill(root, "beta", layout="dir", body="Beta guide.\n").parent
    (folder / "scripts").mkdir()
    (folder / "scripts" / "run.py").write_text("print('hi')\n")
    (folder / "references").mkdir()
    (folder / "references" / "REFERENCE.md").write_text("# Ref\n")
    return root


# --------------------------------------------------------------------------- front matter


@pytest.mark.parametrize(
    ("raw", "offset"),
    [
        pytest.param(b"---\nname: a\ndescription: d\n---\nbody\n", 31, id="lf"),
        pytest.param(b"---\r\nname: a\r\ndescription: d\r\n---\r\nbody\r\n", 35, id="crlf"),
        pytest.param(b"\xef\xbb\xbf---\nname: a\ndescription: d\n---\nbody\n", 34, id="bom"),
        pytest.param(b"--- \nname: a\ndescription: d\n---  \nbody\n", 34, id="trailing-space"),
    ],
)
def test_front_matter_accepts_bom_crlf_and_trailing_space(
    tmp_path: Path, raw: bytes, offset: int
) -> None:
    path = tmp_path / "a.md"
    path.write_bytes(raw)
    fm = lib.read_front_matter(path)
    assert fm.data == {"name": "a", "description": "d"}
    assert (fm.body_offset, fm.body_line) == (offset, 5)
    assert raw[offset:].strip() == b"body"
    assert fm.key_lines == {("name",): 2, ("description",): 3}


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        pytest.param(b"name: a\n", "1: no front matter: the file must start with a '---' line",
                     id="no-fence"),
        pytest.param(b"", "1: no front matter: the file must start with a '---' line", id="empty"),
        pytest.param(b"---\nname: a\n", "1: front matter is not closed with a '---' line",
                     id="unclosed"),
        pytest.param(
            b"---\nname: a\ndescription: Use this skill when: the user asks\n---\n",
            "3: invalid YAML in front matter: mapping values are not allowed here",
            id="unquoted-colon",
        ),
        pytest.param(
            b"\xef\xbb\xbf---\r\nname: a\r\n\r\nparameters:\r\n  x: [1, 2\r\n---\r\n",
            "6: invalid YAML in front matter: while parsing a flow sequence,"
            " expected ',' or ']', but got '<stream end>'",
            id="bom-crlf-line-number",
        ),
        pytest.param(b"---\n- a\n- b\n---\n",
                     "2: front matter must be a YAML mapping of fields, not list", id="list"),
        pytest.param(b"---\n---\nbody\n",
                     "2: front matter must be a YAML mapping of fields, not empty", id="blank"),
        pytest.param(b"---\nname: a\ndescription: \xff\n---\n",
                     "3: front matter is not valid UTF-8", id="not-utf8"),
        pytest.param(b"---\n" + b"k: v\n" * 20_000,
                     "1: front matter is longer than 65536 bytes (no closing '---' line within it)",
                     id="too-long"),
    ],
)  # fmt: skip
def test_front_matter_errors_name_file_and_line(tmp_path: Path, raw: bytes, message: str) -> None:
    path = tmp_path / "bad.md"
    path.write_bytes(raw)
    with pytest.raises(SkillError) as caught:
        lib.read_front_matter(path)
    assert str(caught.value) == f"{path}:{message}"


def test_list_never_reads_a_large_non_utf8_body(tmp_path: Path, opened: dict[str, int]) -> None:
    root = tmp_path / "skills"
    path = write_skill(root, "big", body=b"\xff\xfe\x00garbage" * 500_000)  # 5 MB
    size = path.stat().st_size
    [skill] = lib.list_skills([root])
    assert skill.name == "big"
    # Both the library's own count and an independent count of open()'s reads.
    assert skill.bytes_read == opened[str(path)] == 512
    assert skill.bytes_read < size / 5_000
    with pytest.raises(SkillError, match=rf"^{path}:5: body is not valid UTF-8$"):
        lib.load_detail(skill)


def test_list_reads_only_front_matter_of_every_file(two: Path, opened: dict[str, int]) -> None:
    found = lib.list_skills([two])
    assert [s.name for s in found] == ["alpha", "beta"]
    assert sorted(Path(p).name for p in opened) == ["SKILL.md", "alpha.md"]
    assert all(opened[str(s.path)] == s.bytes_read == s.path.stat().st_size for s in found)


@settings(max_examples=60, deadline=None)
@given(
    name=st.text(string.ascii_letters + string.digits + "_-", min_size=1, max_size=64),
    description=st.text(st.characters(codec="utf-8", exclude_categories=("Cc", "Cs", "Zl", "Zp")),
                        min_size=1, max_size=300).filter(lambda s: s.strip() == s and s != ""),
    body=st.binary(max_size=3000),
    crlf=st.booleans(),
)  # fmt: skip
def test_front_matter_round_trips_and_stops_at_the_fence(
    name: str, description: str, body: bytes, crlf: bool
) -> None:
    front = yaml.safe_dump({"name": name, "description": description}, allow_unicode=True)
    header = ("---\n" + front + "---\n").encode()
    if crlf:
        header = header.replace(b"\n", b"\r\n")
    with tempfile.TemporaryDirectory() as folder:  # hypothesis reruns; tmp_path would not
        path = Path(folder) / "s.md"
        path.write_bytes(header + body)
        fm = lib.read_front_matter(path)
    assert fm.data == {"name": name, "description": description}
    assert fm.body_offset == len(header)
    assert fm.bytes_read <= max(512, 3 * len(header))


# --------------------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("front", "expected"),
    [
        pytest.param("description: d\n", "2: error: missing required field in front matter: name",
                     id="missing-name"),
        pytest.param("name: s\n", "2: error: missing required field in front matter: description",
                     id="missing-description"),
        pytest.param("name: s\ndescription: ''\n",
                     "3: error: field 'description' must be a non-empty string", id="empty-desc"),
        pytest.param("name: 12\ndescription: d\n",
                     "2: error: field 'name' must be a non-empty string", id="name-not-string"),
        pytest.param("name: ../s\ndescription: d\n",
                     "2: error: name '../s' is not a valid OpenAI/Anthropic function name:"
                     " use 1-64 letters, digits, '_' or '-'", id="dotdot-name"),
        pytest.param("name: s\ndescription: d\nparameters:\n  p:\n    type: str\n",
                     "6: error: parameter 'p': type 'str' is not a JSON Schema type (did you"
                     " mean 'string'?); use one of array, boolean, integer, null, number,"
                     " object, string", id="python-type"),
        pytest.param("name: s\ndescription: d\nparameters:\n  p:\n    type: array\n"
                     "    items: {type: text}\n",
                     "7: error: parameter 'p'.items: type 'text' is not a JSON Schema type;"
                     " use one of array, boolean, integer, null, number, object, string",
                     id="items-type"),
        pytest.param("name: s\ndescription: d\nparameters:\n  p:\n    type: string\n"
                     "    required: 'yes'\n",
                     "7: error: parameter 'p': required must be true or false",
                     id="required-not-bool"),
        pytest.param("name: s\ndescription: d\nparameters:\n  type: object\n"
                     "  properties: {a: {type: string}}\n  required: [a, b]\n",
                     "4: error: parameters: required parameter 'b' is not in properties",
                     id="schema-required-missing"),
        pytest.param("name: s\ndescription: d\nparameters:\n  my param: {type: string}\n",
                     "5: error: parameter name 'my param' must match ^[a-zA-Z0-9_.-]{1,64}$",
                     id="parameter-name"),
        pytest.param("name: s\ndescription: d\nparameters: [a, b]\n",
                     "4: error: parameters must be a mapping of parameter name to schema",
                     id="parameters-list"),
        pytest.param("name: s\ndescription: d\nlicense: 3\n",
                     "4: error: field 'license' must be a string", id="license-type"),
        pytest.param("name: s\ndescription: d\nmetadata: x\n",
                     "4: error: field 'metadata' must be a mapping", id="metadata-type"),
    ],
)  # fmt: skip
def test_validation_errors(tmp_path: Path, front: str, expected: str) -> None:
    path = write_skill(tmp_path, "s", front)
    result = lib.scan_skills([tmp_path])
    assert [str(p) for p in result.errors] == [f"{path}:{expected}"]


@pytest.mark.parametrize(
    ("name", "description", "errors"),
    [
        pytest.param("pdf-tools", "d", [], id="spec-name"),
        pytest.param("PDF-tools", "d", ["name 'PDF-tools' breaks"], id="uppercase"),
        pytest.param("pdf_tools", "d", ["name 'pdf_tools' breaks"], id="underscore"),
        pytest.param("pdf--tools", "d", ["name 'pdf--tools' breaks"], id="double-hyphen"),
        pytest.param("-pdf", "d", ["name '-pdf' breaks"], id="leading-hyphen"),
        pytest.param("pdf", "x" * 1025, ["description is 1025 characters"], id="long-desc"),
        pytest.param("pdf", "x" * 1024, [], id="desc-at-limit"),
    ],
)
def test_strict_adds_agent_skills_rules(
    tmp_path: Path, name: str, description: str, errors: list[str]
) -> None:
    write_skill(tmp_path, name, f"name: '{name}'\ndescription: {description}\n", layout="dir")
    assert lib.scan_skills([tmp_path]).errors == ()
    found = [p.detail for p in lib.scan_skills([tmp_path], strict=True).errors]
    assert [m[: len(e)] for m, e in zip(found, errors, strict=True)] == errors


def test_name_must_match_folder_and_should_match_file(tmp_path: Path) -> None:
    folder = write_skill(tmp_path, "foo", "name: bar\ndescription: d\n", layout="dir")
    flat = write_skill(tmp_path, "baz", "name: qux\ndescription: d\n")
    result = lib.scan_skills([tmp_path])
    assert [str(p) for p in result.problems] == [
        f"{flat}:2: warning: name 'qux' differs from its file name 'baz'",
        f"{folder}:2: error: name 'bar' differs from its folder name 'foo'",
    ]
    strict = lib.scan_skills([tmp_path], strict=True)
    assert [p.severity for p in strict.problems] == ["error", "error"]


@pytest.mark.parametrize(
    "second",
    [
        pytest.param("same-dir", id="flat-and-folder-in-one-dir"),
        pytest.param("other-dir", id="two-dirs"),
    ],
)
def test_duplicate_names_are_errors_naming_both_paths(tmp_path: Path, second: str) -> None:
    one = tmp_path / "one"
    two = one if second == "same-dir" else tmp_path / "two"
    flat = write_skill(one, "dup")
    other = write_skill(two, "dup", layout="dir" if second == "same-dir" else "flat")
    # Within a directory entries are taken in name order, so "dup/" comes before "dup.md".
    first, other = (other, flat) if second == "same-dir" else (flat, other)
    dirs = [one] if second == "same-dir" else [one, two]
    expected = f"{other}: error: duplicate skill name 'dup': also defined in {first}"
    assert [str(p) for p in lib.scan_skills(dirs).errors] == [expected]
    with pytest.raises(SkillError, match="^1 skill problem:\n  .*also defined in"):
        lib.list_skills(dirs)
    with pytest.raises(SkillError, match="duplicate skill name 'dup'"):
        lib.get_skill("dup", dirs)
    result = invoke("list", *(f"--dir={d}" for d in dirs))
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == f"Error: 1 skill problem:\n  {expected}\n"


def test_same_directory_twice_is_not_a_duplicate(two: Path) -> None:
    assert [s.name for s in lib.list_skills([two, two / ".." / "skills"])] == ["alpha", "beta"]


def test_readme_hidden_files_and_folders_without_skill_md_are_skipped(two: Path) -> None:
    (two / "README.md").write_text("# Our skills\n")
    (two / ".draft.md").write_text("not a skill")
    (two / "shared").mkdir()
    (two / "shared" / "notes.md").write_text("not a skill")
    (two / "notes.txt").write_text("not a skill")
    result = lib.scan_skills([two])
    assert ([s.name for s in result.skills], result.problems, result.checked) == (
        ["alpha", "beta"],
        (),
        2,
    )


# --------------------------------------------------------------------------- safety


@pytest.mark.parametrize(
    "name",
    [
        pytest.param("../etc/passwd", id="dotdot-slash"),
        pytest.param("..", id="dotdot"),
        pytest.param("a/b", id="slash"),
        pytest.param("a\\b", id="backslash"),
        pytest.param("/etc/passwd", id="absolute"),
    ],
)
def test_show_refuses_path_like_names(two: Path, name: str, opened: dict[str, int]) -> None:
    with pytest.raises(SkillError, match="may not contain '/', '\\\\' or '..'"):
        lib.get_skill(name, [two])
    result = invoke("show", name, "--dir", str(two))
    assert result.exit_code == 2
    assert f"Invalid value for NAME: invalid skill name {name!r}" in result.stderr
    assert opened == {}


def test_symlinks_leading_outside_are_refused_unread(
    tmp_path: Path, two: Path, opened: dict[str, int]
) -> None:
    outside = tmp_path / "outside"
    secret = write_skill(outside, "secret")
    (two / "secret.md").symlink_to(secret)
    escape = write_skill(outside, "escape", layout="dir").parent
    (two / "escape").symlink_to(escape, target_is_directory=True)
    (two / "beta" / "references" / "leak.md").symlink_to(secret)
    (two / "alias.md").symlink_to(two / "alpha.md")  # inside: allowed, and so a duplicate
    result = lib.scan_skills([two])
    assert [str(p) for p in result.problems] == [
        f"{two / 'alias.md'}:2: warning: name 'alpha' differs from its file name 'alias'",
        f"{two / 'escape' / 'SKILL.md'}: error: symlink leads outside the skills directory;"
        " not read",
        f"{two / 'secret.md'}: error: symlink leads outside the skills directory; not read",
        f"{two / 'alpha.md'}: error: duplicate skill name 'alpha': also defined in"
        f" {two / 'alias.md'}",
    ]
    assert not any(str(outside) in p for p in opened)
    beta = lib.load_detail(lib.get_skill("beta", [two]))
    assert "references/leak.md" not in beta.files
    shown = invoke("show", "secret", "--dir", str(two))
    assert shown.exit_code == 1
    assert shown.stderr == (
        f"Error: 1 skill problem:\n  {two / 'secret.md'}: error: symlink leads outside the"
        " skills directory; not read\n"
    )
    assert not any(str(outside) in p for p in opened)


def test_a_broken_symlink_is_an_error_not_skipped(tmp_path: Path, two: Path) -> None:
    # A dangling x.md was skipped in silence: `skills validate` said "0 errors" in CI.
    (two / "x.md").symlink_to(tmp_path / "gone.md")
    (two / "gamma").mkdir()
    (two / "gamma" / "SKILL.md").symlink_to(tmp_path / "gone" / "SKILL.md")
    assert [str(p) for p in lib.scan_skills([two]).problems] == [
        f"{two / 'gamma' / 'SKILL.md'}: error: broken symlink (to {tmp_path}/gone/SKILL.md);"
        " not read",
        f"{two / 'x.md'}: error: broken symlink (to {tmp_path}/gone.md); not read",
    ]
    assert invoke("validate", "--dir", str(two)).exit_code == 1


def bomb_front(name: str = "bomb") -> str:
    """Front matter whose parameter ``p`` holds a 387-million-string YAML bomb."""
    lines = "".join(f"    {line}\n" for line in yaml_bomb().splitlines())
    return f"name: {name}\ndescription: Boom.\nparameters:\n  p:\n    type: string\n{lines}"


@pytest.mark.parametrize(
    "args",
    [
        pytest.param(["list", "--format", "openai"], id="list-openai"),
        pytest.param(["show", "bomb"], id="show"),
        pytest.param(["show", "bomb", "--format", "json"], id="show-json"),
    ],
)
def test_a_yaml_bomb_skill_ends_fast_in_little_memory(tmp_path: Path, args: list[str]) -> None:
    path = write_skill(tmp_path / "skills", "bomb", bomb_front())
    assert path.stat().st_size < 1024
    out = run_cli_bounded("ctxcli.skills_cli:skills", [*args, "--dir", "skills"], tmp_path)
    assert out["exit_code"] == 1, out
    assert (
        "skills/bomb.md:8: error: invalid YAML in front matter: aliases are not allowed"
        " (found *l0); write the value out" in out["output"]
    ), out
    assert out["seconds"] < 1.0 and out["peak_mb"] < 100, out


def test_deep_nesting_is_a_problem_not_a_crash(tmp_path: Path) -> None:
    # 50 KB of brackets, inside the size bound: libyaml's composer recursed until the
    # process died of a segmentation fault.
    depth = 25_000
    write_skill(tmp_path / "skills", "deep", "name: deep\ndescription: d\nx: " + "[" * depth
                + "]" * depth + "\n")  # fmt: skip
    out = run_cli_bounded("ctxcli.skills_cli:skills", ["list", "--dir", "skills"], tmp_path)
    assert out["exit_code"] == 1, out
    assert out["output"] == (
        "Error: 1 skill problem:\n  skills/deep.md:4: error: invalid YAML in front matter:"
        " nested more than 100 levels deep\n"
    )


def test_a_yaml_bomb_is_a_problem_of_its_own_skill(two: Path) -> None:
    path = write_skill(two, "bomb", bomb_front())
    problem = f"{path}:8: error: invalid YAML in front matter: aliases are not allowed (found *l0);"
    checked = invoke("validate", "--dir", str(two))
    assert checked.exit_code == 1
    assert checked.stdout == problem + " write the value out\n"
    assert checked.stderr == "Error: 3 skill files: 1 error, 0 warnings\n"
    shown = invoke("show", "alpha", "--dir", str(two), "--format", "json")
    assert shown.exit_code == 0 and json.loads(shown.stdout)["name"] == "alpha"


def test_front_matter_values_without_a_json_form_are_refused(tmp_path: Path) -> None:
    # json.dumps would write them as NaN and Infinity, which no JSON parser reads.
    path = write_skill(
        tmp_path, "a", "name: a\ndescription: d\nparameters:\n  x: {type: number, default: .inf}\n"
    )
    result = invoke("list", "--dir", str(tmp_path), "--format", "openai")
    assert (result.exit_code, result.stdout) == (1, "[]\n")  # a listing, of none
    assert result.stderr == (
        f"Error: 1 skill problem:\n  {path}:5: error: invalid YAML in front matter:"
        " '.inf' is not a finite number (JSON has none)\n"
    )


# --------------------------------------------------------------------------- show


def test_show_text_is_metadata_parameters_files_then_body(two: Path) -> None:
    result = invoke("show", "alpha", "--dir", str(two))
    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout == (
        "name: alpha\n"
        "description: First skill.\n"
        f"path: {two / 'alpha.md'}\n"
        "parameters:\n"
        "  path (string; required): A path.\n"
        "  count (integer; default 3)\n"
        "\n"
        "# Guide\n\nUse it.\n"
    )


def test_show_lists_other_files_without_reading_them(two: Path, opened: dict[str, int]) -> None:
    result = invoke("show", "beta", "--dir", str(two), "--format", "json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    assert data["files"] == ["references/REFERENCE.md", "scripts/run.py"]
    assert (data["body"], data["layout"]) == ("Beta guide.", "directory")
    assert {Path(p).name for p in opened} == {"SKILL.md", "alpha.md"}


def test_show_unknown_name_lists_available(two: Path) -> None:
    result = invoke("show", "gamma", "--dir", str(two))
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr == "Error: unknown skill 'gamma'; available: alpha, beta\n"


def test_show_works_despite_a_broken_other_skill(two: Path) -> None:
    (two / "broken.md").write_text("no front matter\n")
    assert lib.get_skill("alpha", [two]).name == "alpha"
    with pytest.raises(SkillError, match=r"available: alpha, beta \(1 skill files have errors\)"):
        lib.get_skill("gamma", [two])
    with pytest.raises(SkillError, match=r"broken.md:1: error: no front matter"):
        lib.get_skill("broken", [two])
    # A skill with an error in its file cannot be shown: it is not named available.
    (two / "params.md").write_text(
        "---\nname: params\ndescription: d\nparameters:\n  p: {type: strng}\n---\n"
    )
    with pytest.raises(SkillError, match=r"available: alpha, beta \(2 skill files have errors\)"):
        lib.get_skill("gamma", [two])


def test_load_detail_reads_the_body_after_an_edit(two: Path) -> None:
    skill = lib.get_skill("alpha", [two])
    path = two / "alpha.md"
    path.write_text("---\nname: alpha\ndescription: Now longer than before.\n---\r\nNew body\r\n")
    assert lib.load_detail(skill).body == "New body"


# --------------------------------------------------------------------------- exports


def test_openai_export_matches_the_chat_completions_tools_schema(tmp_path: Path) -> None:
    write_skill(tmp_path, "no_params")
    found = lib.list_skills([REPO / "skills", tmp_path])
    tools = json.loads(lib.export_skills(found, "openai"))
    jsonschema.Draft202012Validator(CHAT_COMPLETIONS_TOOLS_SCHEMA).validate(tools)
    assert len(tools) == len(found) == 7
    read_file = next(t["function"] for t in tools if t["function"]["name"] == "read_file")
    assert read_file["parameters"]["required"] == ["path"]
    assert tools[-1]["function"]["parameters"] == {
        "type": "object",
        "properties": {},
        "required": [],
    }


@pytest.mark.parametrize(
    "bad",
    [
        pytest.param({"type": "tool", "function": {"name": "a"}}, id="type"),
        pytest.param({"type": "function", "function": {"name": "a.b"}}, id="dotted-name"),
        pytest.param({"type": "function", "function": {"name": "a" * 65}}, id="long-name"),
        pytest.param(
            {"type": "function", "function": {"name": "a", "parameters": {"type": "array"}}},
            id="non-object-parameters",
        ),
    ],
)
def test_tools_schema_rejects_what_the_api_rejects(bad: dict[str, Any]) -> None:
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate([bad], CHAT_COMPLETIONS_TOOLS_SCHEMA)


def test_anthropic_and_mcp_exports(two: Path) -> None:
    found = lib.list_skills([two])
    schema = {
        "type": "object",
        "properties": {"path": {"type": "string", "description": "A path."},
                       "count": {"type": "integer", "default": 3}},
        "required": ["path"],
    }  # fmt: skip
    anthropic = json.loads(lib.export_skills(found, "anthropic"))
    assert anthropic[0] == {"name": "alpha", "description": "First skill.", "input_schema": schema}
    mcp = json.loads(lib.export_skills(found, "mcp"))
    assert mcp["tools"][0] == {
        "name": "alpha",
        "description": "First skill.",
        "inputSchema": schema,
    }
    assert mcp["tools"][1]["inputSchema"] == {"type": "object", "properties": {}, "required": []}


def test_xml_export_is_the_skills_ref_prompt_block(tmp_path: Path) -> None:
    path = write_skill(tmp_path, "pdf", 'name: pdf\ndescription: Fill <forms> & "merge".\n')
    result = invoke("list", "--dir", str(tmp_path), "--format", "xml")
    assert result.stdout == (
        "<available_skills>\n<skill>\n<name>\npdf\n</name>\n<description>\n"
        "Fill &lt;forms&gt; &amp; &quot;merge&quot;.\n</description>\n<location>\n"
        f"{path.resolve()}\n</location>\n</skill>\n</available_skills>\n"
    )
    assert lib.export_skills([], "xml") == "<available_skills>\n</available_skills>"


def test_json_export_keeps_front_matter_verbatim(tmp_path: Path) -> None:
    write_skill(tmp_path, "s", "name: s\ndescription: d\nx-custom: 2026-01-02\nlicense: MIT\n")
    [entry] = json.loads(lib.export_skills(lib.list_skills([tmp_path]), "json"))
    assert entry["frontmatter"] == {
        "name": "s", "description": "d", "x-custom": "2026-01-02", "license": "MIT"
    }  # fmt: skip
    assert (entry["layout"], entry["path"]) == ("flat", str(tmp_path / "s.md"))


def test_unknown_export_format_names_the_known_ones() -> None:
    with pytest.raises(SkillError, match="unknown skill format 'yaml'; known: json, openai"):
        lib.export_skills([], "yaml")  # type: ignore[arg-type]


# --------------------------------------------------------------------------- list CLI


def test_list_table(two: Path) -> None:
    result = invoke("list", "--dir", str(two))
    assert (result.exit_code, result.stderr) == (0, "")
    assert result.stdout == (
        "NAME   PARAMETERS   DESCRIPTION\n"
        "alpha  path, count  First skill.\n"
        "beta   -            Does beta.\n"
    )


def test_list_tokens_counts_listing_and_bodies(two: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(export, "count_tokens", len)  # characters stand in for tokens
    result = invoke("list", "--dir", str(two), "--tokens")
    assert result.exit_code == 0
    found = lib.list_skills([two])
    listing = len(lib.export_skills(found, "xml"))
    alpha, beta = (len(lib.export_skills([s], "xml")) for s in found)
    assert result.stdout.splitlines() == [
        "NAME   PARAMETERS   LIST_TOK  BODY_TOK  DESCRIPTION",
        f"alpha  path, count  {alpha:>8}        16  First skill.",
        f"beta   -            {beta:>8}        11  Does beta.",
        f"tokens (o200k_base): listing {listing} (xml), all bodies 27; lazy loading saves 27"
        f" of {listing + 27} ({100 * 27 / (listing + 27):.0f}%)",
    ]
    json_run = invoke("list", "--dir", str(two), "--tokens", "--format", "openai")
    assert json.loads(json_run.stdout)[0]["function"]["name"] == "alpha"
    assert json_run.stderr.startswith("tokens (o200k_base): listing ")
    assert " (openai), all bodies 27;" in json_run.stderr


def test_count_tokens_uses_o200k_base() -> None:
    try:
        import tiktoken

        tiktoken.get_encoding("o200k_base")
    except Exception as e:  # no cached encoding and no network
        pytest.skip(f"o200k_base not available offline: {e}")
    assert lib.count_tokens("hello world") == 2
    assert lib.count_tokens("<|endoftext|>") > 1  # special tokens counted as plain text


def test_list_dirs_from_environment(tmp_path: Path, two: Path) -> None:
    other = tmp_path / "more"
    write_skill(other, "gamma")
    env = {"CTXCLI_SKILLS_DIR": os.pathsep.join([str(two), str(other)])}
    result = invoke("list", "--format", "json", env=env)
    assert [e["name"] for e in json.loads(result.stdout)] == ["alpha", "beta", "gamma"]


def test_list_missing_directory_is_a_usage_error(tmp_path: Path) -> None:
    result = invoke("list", "--dir", str(tmp_path / "nope"))
    assert result.exit_code == 2
    assert "Directory" in result.stderr and "does not exist" in result.stderr


def test_list_empty_directory(tmp_path: Path) -> None:
    table = invoke("list", "--dir", str(tmp_path))
    assert (table.exit_code, table.stdout, table.stderr) == (
        0,
        "",
        f"No skills found in {tmp_path}\n",
    )
    assert invoke("list", "--dir", str(tmp_path), "--format", "openai").stdout == "[]\n"


@pytest.mark.parametrize(
    ("front", "message"),
    [
        pytest.param("name: a\ndescription: when: now\n",
                     "3: error: invalid YAML in front matter: mapping values are not allowed here",
                     id="malformed-yaml"),
        pytest.param("description: d\n", "2: error: missing required field in front matter: name",
                     id="missing-name"),
        pytest.param("name: ..\ndescription: d\n",
                     "2: error: name '..' is not a valid OpenAI/Anthropic function name:"
                     " use 1-64 letters, digits, '_' or '-'", id="dotdot-name"),
    ],
)  # fmt: skip
def test_list_and_validate_fail_with_file_and_line(
    tmp_path: Path, front: str, message: str
) -> None:
    path = write_skill(tmp_path, "a", front)
    listed = invoke("list", "--dir", str(tmp_path))
    assert (listed.exit_code, listed.stdout) == (1, "")
    assert listed.stderr == f"Error: 1 skill problem:\n  {path}:{message}\n"
    checked = invoke("validate", "--dir", str(tmp_path))
    assert checked.exit_code == 1
    assert checked.stdout.splitlines()[0] == f"{path}:{message}"
    assert checked.stderr.startswith("Error: 1 skill files: 1 error, ")


def test_list_shows_the_good_skills_beside_a_bad_one_and_fails(tmp_path: Path) -> None:
    # One broken file emptied the listing: an agent given `--format openai` lost every
    # tool for one typo. The good ones are listed; the broken and the duplicated are
    # not (either of two of one name would shadow the other), and the exit status is 1.
    write_skill(tmp_path, "good")
    bad = write_skill(tmp_path, "bad", "name: bad\ndescription: when: now\n")
    first = write_skill(tmp_path, "dup", layout="dir")
    second = write_skill(tmp_path, "dup")
    listed = invoke("list", "--dir", str(tmp_path), "--format", "openai")
    assert listed.exit_code == 1
    assert [t["function"]["name"] for t in json.loads(listed.stdout)] == ["good"]
    assert listed.stderr == (
        "Error: 2 skill problems; the skills they name are not listed:\n"
        f"  {bad}:3: error: invalid YAML in front matter: mapping values are not allowed here\n"
        f"  {second}: error: duplicate skill name 'dup': also defined in {first}\n"
    )
    table = invoke("list", "--dir", str(tmp_path))
    assert (table.exit_code, table.stdout.split()[3:4]) == (1, ["good"])
    with pytest.raises(SkillError, match="^2 skill problems:"):
        lib.list_skills([tmp_path])  # the API's list is all or an error, as before
    # With none to list, a tool listing is still one: `> tools.json` holds [].
    for path in (tmp_path / "good.md", second, first):
        path.unlink()
    empty = invoke("list", "--dir", str(tmp_path), "--format", "openai")
    assert (empty.exit_code, json.loads(empty.stdout)) == (1, [])
    assert empty.stderr.startswith("Error: 1 skill problem:\n")


def test_validate_clean_and_warning_exit_zero(tmp_path: Path) -> None:
    path = write_skill(tmp_path, "a", "name: b\ndescription: d\n")
    result = invoke("validate", "--dir", str(tmp_path))
    assert (result.exit_code, result.stdout, result.stderr) == (
        0,
        f"{path}:2: warning: name 'b' differs from its file name 'a'\n",
        "1 skill files: 0 errors, 1 warning\n",
    )
    strict = invoke("validate", "--strict", "--dir", str(tmp_path))
    assert strict.exit_code == 1


# --------------------------------------------------------------------------- shipped skills


def test_shipped_skills_validate_and_show_from_repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    result = lib.scan_skills(["skills"])
    assert result.problems == ()
    assert len(result.skills) >= 6
    assert {"directory", "flat"} == {s.layout for s in result.skills}
    for skill in result.skills:
        detail = lib.load_detail(skill)
        assert skill.parameters["required"], skill.name
        assert len(detail.body.splitlines()) >= 20, skill.name
    shown = invoke("show", "read_file")
    assert shown.exit_code == 0
    assert shown.stdout.startswith("name: read_file\ndescription: Read a UTF-8 text file")
    assert "  path (string; required): Path of the file" in shown.stdout


# --------------------------------------------------------------------------- help


def iter_commands() -> Iterator[tuple[str, ...]]:
    yield ()
    for name in skills.commands:
        yield (name,)


@pytest.mark.parametrize(
    "path", [pytest.param(p, id=" ".join(p) or "skills") for p in iter_commands()]
)
@pytest.mark.parametrize(
    "flag", [pytest.param("-h", id="short"), pytest.param("--help", id="long")]
)
def test_every_command_has_help_with_an_example(path: tuple[str, ...], flag: str) -> None:
    result = invoke(*path, flag)
    assert result.exit_code == 0
    assert "Examples:" in result.stdout
    assert "ctxcli skills" in result.stdout.split("Examples:")[1]


@pytest.mark.parametrize(
    "loader",
    [
        pytest.param("CSafeLoader", id="libyaml"),
        pytest.param("SafeLoader", id="pure-python"),
    ],
)
def test_libyaml_and_pure_python_parse_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, loader: str
) -> None:
    if not hasattr(yaml, loader):
        pytest.skip(f"PyYAML built without {loader}")
    if loader == "SafeLoader":
        monkeypatch.setattr(yamlio, "_FastLoader", yamlio._PureLoader)
    assert issubclass(yamlio._FastLoader, getattr(yaml, loader))
    good = write_skill(tmp_path, "a", "name: a\ndescription: d\nparameters:\n  p: {type: string}\n")
    fm = lib.read_front_matter(good)
    assert (fm.data["parameters"], fm.key_lines[("parameters", "p")]) == (
        {"p": {"type": "string"}},
        5,
    )
    bad = write_skill(tmp_path, "b", "name: b\ndescription: when: now\n")
    with pytest.raises(SkillError) as caught:
        lib.read_front_matter(bad)
    assert str(caught.value) == (
        f"{bad}:3: invalid YAML in front matter: mapping values are not allowed here"
    )


def test_tokens_without_the_encoding_is_a_clear_error(
    two: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import tiktoken

    def offline(name: str) -> None:
        raise ConnectionError("no network")

    from ctxcli.tokens import get_counter

    monkeypatch.setattr(tiktoken, "get_encoding", offline)
    get_counter.cache_clear()  # a counter loaded by an earlier test would hide the failure
    result = invoke("list", "--dir", str(two), "--tokens")
    get_counter.cache_clear()
    assert (result.exit_code, result.stdout) == (1, "")
    assert result.stderr.startswith(
        "Error: cannot load the o200k_base tokenizer (ConnectionError); offline, set"
        " TIKTOKEN_CACHE_DIR to a folder with its BPE file"
    )
