"""``ctxcli score`` and ``compress --score``: the facts a compressed file kept."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from ctxcli.cli import cli
from ctxcli.config import resolve
from ctxcli.errors import InputError
from ctxcli.model import make_conversation
from ctxcli.score import KINDS, facts_of, score
from ctxcli.scoring import Scoring
from ctxcli.tokens import TokenCounter

COUNTER = TokenCounter("o200k_base")


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, list(args))


def write_jsonl(path: Path, records: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), "utf-8")
    return path


def conversation(*messages: dict[str, Any], id: str | None = None) -> Any:
    return make_conversation(list(messages), COUNTER, id=id)


FACTS = [
    pytest.param(
        "user",
        "My id is mia_li_3668, flight HAT123, 480 miles, 1,250.00 paid, abc id7 12 v2",
        "ids",
        {"mia_li_3668", "HAT123", "480", "1,250.00"},
        id="ids-words-and-numbers",
    ),
    pytest.param(
        "user",
        "on 2024-05-20 or 2024-05-20T15:00",
        "ids",
        {"2024-05-20", "2024-05-20T15"},
        id="ids-iso",
    ),
    pytest.param(
        "user",
        "2024-05-20, 2024/05/21, 05/22/2024, May 23rd, 2024, 24 June, Sept 25, not May 2024",
        "dates",
        {"2024-05-20", "2024/05/21", "05/22/2024", "May 23", "24 June", "Sept 25"},
        id="dates",
    ),
    pytest.param(
        "user",
        "出发 2024年6月18日，返回 6月20日，18号也行",
        "dates",
        {"2024年6月18日", "6月20日"},
        id="dates-cjk",
    ),
    pytest.param(
        "user",
        "$480, € 20.50, USD 300, 75 USD, 50 dollars, $20-$30, costs $1,625.",
        "amounts",
        {"$480", "€ 20.50", "USD 300", "75 USD", "50 dollars", "$20-$30", "$1,625"},
        id="amounts",
    ),
    pytest.param(
        "user",
        "预算50-100元，运费30块，另付100美元，7天连锁酒店",
        "amounts",
        {"50-100元", "30块", "100美元"},
        id="amounts-cjk-range-whole",
    ),
    pytest.param(
        "tool",
        "edit src/app.py, /testbed/src, ~/.claude/commands, ./src, src/ctxcli/stages; "
        "not and/or, km/h, 05/20/2024, /tmp, /analyze, https://x.org/a/b.py, </b>",
        "paths",
        {"src/app.py", "/testbed/src", "~/.claude/commands", "./src", "src/ctxcli/stages"},
        id="paths",
    ),
    pytest.param(
        "tool",
        "Traceback (most recent call last):\n"
        '  File "/x/y.py", line 3, in f\n'
        "36:        raise RuntimeError('x')\n"
        "    raise ValueError('in a traceback')\n"
        "ValueError:   bad   value\n"
        "FAILED tests/test_x.py::test_a - KeyError\n"
        "bash: foo: command not found\n"
        "<tool_use_error>File has not been read yet.</tool_use_error>\n"
        "Error: flight HAT030 not available\n"
        "all good",
        "errors",
        {
            "Traceback (most recent call last):",
            "ValueError: bad value",
            "FAILED tests/test_x.py::test_a - KeyError",
            "bash: foo: command not found",
            "File has not been read yet.",
            "Error: flight HAT030 not available",
        },
        id="errors-tool",
    ),
    pytest.param(
        "user",
        "ValueError: bad\n- **Error Handling**: capture the error\nI got an Error somewhere",
        "errors",
        {"ValueError: bad"},
        id="errors-user-only-lines-that-open-with-one",
    ),
    pytest.param("assistant", "ValueError: bad", "errors", set(), id="errors-not-from-assistant"),
    pytest.param(
        "user",
        "订单号SF1402938476，地址北京市朝阳区建国路277号，电话138-0000-1234",
        "ids",
        {"SF1402938476", "277", "138-0000-1234"},
        id="ids-cjk",
    ),
]


@pytest.mark.parametrize(("role", "text", "kind", "expected"), FACTS)
def test_each_kind_takes_exactly_its_facts(
    role: str, text: str, kind: str, expected: set[str]
) -> None:
    assert set(facts_of(text, role)[kind]) == expected


def test_an_error_line_counts_by_its_first_120_characters() -> None:
    line = "RuntimeError: " + "x" * 300
    [fact] = facts_of(line, "tool")["errors"]
    assert fact == line[:120]


def test_a_fact_is_kept_where_the_compressed_text_holds_it_tool_calls_included() -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "book", "arguments": "{}"}}
    before = conversation(
        {"role": "system", "content": "Today is 2024-05-15."},
        {"role": "user", "content": "Book HAT123 on 2024-05-15 for $480, and HAT999 too."},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "Error: seat 12A taken\nHAT123 again"},
        {"role": "user", "content": "Thanks"},
    )
    kept_call = {**call, "function": {"name": "book", "arguments": '{"flight": "HAT123"}'}}
    after = conversation(
        {"role": "system", "content": "Today is 2024-05-15."},
        {"role": "user", "content": "[summary] paid $480; Error:   seat 12A taken"},
        {"role": "assistant", "content": None, "tool_calls": [kept_call]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {"role": "user", "content": "Thanks"},
    )
    scored = score(before, after, budget=before.tokens - 1)
    # 2024-05-15 is in the system prompt: never counted. HAT123 counts once; 480 is an
    # id and \$480 an amount: five facts, each once.
    assert scored.total == {"ids": 3, "dates": 0, "amounts": 1, "paths": 0, "errors": 1, "all": 5}
    assert scored.kept == {"ids": 2, "dates": 0, "amounts": 1, "paths": 0, "errors": 1, "all": 4}
    assert scored.lost["ids"] == ["HAT999"]
    assert scored.lost["errors"] == []
    assert set(scored.lost) == set(KINDS)
    assert scored.budget_use == after.tokens / (before.tokens - 1)
    assert score(before, after, budget=before.tokens).budget_use is None  # fitted before
    assert score(before, after).budget_use is None  # no budget


def test_escaped_non_ascii_in_tool_call_arguments_is_read_as_its_text() -> None:
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "pay", "arguments": '{"amount": "50\\u5143", "to": "SF140"}'},
    }
    before = conversation(
        {"role": "user", "content": "pay"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "c1", "content": "done"},
    )
    facts = score(before, before).total
    assert facts["amounts"] == 1 and facts["ids"] == 1  # 50元 and SF140, no "u5143"
    after = conversation({"role": "user", "content": "已付50元给SF140"})
    assert score(before, after).kept["all"] == 2


def pair(tmp_path: Path, before: list[Any], after: list[Any]) -> tuple[str, str]:
    a = write_jsonl(tmp_path / "a.jsonl", before)
    b = write_jsonl(tmp_path / "b.jsonl", after)
    return str(a), str(b)


def chat(id: str, *texts: str) -> dict[str, Any]:
    roles = ["user", "assistant"]
    return {
        "id": id,
        "messages": [{"role": roles[i % 2], "content": t} for i, t in enumerate(texts)],
    }


def test_files_that_hold_different_numbers_of_conversations_are_an_error(tmp_path: Path) -> None:
    a, b = pair(tmp_path, [chat("x", "HAT123"), chat("y", "HAT456")], [chat("x", "HAT123")])
    with pytest.raises(InputError, match=r"holds 1 conversations but .*a\.jsonl holds 2"):
        list(Scoring(resolve()).pairs(a, b))
    result = invoke("score", a, b)
    assert result.exit_code == 1
    assert "holds 1 conversations but" in result.output and "file order" in result.output
    result = invoke("score", b, a)  # the other way round
    assert result.exit_code == 1 and "holds 2 conversations but" in result.output


def test_conversations_of_different_ids_in_one_place_are_an_error(tmp_path: Path) -> None:
    a, b = pair(tmp_path, [chat("x", "HAT123")], [chat("y", "HAT123")])
    result = invoke("score", a, b)
    assert result.exit_code == 1
    assert "conversation 1 is 'y', but 'x' in" in result.output


def test_the_json_report_has_the_file_figure_and_each_conversation(tmp_path: Path) -> None:
    a, b = pair(
        tmp_path,
        [chat("x", "Book HAT123 and HAT456", "ok"), chat("y", "no facts here")],
        [chat("x", "Book HAT123", "ok"), chat("y", "no facts here")],
    )
    result = invoke("score", a, b, "--per-conversation", "--format", "json", "--max-tokens", "5")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert set(report) == {
        "original",
        "compressed",
        "conversations",
        "budget",
        "tokens",
        "over_budget",
        "budget_use",
        "facts",
        "retention_mean",
        "items",
    }
    assert (report["original"], report["compressed"], report["budget"]) == (a, b, 5)
    assert set(report["facts"]) == {"all", *KINDS}
    assert report["facts"]["all"] == {"kept": 1, "total": 2, "ratio": 0.5}
    assert report["facts"]["paths"] == {"kept": 0, "total": 0, "ratio": None}
    assert report["retention_mean"] == 0.5  # y has no facts: not in the mean
    assert report["over_budget"] == {"before": 2, "after": 2}
    assert report["budget_use"]["conversations"] == 2
    first = report["items"][0]
    assert set(first) == {
        "id",
        "line",
        "record",
        "tokens",
        "over_budget_before",
        "budget_use",
        "facts",
        "lost",
    }
    assert (first["id"], first["line"], first["lost"]["ids"]) == ("x", 1, ["HAT456"])
    plain = json.loads(invoke("score", a, b, "--format", "json").output)
    assert "items" not in plain and plain["facts"] == report["facts"]


def test_the_table_has_a_row_per_conversation_and_one_for_the_file(tmp_path: Path) -> None:
    a, b = pair(tmp_path, [chat("x", "HAT123 HAT456", "ok")], [chat("x", "HAT123", "ok")])
    lines = invoke("score", a, b, "--per-conversation", "--max-tokens", "0").output.splitlines()
    assert lines[0].split()[:3] == ["file", "conversation", "id"]
    assert "ids & numbers" in lines[0] and "error lines" in lines[0]
    assert lines[1].split()[:4] == [a, "line", "1", "x"] and "0.50 (1/2)" in lines[1]
    assert lines[2].split()[:3] == ["total", "1", "conversation"]
    assert lines[2].split()[-4:] == ["-"] * 4  # no dates, amounts, paths or error lines
    assert len(lines) == 3
    file_row = invoke("score", a, b).output.splitlines()[1]
    assert file_row.split()[:2] == [a, "1"]


def test_compress_score_puts_the_same_figure_in_the_stats_and_the_table(tmp_path: Path) -> None:
    source = Path(__file__).resolve().parents[1] / "samples/agent_run.jsonl"
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(
        cli, ["compress", str(source), "-o", str(out), "--max-tokens", "3000", "--score"]
    )
    assert result.exit_code == 0, result.output
    stats = json.loads((tmp_path / "out.stats.json").read_text())
    report = json.loads(
        invoke("score", str(source), str(out), "--max-tokens", "3000", "--format", "json").output
    )
    del report["original"], report["compressed"]
    assert stats["score"] == report
    assert f"{source}: facts kept {report['facts']['all']['ratio']:.2f}" in result.output
    plain = CliRunner().invoke(
        cli, ["compress", str(source), "-o", str(out), "--max-tokens", "3000"]
    )
    assert "score" not in json.loads((tmp_path / "out.stats.json").read_text())
    assert "facts kept" not in plain.output


def test_score_takes_the_budget_from_the_stats_compress_wrote(tmp_path: Path) -> None:
    # `score a.jsonl a.compressed.jsonl` after `compress --max-tokens 3000` measured
    # the budget use against 8000: 0.37 where the budget was all but filled.
    source = tmp_path / "a.jsonl"
    source.write_bytes(
        (Path(__file__).resolve().parents[1] / "samples/agent_run.jsonl").read_bytes()
    )
    assert invoke("compress", str(source), "--max-tokens", "3000", "-q").exit_code == 0
    out = str(tmp_path / "a.compressed.jsonl")
    report = json.loads(invoke("score", str(source), out, "--format", "json").output)
    assert report["budget"] == 3000 and report["budget_use"]["median"] > 0.9
    given = invoke("score", str(source), out, "--format", "json", "--max-tokens", "8000")
    assert json.loads(given.output)["budget"] == 8000  # the option still decides
    config = tmp_path / "c.yaml"
    config.write_text("max_tokens: 5000\n")
    configured = invoke("score", str(source), out, "--format", "json", "--config", str(config))
    assert json.loads(configured.output)["budget"] == 5000  # and the config file
    other = tmp_path / "b.compressed.jsonl"
    other.write_bytes(Path(out).read_bytes())  # no stats of its own
    assert (
        json.loads(invoke("score", str(source), str(other), "--format", "json").output)["budget"]
        == 8000
    )


def test_a_file_compress_kept_bad_lines_in_is_scored_with_on_error_keep(tmp_path: Path) -> None:
    """``compress --on-error keep`` copies a bad line unchanged; ``score`` of its
    output stopped at that line, with no way on."""
    source = tmp_path / "a.jsonl"
    good = [json.dumps(chat(k, "Book HAT123 for $480", "Done: HAT123")) for k in "xy"]
    source.write_text(f"{good[0]}\nnot json\n{good[1]}\n", "utf-8")
    out = tmp_path / "out.jsonl"
    result = invoke("compress", str(source), "-o", str(out), "--on-error", "keep", "-q")
    assert result.exit_code == 0, result.output
    result = invoke("score", str(source), str(out))
    assert result.exit_code == 1 and "a.jsonl:2: invalid JSON" in result.output
    result = invoke("score", str(source), str(out), "--on-error", "keep", "--format", "json")
    assert result.exit_code == 0, result.output
    assert "a.jsonl:2: invalid JSON" in result.stderr and "left out of the score" in result.stderr
    report = json.loads(result.stdout)
    assert report["conversations"] == 2 and report["facts"]["all"]["ratio"] == 1.0


def test_a_conversation_within_budget_keeps_every_fact(tmp_path: Path) -> None:
    a, _ = pair(tmp_path, [chat("x", "HAT123 on 2024-05-20 for $480")], [])
    result = invoke("score", a, a, "--format", "json")
    report = json.loads(result.output)
    assert report["facts"]["all"]["ratio"] == 1.0
    assert report["budget_use"]["median"] is None


def test_tau_bench_at_2000_tokens_scores_alike_in_compress_and_score(
    airline: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    args = ["--max-tokens", "2000"]
    result = CliRunner().invoke(
        cli, ["compress", str(airline), "-o", str(out), "-q", "--jobs", "2", "--score", *args]
    )
    assert result.exit_code == 0, result.output
    started = time.perf_counter()
    scored = Scoring(resolve(max_tokens=2000)).file(str(airline), str(out))
    seconds = time.perf_counter() - started
    assert seconds < 20  # about 2 s alone; the machine is shared
    stats = json.loads((tmp_path / "out.stats.json").read_text())
    figure = scored.to_json()
    assert stats["score"] == figure  # the worker processes' pieces add up to the same
    assert figure["conversations"] == 200
    assert figure["facts"]["all"]["total"] > 5000
    assert figure["facts"]["paths"]["total"] == 0  # an airline has no files
    assert figure["facts"]["errors"]["total"] > 20  # "Error: not enough seats on ..."
    assert 0.0 < figure["facts"]["all"]["ratio"] < 1.0
    assert figure["budget_use"]["conversations"] == figure["over_budget"]["before"] > 100
    assert 0.5 < figure["budget_use"]["median"] <= 1.0
    whole = Scoring(resolve(max_tokens=2000)).file(str(airline), str(airline))
    assert whole.ratio() == 1.0
    assert whole.budget_use is not None and whole.budget_use > 1  # as read: over budget
