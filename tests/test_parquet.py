"""Parquet in and out: a Hugging Face-style shard (a messages column of structs,
other columns beside it), JSON text columns, and what happens without pyarrow."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctxcli.cli import cli
from ctxcli.inputs import default_stats

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}


def chat(turns: int, size: int) -> list[dict[str, str]]:
    messages = [SYSTEM]
    for t in range(turns):
        messages += [
            {"role": "user", "content": f"question {t}: " + "why is the sky blue? " * size},
            {"role": "assistant", "content": f"answer {t}: " + "Rayleigh scattering. " * size},
        ]
    return messages


@pytest.fixture
def shard(tmp_path: Path) -> Path:
    """A shard as the Hub stores one: messages as list<struct<role, content>>, an id, a
    source, a binary column and the schema's huggingface metadata, two row groups."""
    rows = [
        {
            "id": f"c{i}",
            "messages": chat(3 + i % 5, 20 + 10 * i),
            "source": "synthetic",
            "blob": bytes([i]),
        }
        for i in range(12)
    ]
    table = pa.Table.from_pylist(rows).replace_schema_metadata({"huggingface": '{"info": {}}'})
    path = tmp_path / "train-00000-of-00001.parquet"
    pq.write_table(table, path, row_group_size=6)
    return path


def compress(*args: str) -> None:
    result = CliRunner().invoke(cli, ["compress", *args, "-q"])
    assert result.exit_code == 0, result.output


def test_no_op_compression_gives_back_an_equal_table(shard: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.parquet"
    compress(str(shard), "-o", str(out), "--max-tokens", "0")
    assert pq.read_table(out).equals(pq.read_table(shard), check_metadata=True)


def test_compression_keeps_every_other_column_and_the_schema(shard: Path, tmp_path: Path) -> None:
    out = tmp_path / "out.parquet"
    compress(str(shard), "-o", str(out), "--max-tokens", "300", "--stages", "summary,priority")
    before, after = pq.read_table(shard), pq.read_table(out)
    assert after.schema.equals(before.schema, check_metadata=True)
    for name in ("id", "source", "blob"):
        assert after.column(name) == before.column(name)
    stats = json.loads(Path(default_stats(str(out))).read_text())
    assert stats["conversations"] == 12 and stats["conversations_changed"] > 6
    assert after.column("messages") != before.column("messages")
    assert CliRunner().invoke(cli, ["validate", str(out)]).exit_code == 0


def test_a_value_the_struct_cannot_hold_falls_back_with_a_warning(tmp_path: Path) -> None:
    # A struct without a field for tool_calls: dropping a call's result (priority) is
    # fine, but the summary's extra field would be lost: the row is contained.
    rows = [{"messages": chat(6, 40), "n": 1}]
    path = tmp_path / "a.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    out = tmp_path / "b.parquet"
    result = CliRunner().invoke(
        cli,
        ["compress", str(path), "-o", str(out), "--max-tokens", "200", "--summary-role", "system"],
    )
    assert result.exit_code in (0, 5), result.output
    assert pq.read_table(out).schema == pq.read_table(path).schema


def test_messages_as_json_text_and_a_bad_row(tmp_path: Path) -> None:
    rows = [{"conversations": json.dumps(chat(4, 30)), "k": i} for i in range(3)]
    rows[2]["conversations"] = "{oops"
    path = tmp_path / "t.parquet"
    pq.write_table(pa.Table.from_pylist(rows), path)
    result = CliRunner().invoke(
        cli, ["compress", str(path), "--messages-key", "conversations", "-q"]
    )
    assert result.exit_code == 1
    assert f"{path}[record 2]: column 'conversations': invalid JSON" in result.output
    kept = CliRunner().invoke(
        cli,
        [
            "compress",
            str(path),
            "--messages-key",
            "conversations",
            "-q",
            "--on-error",
            "keep",
            "--max-tokens",
            "200",
        ],
    )
    assert kept.exit_code == 0, kept.output
    after = pq.read_table(tmp_path / "t.compressed.parquet")
    assert after.column("k") == pq.read_table(path).column("k")
    assert after.column("conversations")[2].as_py() == "{oops"
    assert len(json.loads(after.column("conversations")[0].as_py())) < 9


def test_no_messages_column_names_the_columns(tmp_path: Path) -> None:
    path = tmp_path / "x.parquet"
    pq.write_table(pa.table({"text": ["hi"]}), path)
    result = CliRunner().invoke(cli, ["compress", str(path), "-q"])
    assert result.exit_code == 1
    assert "no column holds the messages" in result.output and "text (string)" in result.output


def test_without_pyarrow_the_error_says_what_to_install(
    shard: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    result = CliRunner().invoke(cli, ["compress", str(shard), "-q"])
    assert result.exit_code == 1
    assert "pip install 'ctxcli[parquet]'" in result.output


def test_count_reads_parquet_as_compress_does(shard: Path, tmp_path: Path) -> None:
    counted = CliRunner().invoke(cli, ["count", str(shard), "--format", "json"])
    assert counted.exit_code == 0, counted.output
    out = tmp_path / "out.parquet"
    compress(str(shard), "-o", str(out), "--max-tokens", "300")
    stats = json.loads(Path(default_stats(str(out))).read_text())
    assert json.loads(counted.stdout)["total"]["tokens"] == stats["tokens"]["before"] > 0


def test_an_output_named_in_another_shape_than_its_input_is_refused(
    shard: Path, tmp_path: Path
) -> None:
    """``-o out.parquet`` of a JSONL input wrote JSONL bytes under that name, which no
    Parquet reader opens (exit 0); a Parquet input's ``-o out.jsonl``, Parquet bytes."""
    source = tmp_path / "chat.jsonl"
    source.write_text(json.dumps({"messages": chat(3, 40)}) + "\n")
    for given, named in ((source, "out.parquet"), (shard, "out.jsonl")):
        result = CliRunner().invoke(
            cli, ["compress", str(given), "-o", str(tmp_path / named), "--max-tokens", "200"]
        )
        assert result.exit_code == 1 and "the output is written as" in result.output
        assert not (tmp_path / named).exists()
    piped = CliRunner().invoke(
        cli,
        ["compress", "-", "-o", str(tmp_path / "piped.parquet")],
        input=source.read_text(),
    )
    assert piped.exit_code == 1 and not (tmp_path / "piped.parquet").exists()


def test_a_parquet_file_compresses_in_place_and_dry_run(shard: Path, tmp_path: Path) -> None:
    """The shape check above refused ``--in-place`` (its temporary file is no
    ``.parquet`` name), ``--dry-run`` and ``-o /dev/null`` of a Parquet input."""
    before = pq.read_table(shard)
    dry = CliRunner().invoke(cli, ["compress", str(shard), "--dry-run", "--max-tokens", "300"])
    assert dry.exit_code == 1 and "would" in dry.output, dry.output  # it would change
    compress(str(shard), "-o", os.devnull, "--max-tokens", "300")
    compress(str(shard), "--in-place", "--max-tokens", "300")
    after = pq.read_table(shard)
    assert after.num_rows == before.num_rows and after != before
