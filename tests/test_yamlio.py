"""Tests of ctxcli.yamlio, the bounded YAML loader of config files and skill front matter."""

from __future__ import annotations

import pytest
from helpers import yaml_bomb as bomb

from ctxcli import yamlio
from ctxcli.errors import CtxcliError, YamlError


def test_the_bomb_is_under_a_kilobyte() -> None:
    assert len(bomb().encode()) < 1024


@pytest.mark.parametrize(
    ("text", "line", "reason"),
    [
        pytest.param(bomb(), 2, "aliases are not allowed (found *l0); write the value out",
                     id="bomb"),
        pytest.param("a: &x {b: 1}\nc:\n  <<: *x\n", 3,
                     "aliases are not allowed (found *x); write the value out", id="merge-key"),
        pytest.param("a: &x [*x]\n", 1, "aliases are not allowed (found *x); write the value out",
                     id="recursive"),
        pytest.param("a: " + "[" * 30_000 + "]" * 30_000 + "\n", 1,
                     "nested more than 100 levels deep", id="deep-flow"),
        pytest.param("a:\n" + "".join(" " * i + "- \n" for i in range(150)), 101,
                     "nested more than 100 levels deep", id="deep-block"),
        pytest.param("a: .inf\n", 1, "'.inf' is not a finite number (JSON has none)", id="inf"),
        pytest.param("a: [1, .NaN]\n", 1, "'.NaN' is not a finite number (JSON has none)",
                     id="nan"),
        pytest.param("a: 1" + ":59" * 21_000 + "\n", 1, "an integer of more than 4300 digits",
                     id="huge-sexagesimal-int"),
        pytest.param("a: " + "9" * 4301 + "\n", 1, "an integer of more than 4300 digits",
                     id="huge-int"),
        pytest.param("a: 0x" + "f" * 4000 + "\n", 1, "an integer of more than 4300 digits",
                     id="huge-hex-int"),
        pytest.param("a: 2024-13-45\n", 1, "month must be in 1..12", id="impossible-date"),
        pytest.param("a: [1, 2\n", 2,
                     "while parsing a flow sequence, expected ',' or ']', but got '<stream end>'",
                     id="syntax"),
        pytest.param("a: !!python/object:os.system x\n", 1,
                     "could not determine a constructor for the tag"
                     " 'tag:yaml.org,2002:python/object:os.system'", id="python-tag"),
        pytest.param("a: " + "x" * yamlio.MAX_BYTES + "\n", None,
                     f"{yamlio.MAX_BYTES + 4} bytes, over the bound of {yamlio.MAX_BYTES}",
                     id="too-long"),
    ],
)  # fmt: skip
def test_what_the_loader_refuses(text: str, line: int | None, reason: str) -> None:
    with pytest.raises(YamlError) as caught:
        yamlio.parse(text, path="c.yaml")
    assert (caught.value.path, caught.value.line, caught.value.reason) == ("c.yaml", line, reason)
    assert isinstance(caught.value, CtxcliError)
    where = f"c.yaml:{line}" if line is not None else "c.yaml"
    assert str(caught.value) == f"{where}: invalid YAML: {reason}"


def test_lines_count_from_first_line() -> None:
    with pytest.raises(YamlError) as caught:
        yamlio.parse("a: 1\nb: *nope\n", path="s.md", first_line=2)
    assert caught.value.line == 3


def test_plain_yaml_loads_as_safe_load_does() -> None:
    text = (
        "a: &anchor-alone 1\nb: [x, {c: null}]\nd: 2024-01-02\ne: 1.5\nf: 0x10\n"
        + "g: " + "[" * 99 + "]" * 99 + "\n"  # the root mapping is the 100th level
    )  # fmt: skip
    document = yamlio.parse(text, path="ok.yaml")
    import yaml

    assert document.data == yaml.safe_load(text)
    assert document.line(("b", 1, "c")) == 2
    assert document.line(("e",)) == 4
    assert document.line(("missing",)) is None
    assert yamlio.parse("", path="empty.yaml").data is None
