"""The public Python API, and what importing it costs."""

from __future__ import annotations

import copy
import json
import pydoc
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from test_formats import ANTHROPIC, SESSION

import ctxcli
from ctxcli.cli import cli


def test_every_public_name_imports() -> None:
    for name in ctxcli.__all__:
        assert getattr(ctxcli, name) is not None


def test_the_api_compresses_one_record() -> None:
    compressor = ctxcli.Compressor(ctxcli.resolve(stages="window", max_tokens=0))
    record = {"messages": [{"role": "user", "content": f"m{i}"} for i in range(30)]}
    result = compressor.conversation(record)
    assert [m.data["content"] for m in result.after.messages] == [f"m{i}" for i in range(20, 30)]
    assert not result.over_budget


def test_help_and_skills_list_load_neither_openai_nor_tiktoken() -> None:
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from ctxcli.cli import cli\n"
        "CliRunner().invoke(cli, ['--help'])\n"
        "CliRunner().invoke(cli, ['skills', 'list', '--dir', 'skills'])\n"
        "print(sorted(m for m in ('openai', 'tiktoken', 'tqdm') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_skills_group_is_loaded_only_when_asked_for() -> None:
    code = (
        "import sys\n"
        "from click.testing import CliRunner\n"
        "from ctxcli.cli import cli\n"
        "print('yaml' in sys.modules)\n"
        "listing = CliRunner().invoke(cli, ['--help']).output\n"
        "print('skills    List, show' in listing, 'yaml' in sys.modules)\n"
        "CliRunner().invoke(cli, ['skills', '--help'])\n"
        "print('yaml' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    # --help says the skills line itself (cli.SKILLS_HELP): YAML loads for skills alone
    assert out.stdout.split() == ["False", "True", "False", "True"]


def _sharegpt() -> list[dict[str, Any]]:
    turns = [
        {"from": "human" if i % 2 == 0 else "gpt", "value": f"turn {i}: " + "words " * 40}
        for i in range(24)
    ]
    return [{"id": "s1", "conversations": turns}]


def _anthropic() -> list[dict[str, Any]]:
    record = copy.deepcopy(ANTHROPIC)
    record["messages"] = [
        {"role": "user", "content": "Start. " + "context " * 300},
        {"role": "assistant", "content": [{"type": "text", "text": "Ok. " + "more " * 300}]},
        *record["messages"],
    ]
    return [record]


@pytest.mark.parametrize(
    ("records", "args", "shaped"),
    [
        pytest.param(
            _sharegpt(),
            ["--stages", "window", "--keep-last", "4", "--max-tokens", "0"],
            lambda record: {turn["from"] for turn in record["conversations"]} == {"human", "gpt"},
            id="sharegpt",
        ),
        pytest.param(
            _anthropic(),
            ["--max-tokens", "300"],
            lambda record: isinstance(record["system"], list)
            and any(block["type"] == "tool_use" for m in record["messages"] for block in m["content"]
                    if isinstance(m["content"], list)),
            id="anthropic",
        ),
        pytest.param(
            SESSION,
            ["--max-tokens", "300"],
            lambda record: "type" in record
            and ("message" not in record or "role" in record["message"]),
            id="claude-code",
        ),
    ],
)  # fmt: skip
def test_compress_records_gives_what_the_cli_writes_in_the_input_format(
    tmp_path: Path, records: list[dict[str, Any]], args: list[str], shaped: Any
) -> None:
    source, written = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    source.write_text("".join(json.dumps(record) + "\n" for record in records))
    result = CliRunner().invoke(cli, ["compress", str(source), "-o", str(written), "-q", *args])
    assert result.exit_code == 0, result.output
    expected = [json.loads(line) for line in written.read_text().splitlines()]
    options = dict(zip(args[::2], args[1::2], strict=True))
    got = ctxcli.compress_records(
        records,
        max_tokens=int(options["--max-tokens"]),
        stages=options.get("--stages"),
        stage_options={"window": {"keep_last": int(options.get("--keep-last", 10))}},
    )
    assert got == expected
    assert got != records  # compressed, not copied
    assert all(shaped(record) for record in got)


def test_the_api_counts_validates_restores_and_lists_skills(tmp_path: Path) -> None:
    record = copy.deepcopy(ANTHROPIC)
    record["messages"][2]["content"][0]["content"] = "snow " * 400
    source = tmp_path / "in.jsonl"
    source.write_text(json.dumps(record) + "\n")
    placeholders = {"placeholder": {"threshold": 50, "keep_recent": 0}}
    stats = ctxcli.compress_file(str(source), stages="placeholder", stage_options=placeholders)
    assert stats.output == str(tmp_path / "in.compressed.jsonl")
    assert ctxcli.count_tokens(str(source)) == stats.tokens_before > stats.tokens_after
    assert ctxcli.validate_file(stats.output) == []
    restored = tmp_path / "restored.jsonl"
    assert ctxcli.restore_file(stats.output, str(restored)).placeholders == 1
    assert json.loads(restored.read_text()) == record
    assert "read_file" in [skill.name for skill in ctxcli.list_skills()]
    assert ctxcli.show_skill("read_file").body
    # one folder, as a string or a Path, is that folder (a string was read as a list
    # of one-letter folders: "skills directory not found: t")
    shipped = Path(ctxcli.__file__).parent / "shipped_skills"
    for folder in (str(shipped), shipped):
        assert "read_file" in [skill.name for skill in ctxcli.list_skills(folder)]
        assert ctxcli.show_skill("read_file", folder).body


def test_the_api_is_a_dozen_names_documented_by_help() -> None:
    assert len(ctxcli.__all__) <= 12
    text = pydoc.render_doc(ctxcli, renderer=pydoc.plaintext)
    for name in ctxcli.__all__:
        assert f"\n    {name}(" in text or f"class {name}(" in text, name


def test_import_ctxcli_loads_neither_the_pipeline_nor_openai_yaml_tqdm() -> None:
    code = (
        "import sys, ctxcli\n"
        "print(sorted(m for m in ('openai', 'yaml', 'tqdm', 'tiktoken', 'ctxcli.compress')"
        " if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize(
    ("settings", "said"),
    [
        ({"maxtokens": 2000}, "unknown setting 'maxtokens' (did you mean 'max_tokens'?)"),
        ({"stage": "window"}, "unknown setting 'stage' (did you mean 'stages'?)"),
        ({"placeholder_threshold": 100}, "unknown setting 'placeholder_threshold'; known: "),
    ],
)
def test_an_unknown_setting_is_an_error_naming_the_nearest(
    tmp_path: Path, settings: dict[str, Any], said: str
) -> None:
    # The typo was dropped: compress_file(path, maxtokens=2000) ran at 8000 tokens.
    sample = Path(__file__).resolve().parents[1] / "samples" / "agent_run.jsonl"
    out = str(tmp_path / "o.jsonl")
    with pytest.raises(ctxcli.ConfigError, match=re.escape(said)):
        ctxcli.compress_file(str(sample), out, **settings)
    with pytest.raises(ctxcli.ConfigError, match=re.escape(said)):
        ctxcli.count_tokens(str(sample), **settings)
    assert not (tmp_path / "o.jsonl").exists()


def test_paths_may_be_path_objects_and_one_record_is_refused(tmp_path: Path) -> None:
    # compress_file(Path(...)) raised AttributeError ('PosixPath' has no 'lower'), and
    # compress_records(record) named a temporary file the caller never gave.
    sample = Path(__file__).resolve().parents[1] / "samples" / "agent_run.jsonl"
    out, store = tmp_path / "o.jsonl", tmp_path / "o.store.jsonl"
    stats = ctxcli.compress_file(sample, out, store=store, max_tokens=2000, stages="placeholder")
    assert stats.tokens_after < stats.tokens_before and store.exists()
    assert ctxcli.count_tokens(sample) == stats.tokens_before
    assert ctxcli.validate_file(out) == []
    restored = tmp_path / "r.jsonl"
    ctxcli.restore_file(out, restored, store)
    assert json.loads(restored.read_text()) == json.loads(sample.read_text())
    with pytest.raises(ctxcli.ConfigError, match="records must be a list of records"):
        ctxcli.compress_records({"messages": [{"role": "user", "content": "hi"}]})


def test_a_bad_record_given_to_compress_records_is_named_by_its_index() -> None:
    # The error named the temporary file the records were written to, gone by then:
    # "/tmp/ctxcli-x1y2/in.jsonl:2: no format fits this record".
    good = {"messages": [{"role": "user", "content": "hi"}]}
    with pytest.raises(ctxcli.InputError) as caught:
        ctxcli.compress_records([good, {"nope": 1}], max_tokens=10)
    assert str(caught.value).startswith("records[record 1]: no format fits this record")
    assert caught.value.record == 1


#: Placeholders for every tool result over 50 tokens, the most recent too.
PLACEHOLDERS = {"placeholder": {"threshold": 50, "keep_recent": 0}}


def _snowed(name: str) -> dict[str, Any]:
    """An Anthropic record whose tool result (400 tokens, named) becomes a placeholder."""
    record = copy.deepcopy(ANTHROPIC)
    record["messages"][2]["content"][0]["content"] = f"{name} " + "snow " * 400
    return record


@pytest.mark.parametrize("function", ["compress_file", "compress_records"])
def test_the_api_adds_to_a_named_store(tmp_path: Path, function: str) -> None:
    # compress_file ignored the plan's "added to", and compress_records replaced the
    # store too: a second call left the second's originals only, and the first
    # output's placeholders could not be restored.
    store = tmp_path / "shared.jsonl"
    outputs = []
    for name in "ab":
        record, output = _snowed(name), tmp_path / f"{name}.out.jsonl"
        if function == "compress_file":
            source = tmp_path / f"{name}.jsonl"
            source.write_text(json.dumps(record) + "\n")
            ctxcli.compress_file(
                source, output, store=store, stages="placeholder", stage_options=PLACEHOLDERS
            )
        else:
            [out] = ctxcli.compress_records(
                [record], store=store, stages="placeholder", stage_options=PLACEHOLDERS
            )
            output.write_text(json.dumps(out) + "\n")
        outputs.append((output, record))
    for output, record in outputs:
        back = tmp_path / "back.jsonl"
        ctxcli.restore_file(output, back, store)
        assert json.loads(back.read_text()) == record
