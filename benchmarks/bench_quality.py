"""What survives compression: fact retention of ctxcli's pipelines beside LangChain's.

Runs each method on tau-bench's 200 airline runs (``../shared/data``, or ``--source``)
at each budget of ``--budgets`` (default 1500, 2000, 3000 tokens) and scores every
output against its run with :mod:`ctxcli.score` (the definition of a fact and of
budget use is that module's docstring, and the README's "Score what was kept"):

- ``ctxcli default``: ``ctxcli compress`` as it runs by default
  (``placeholder,summary,priority``), through the library (:class:`Compressor`);
- ``ctxcli --stages window``: the window stage with its default ``--keep-last 10``;
- ``ctxcli --stages window --keep-last 1000000``: only the budget limits the window,
  like for like with ``trim_messages``;
- ``trim_messages``: LangChain's, ``strategy="last"``, ``include_system=True``,
  ``start_on="human"``, with the exact counter LangChain documents for it,
  ``ChatOpenAI(model="gpt-4o").get_num_tokens_from_messages`` (it counts locally;
  its ``base_url`` is a closed loopback port, so no request could leave);
- ``ClearToolUsesEdit + trim_messages``: LangChain's context-editing strategy
  (``langchain.agents.middleware.context_editing``, as ``ContextEditingMiddleware``
  applies it before a model call) with its trigger at the budget and its other
  settings as they come (``keep=3`` results, ``clear_at_least=0``, placeholder
  ``[cleared]``), counting with the same counter, then the same ``trim_messages``.

Each run's messages go to LangChain through ``convert_to_messages`` and come back as
OpenAI dicts through ``convert_to_openai_messages``; every output, ctxcli's too, is
then read as ctxcli reads a record, so its tokens are ctxcli's count (the cookbook rule)
whatever the method counted with. **Valid** is the share of outputs that break no rule
their run kept: every tool result right after its call (only results between) and every
call answered (``tests/fuzz_oracle.py``'s ``openai_pairing``), the system messages kept
as they were at the start, and the latest user message kept as it was.
"Over" counts outputs over the budget by ctxcli's count; "as whole words" is the share of
facts kept when a fact must not touch an ASCII letter or digit where it is found (a check
on the substring rule).

Usage (``pip install -e ".[bench]"``: langchain-core, langchain-openai, langchain)::

    TIKTOKEN_CACHE_DIR=../shared/tiktoken-cache python benchmarks/bench_quality.py --markdown
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))  # the fuzz oracle's pairing rule

from fuzz_oracle import openai_pairing  # noqa: E402

from ctxcli.compress import Compressor  # noqa: E402
from ctxcli.config import resolve  # noqa: E402
from ctxcli.model import Conversation, make_conversation  # noqa: E402
from ctxcli.score import (  # noqa: E402
    KIND_LABELS,
    FileScore,
    conversation_facts,
    conversation_text,
    score,
)

DEFAULT_SOURCE = HERE.parents[1] / "shared/data/tau-bench/gpt-4o-airline.json"
Messages = list[dict[str, Any]]
#: A method at one budget: a run's messages in, the output's messages out.
Method = Callable[[Messages], Messages]


@dataclass
class Tally:
    """One method at one budget over all runs: the score, the facts kept as whole words
    (:func:`whole_words`), tokens after, outputs over budget, invalid outputs (with
    what they broke) and seconds."""

    scored: FileScore = field(default_factory=FileScore)
    whole_words: int = 0
    tokens_after: list[int] = field(default_factory=list)
    over: int = 0
    invalid: int = 0
    broken: list[str] = field(default_factory=list)
    seconds: float = 0.0


def ctxcli_method(
    budget: int,
    stages: str,
    keep_last: int | None = None,
    summary: Mapping[str, int] | None = None,
) -> Method:
    """ctxcli's pipeline ``stages`` at ``budget``, through the library; ``summary``
    options for its summary stage (``max_tokens``, ``keep_last``) when given."""
    options: dict[str, Any] = {"window": {"keep_last": keep_last}} if keep_last is not None else {}
    if summary:
        options["summary"] = dict(summary)
    compressor = Compressor(
        resolve(stages=stages, stage_options=options or None, max_tokens=budget)
    )

    def run(messages: Messages) -> Messages:
        result = compressor.conversation({"messages": messages})
        return [dict(m.data) for m in result.after.messages]

    return run


def chat_counter() -> Any:
    """LangChain's documented exact counter: a ChatOpenAI model's count (local)."""
    from langchain_openai import ChatOpenAI
    from pydantic import SecretStr

    return ChatOpenAI(model="gpt-4o", api_key=SecretStr("unused"), base_url="http://127.0.0.1:9")


def langchain_method(budget: int, *, clear_tool_uses: bool) -> Method:
    """``trim_messages`` at ``budget``, after ``ClearToolUsesEdit`` when asked."""
    from langchain_core.messages import (
        convert_to_messages,
        convert_to_openai_messages,
        trim_messages,
    )

    chat = chat_counter()
    edit = None
    if clear_tool_uses:
        from langchain.agents.middleware.context_editing import ClearToolUsesEdit

        edit = ClearToolUsesEdit(trigger=budget)

    def run(messages: Messages) -> Messages:
        converted: list[Any] = convert_to_messages(messages)
        if edit is not None:
            edit.apply(converted, count_tokens=chat.get_num_tokens_from_messages)
        kept = trim_messages(
            converted,
            max_tokens=budget,
            token_counter=chat,
            strategy="last",
            include_system=True,
            start_on="human",
        )
        return as_written(convert_to_openai_messages(kept), messages)

    return run


def as_written(out: Messages, messages: Messages) -> Messages:
    """``out`` with each tool call's arguments as the run wrote them, where they are
    the same JSON (LangChain holds them parsed and writes them back with other spacing,
    which ctxcli's count would charge to it)."""
    written = {
        call.get("id"): call["function"]["arguments"]
        for m in messages
        for call in m.get("tool_calls") or ()
    }
    for message in out:
        for call in message.get("tool_calls") or ():
            original = written.get(call.get("id"))
            if original is not None and json.loads(original) == json.loads(
                call["function"]["arguments"]
            ):
                call["function"]["arguments"] = original
    return out


def methods(
    budget: int, *, langchain: bool, summary: Mapping[str, int] | None = None
) -> dict[str, Method]:
    """Every method at ``budget``; LangChain's when ``langchain``; ``summary`` options
    for the default pipeline's summary stage."""
    found = {
        "ctxcli default": ctxcli_method(budget, "placeholder,summary,priority", summary=summary),
        "ctxcli --stages window": ctxcli_method(budget, "window"),
        "ctxcli --stages window --keep-last 1000000": ctxcli_method(budget, "window", 1_000_000),
    }
    if langchain:
        found["trim_messages"] = langchain_method(budget, clear_tool_uses=False)
        found["ClearToolUsesEdit + trim_messages"] = langchain_method(budget, clear_tool_uses=True)
    return found


def _key(message: Mapping[str, Any]) -> tuple[str, str]:
    content = message.get("content")
    return str(message.get("role")), content if isinstance(content, str) else json.dumps(content)


def problems(original: Messages, output: Messages) -> list[str]:
    """The rules ``output`` breaks that ``original`` kept (see the module docstring)."""
    found = set(openai_pairing(output)) - set(openai_pairing(original))
    systems = [_key(m) for m in original if m.get("role") in ("system", "developer")]
    if [_key(m) for m in output[: len(systems)]] != systems:
        found.add("the system messages are not kept as they were at the start")
    users = [_key(m) for m in original if m.get("role") == "user"]
    if users and users[-1] not in {_key(m) for m in output if m.get("role") == "user"}:
        found.add("the latest user message is not kept")
    return sorted(found)


def measure(runs: Sequence[Messages], budget: int, method: Method, reader: Compressor) -> Tally:
    """``method`` at ``budget`` over ``runs``: scored, counted and checked."""
    tally = Tally()
    for messages in runs:
        before = reader.read({"messages": messages})[1]
        started = time.perf_counter()
        out = method(messages)
        tally.seconds += time.perf_counter() - started
        after: Conversation = make_conversation(out, reader.counter)
        tally.scored.add(score(before, after, budget=budget))
        tally.whole_words += whole_words(before, after)
        tally.tokens_after.append(after.tokens)
        tally.over += after.tokens > budget
        broken = problems(messages, out)
        if broken:
            tally.invalid += 1
            tally.broken.extend(b for b in broken if b not in tally.broken)
    return tally


def whole_words(before: Conversation, after: Conversation) -> int:
    """How many facts of ``before`` ``after`` holds where no ASCII letter or digit
    touches them on either side: a check on the substring rule of :mod:`ctxcli.score`,
    under which ``480`` is also found inside ``1480``."""
    facts = frozenset[str]().union(*conversation_facts(before).values())
    text = conversation_text(after)
    return sum(
        1
        for fact in facts
        if fact in text
        and re.search(rf"(?<![A-Za-z0-9]){re.escape(fact)}(?![A-Za-z0-9])", text) is not None
    )


KINDS_SHOWN = ("ids", "dates", "amounts", "errors")


def table(results: dict[tuple[int, str], Tally], runs: int, *, markdown: bool) -> str:
    """The results, a row per budget and method."""
    head = ["budget", "method", "facts kept", "as whole words"]
    head += [KIND_LABELS[k] for k in KINDS_SHOWN]
    head += ["budget use (median)", "tokens after (median)", "over", "valid", "s"]
    rows = []
    for (budget, name), tally in results.items():
        scored = tally.scored
        whole = tally.whole_words / scored.total["all"] if scored.total["all"] else None
        cells = [f"{budget:,}", name, f"{scored.ratio():.2f}", _ratio(whole)]
        cells += [_ratio(scored.ratio(kind)) for kind in KINDS_SHOWN]
        cells.append(_ratio(scored.budget_use))
        cells.append(f"{statistics.median(tally.tokens_after):,.0f}")
        cells += [f"{tally.over}", f"{runs - tally.invalid}/{runs}", f"{tally.seconds:.1f}"]
        rows.append(cells)
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    return "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [head, *rows]
    )


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--source", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--budgets", default="1500,2000,3000", help="comma-separated tokens")
    parser.add_argument("--limit", type=int, default=0, help="only the first N runs")
    parser.add_argument("--no-langchain", action="store_true")
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument(
        "--summary-max-tokens", type=int, help="the summary stage's max_tokens (its own default)"
    )
    parser.add_argument("--keep-last", type=int, help="the summary stage's keep_last")
    parser.add_argument("--only-default", action="store_true", help="ctxcli default alone")
    options = parser.parse_args()
    summary = {
        key: value
        for key, value in (
            ("max_tokens", options.summary_max_tokens),
            ("keep_last", options.keep_last),
        )
        if value is not None
    }
    runs = [run["traj"] for run in json.loads(options.source.read_text())]
    runs = runs[: options.limit] if options.limit else runs
    missing = [
        name
        for name in ("langchain_core", "langchain_openai", "langchain")
        if importlib.util.find_spec(name) is None
    ]
    langchain = not options.no_langchain and not missing
    if missing and not options.no_langchain:
        print(f"{', '.join(missing)} not installed: LangChain's rows skipped", file=sys.stderr)
    reader = Compressor(resolve(stages="window"))
    results: dict[tuple[int, str], Tally] = {}
    for budget in (int(b) for b in options.budgets.split(",")):
        found = methods(budget, langchain=langchain, summary=summary)
        if options.only_default:
            found = {"ctxcli default": found["ctxcli default"]}
        for name, method in found.items():
            results[budget, name] = tally = measure(runs, budget, method, reader)
            for rule in tally.broken:
                print(f"{budget} {name}: {rule}", file=sys.stderr)
    print(describe(options.source, len(runs)))
    print(table(results, len(runs), markdown=options.markdown))


def describe(source: Path, runs: int) -> str:
    """Where and when: machine, Python, LangChain's version, the commit, the input."""
    try:
        from importlib.metadata import version

        langchain = f"langchain {version('langchain')}, langchain-core {version('langchain-core')}"
    except Exception:  # not installed: the rows are not there either
        langchain = "no LangChain"
    commit = subprocess.run(
        ["git", "-C", str(HERE), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    return (
        f"{runs} runs of {source.name}; {platform.machine()}, Python "
        f"{platform.python_version()}, {langchain}; commit {commit or '?'}; "
        f"{time.strftime('%Y-%m-%d %H:%M %Z')}"
    )


if __name__ == "__main__":
    main()
