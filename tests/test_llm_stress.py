"""The model endpoint under stress (issue 13): a server that drip-feeds its reply, a
reply of 5 MB or compressed, a reply that echoes the prompt or the transcript, a server
that takes one request at a time (queueing or answering 429 to the others). Each runs
a real HTTP server on 127.0.0.1 whose every reply ends within a few seconds."""

from __future__ import annotations

import gzip
import json
import select
import socket
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers import assert_valid, read_jsonl

from ctxcli import Compressor, resolve
from ctxcli.cache import MAX_TEXT_CHARS, SummaryCache
from ctxcli.cli import cli
from ctxcli.summarizers.endpoint import Limiter
from ctxcli.summarizers.llm import LLMSummarizer
from ctxcli.tokens import TokenCounter

COUNTER = TokenCounter("o200k_base")
SUMMARY = "The user asked where orders #W000 to #W700 are; each ships in May 2024."


def completion(content: str) -> bytes:
    return json.dumps(
        {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": "fake",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70},
        }
    ).encode()


Behaviour = Callable[["Handler", dict[str, Any]], None]


class Handler(BaseHTTPRequestHandler):
    server: Server

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        server = self.server
        with server.lock:
            server.requests.append(body)
            server.in_flight += 1
            server.most_in_flight = max(server.most_in_flight, server.in_flight)
        try:
            server.behaviour(self, body)
        except (BrokenPipeError, ConnectionResetError):
            pass
        finally:
            with server.lock:
                server.in_flight -= 1

    def send(self, data: bytes, status: int = 200, **headers: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(data)

    def client_gone(self, wait: float) -> bool:
        """True once the client closed the connection; waits up to ``wait`` s."""
        readable, _, _ = select.select([self.connection], [], [], wait)
        return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""

    def log_message(self, *args: Any) -> None:
        pass


class Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, behaviour: Behaviour) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.behaviour = behaviour
        self.lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self.in_flight = self.most_in_flight = 0
        self.url = f"http://127.0.0.1:{self.server_address[1]}/v1"
        threading.Thread(target=self.serve_forever, daemon=True).start()


@pytest.fixture
def serve() -> Iterator[Callable[[Behaviour], Server]]:
    made: list[Server] = []

    def make(behaviour: Behaviour) -> Server:
        made.append(Server(behaviour))
        return made[-1]

    yield make
    for server in made:
        server.shutdown()
        server.server_close()


def conversation(tag: str = "") -> dict[str, Any]:
    """A record over a 500-token budget: a system message and 8 turns."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "You are a shop assistant."}]
    for i in range(8):
        messages.append({"role": "user", "content": f"Question {i}{tag}: where is order #W{i}00?"})
        messages.append(
            {"role": "assistant", "content": f"Order #W{i}00 ships on 2024-05-1{i}. " * 6}
        )
    messages.append({"role": "user", "content": "Thanks, and the refund?"})
    return {"id": f"conv{tag}", "messages": messages}


def summarizer(url: str, **options: Any) -> LLMSummarizer:
    return LLMSummarizer(model="fake", base_url=url, api_key="sk-test", **options)


def compress_one(summ: LLMSummarizer, warnings: list[str]) -> Any:
    compressor = Compressor(
        resolve(max_tokens=500, stages="summary,priority"), warn=warnings.append, summarizer=summ
    )
    return compressor.conversation(conversation())


def run_cli(
    tmp_path: Path, url: str, *extra: str, n: int = 1, config: str = "", tag: str = ""
) -> Any:
    """``ctxcli compress`` of ``n`` conversations against ``url``; returns the result
    and the stats JSON (``{}`` when none was written)."""
    source = tmp_path / "in.jsonl"
    source.write_text("".join(json.dumps(conversation(f"{tag}{i}")) + "\n" for i in range(n)))
    out = tmp_path / "out.jsonl"
    args = ["compress", str(source), "-o", str(out), "--max-tokens", "500"]
    args += ["--summarizer", "llm", "--summary-model", "fake", "--base-url", url, *extra]
    if config:
        (tmp_path / "c.yaml").write_text(config)
        args += ["--config", str(tmp_path / "c.yaml")]
    result = CliRunner().invoke(cli, args, env={"OPENAI_API_KEY": "sk-test"})
    stats_path = tmp_path / "out.stats.json"
    stats = json.loads(stats_path.read_text()) if stats_path.exists() else {}
    if out.exists():
        for before, after in zip(read_jsonl(source), read_jsonl(out)):
            assert_valid(before, after, COUNTER, max_tokens=500)
    return result, stats


# --- a whole attempt is bounded in time ------------------------------------------------


class Drip:
    """Sends ``data`` one byte a second (after ``head`` at once), for at most
    ``seconds``; records for each request how long the client stayed."""

    def __init__(self, head: bytes, data: bytes, seconds: float = 8.0) -> None:
        self.head, self.data, self.seconds = head, data, seconds
        self.stayed: list[float] = []

    def __call__(self, handler: Handler, body: dict[str, Any]) -> None:
        started = time.monotonic()
        try:
            handler.wfile.write(self.head)
            for byte in self.data:
                if handler.client_gone(1.0) or time.monotonic() - started > self.seconds:
                    break
                handler.wfile.write(bytes([byte]))
        finally:
            self.stayed.append(time.monotonic() - started)


def _reply_bytes() -> tuple[bytes, bytes]:
    body = completion(SUMMARY)
    return b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n", (
        f"Content-Length: {len(body)}\r\n\r\n".encode() + body
    )


DRIPS = [
    pytest.param(b"", b"".join(_reply_bytes()), id="status-line"),
    pytest.param(b"".join(_reply_bytes())[:-40], b"".join(_reply_bytes())[-40:], id="body"),
]


@pytest.mark.parametrize(("head", "data"), DRIPS)
def test_a_drip_fed_reply_ends_each_attempt_at_the_timeout(
    serve: Any, head: bytes, data: bytes
) -> None:
    drip = Drip(head, data)
    server = serve(drip)
    warnings: list[str] = []
    started = time.monotonic()
    result = compress_one(summarizer(server.url, timeout=1, retries=1), warnings)
    assert time.monotonic() - started < 2 * 1.5 + 1  # two attempts and a backoff
    assert result.events["summary"]["fallbacks"] == 1
    assert "timed out (1 s per attempt after 1 retries)" in warnings[0]
    assert len(server.requests) == 2
    time.sleep(1.2)  # the server notices the last close within a second
    assert len(drip.stayed) == 2 and max(drip.stayed) < 1.5


def test_cli_llm_timeout_2_bounds_each_attempt_against_a_drip(serve: Any, tmp_path: Path) -> None:
    """The issue's case: one byte a second, ``--llm-timeout 2``, each attempt within 3 s."""
    drip = Drip(*_reply_bytes())
    server = serve(drip)
    started = time.monotonic()
    config = "summarizer:\n  retries: 1\n"
    result, stats = run_cli(tmp_path, server.url, "--llm-timeout", "2", config=config)
    elapsed = time.monotonic() - started
    assert result.exit_code == 4, result.output
    assert "timed out (2 s per attempt after 1 retries)" in result.output
    assert stats["llm"]["fallbacks"] == 1 and stats["llm"]["retries"] == 1
    assert elapsed < 2 * 3 + 1
    time.sleep(1.2)
    assert len(drip.stayed) == 2 and max(drip.stayed) < 3


# --- a reply is bounded in size, and only the summary is cached ------------------------


def _cache_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())


def test_a_5_mb_reply_falls_back_and_adds_under_10_kb_to_the_cache(
    serve: Any, tmp_path: Path
) -> None:
    huge = completion("The user asked about orders. " * 180_000)  # 5.2 MB
    assert len(huge) > 5_000_000
    replies = iter([completion(SUMMARY)])
    server = serve(lambda h, body: h.send(next(replies, huge)))
    cache = tmp_path / "cache.sqlite"
    first, _ = run_cli(tmp_path, server.url, "--cache", str(cache))
    assert first.exit_code == 0, first.output  # a cache with one summary in it
    before = _cache_bytes(cache)
    started = time.monotonic()
    result, stats = run_cli(tmp_path, server.url, "--cache", str(cache), tag="x")
    assert time.monotonic() - started < 5
    assert result.exit_code == 4, result.output
    assert "summary failed (the model reply is over 1024 KiB)" in result.output
    assert stats["llm"]["fallbacks"] == 1 and stats["llm"]["retries"] == 0  # not asked again
    assert _cache_bytes(cache) - before < 10_000
    assert len(server.requests) == 2


def test_only_the_summary_as_written_is_cached(serve: Any, tmp_path: Path) -> None:
    long = " ".join(f"Order #W{i} ships on 2024-05-{i % 28 + 1:02d}." for i in range(4000))
    server = serve(lambda h, body: h.send(completion(long)))  # 150 KB of summary
    cache = SummaryCache(tmp_path / "c.sqlite")
    summ = summarizer(server.url, cache=cache)
    text = summ.summarize(conversation()["messages"][1:], previous=None, max_tokens=70,
                          counter=COUNTER)  # fmt: skip
    (stored,) = [
        row[0] for row in sqlite3.connect(cache.path).execute("SELECT text FROM summaries")
    ]
    # The model's summary as written (cut to the bound) is stored; what is returned
    # adds the facts it left out, cutting it further to make room.
    model, _, facts = text.partition("\nFacts: ")
    assert COUNTER.text(stored) <= 70 and stored.startswith(model) and facts
    assert COUNTER.text(text) <= 70


def test_the_cache_holds_no_text_over_its_bound(tmp_path: Path) -> None:
    cache = SummaryCache(tmp_path / "c.sqlite")
    assert cache.put("big", "x" * (MAX_TEXT_CHARS + 1)) is False
    assert cache.get("big") is None
    with sqlite3.connect(cache.path) as db:  # as an older ctxcli left it: a raw reply
        db.execute("INSERT INTO summaries VALUES ('old', ?)", ("y" * 5_000_000,))
    assert cache.get("old") is None
    assert cache.put("ok", "A summary.") and cache.get("ok") == "A summary."


def test_a_compressed_reply_is_refused(serve: Any) -> None:
    packed = gzip.compress(completion(SUMMARY))
    server = serve(lambda h, body: h.send(packed, Content_Encoding="gzip"))
    warnings: list[str] = []
    result = compress_one(summarizer(server.url, retries=2), warnings)
    assert result.events["summary"]["fallbacks"] == 1
    assert "the model endpoint sent a compressed reply" in warnings[0]
    assert len(server.requests) == 1  # not asked again


# --- a reply that repeats its input is not a summary -----------------------------------


def _prompt_echo(h: Handler, body: dict[str, Any]) -> None:
    h.send(completion(body["messages"][0]["content"]))


def _transcript_echo(h: Handler, body: dict[str, Any]) -> None:
    user = body["messages"][1]["content"]
    h.send(completion(user.split("<transcript>\n", 1)[1].split("\n</transcript>", 1)[0]))


def _template_tail_echo(h: Handler, body: dict[str, Any]) -> None:
    tail = body["messages"][1]["content"].rsplit("</transcript>", 1)[1]
    h.send(completion(f"Summary: {tail.strip()}"))


@pytest.mark.parametrize(
    ("behaviour", "reason"),
    [
        pytest.param(_prompt_echo, "repeats the prompt", id="system-prompt"),
        pytest.param(_template_tail_echo, "repeats the prompt", id="template-tail"),
        pytest.param(_transcript_echo, "repeats the transcript", id="transcript"),
    ],
)
def test_a_reply_that_echoes_its_input_falls_back(
    serve: Any, tmp_path: Path, behaviour: Behaviour, reason: str
) -> None:
    server = serve(behaviour)
    cache = SummaryCache(tmp_path / "c.sqlite")
    warnings: list[str] = []
    summ = summarizer(server.url, cache=cache)
    result = compress_one(summ, warnings)
    assert result.events["summary"]["fallbacks"] == 1
    assert f"summary failed (the model reply {reason})" in warnings[0]
    assert summ.stats.snapshot()["failures"] == 1
    assert sqlite3.connect(cache.path).execute("SELECT COUNT(*) FROM summaries").fetchone() == (0,)


def test_a_summary_that_quotes_ids_and_errors_is_kept(serve: Any) -> None:
    text = (
        "The user asked where orders #W000, #W100 and #W200 are. The assistant said order "
        "#W000 ships on 2024-05-10 and order #W100 ships on 2024-05-11. The refund is open."
    )
    server = serve(lambda h, body: h.send(completion(text)))
    warnings: list[str] = []
    compress_one(summarizer(server.url), warnings)
    assert warnings == []


# --- concurrency adapts to the endpoint -------------------------------------------------


class OneAtATime:
    """Answers one request at a time, ``seconds`` each; the others wait at the server
    (as llama.cpp's server with one slot), and a request the client gave up on is
    still worked on. With ``refuse``, a request that finds the server busy gets HTTP
    429 at once instead."""

    def __init__(self, seconds: float, refuse: bool = False) -> None:
        self.seconds, self.refuse = seconds, refuse
        self.busy = threading.Lock()
        self.refused = 0

    def __call__(self, handler: Handler, body: dict[str, Any]) -> None:
        if not self.busy.acquire(blocking=not self.refuse):
            self.refused += 1
            handler.send(b'{"error": {"message": "busy"}}', 429, retry_after_ms="20")
            return
        try:
            time.sleep(self.seconds)
        finally:
            self.busy.release()
        handler.send(completion(SUMMARY))


def test_the_default_concurrency_works_against_a_one_at_a_time_server(
    serve: Any, tmp_path: Path
) -> None:
    """0.6 s a request, 1.5 s timeout: four at once time the last two out, and their
    abandoned work delays the next ones (today's main: 4 of 6 summaries fall back)."""
    server = serve(OneAtATime(0.6))
    result, stats = run_cli(tmp_path, server.url, "--llm-timeout", "1.5", "--no-cache", n=6)
    assert result.exit_code == 0, result.output
    llm = stats["llm"]
    assert llm["fallbacks"] == 0 and llm["calls"] == 6
    assert llm["concurrency_max"] >= 2 and llm["concurrency_min"] < 4
    assert 1 <= llm["concurrency_final"] <= 4


def test_429s_cut_the_concurrency_down_to_one(serve: Any, tmp_path: Path) -> None:
    server = serve(OneAtATime(0.1, refuse=True))
    result, stats = run_cli(tmp_path, server.url, "--no-cache", n=8)
    assert result.exit_code == 0, result.output
    llm = stats["llm"]
    assert llm["fallbacks"] == 0 and llm["calls"] == 8
    assert llm["retries"] == server.behaviour.refused >= 1
    assert llm["concurrency_min"] == 1


def test_the_concurrency_recovers_after_successes(serve: Any) -> None:
    refusals = iter([True, True])  # the first call: two 429s, then its last try

    def behaviour(h: Handler, body: dict[str, Any]) -> None:
        if next(refusals, False):
            h.send(b"{}", 429, retry_after_ms="10")
        else:
            h.send(completion(SUMMARY))

    server = serve(behaviour)
    summ = summarizer(server.url, concurrency=4)
    for _ in range(40):
        summ.summarize(conversation()["messages"][1:], previous=None, max_tokens=60,
                       counter=COUNTER)  # fmt: skip
    readings = summ.stats.snapshot()
    assert readings["concurrency_min"] == 1
    assert readings["concurrency_final"] == 4
    assert len(server.requests) == 42


def test_limiter_halves_once_per_round_and_grows_after_a_run() -> None:
    limiter = Limiter(8)
    outcomes = []
    slots = [limiter.slot() for _ in range(8)]
    for slot in slots:
        outcomes.append(slot.__enter__())
    for outcome, slot in zip(outcomes, slots):  # all 8 time out: one cut, not three
        outcome.append("overload")
        slot.__exit__(None, None, None)
    assert limiter.readings() == {
        "concurrency_max": 8,
        "concurrency_min": 4,
        "concurrency_final": 4,
    }
    for _ in range(3):
        with limiter.slot() as outcome:
            outcome.append("overload")
    assert limiter.readings()["concurrency_final"] == 1  # 4, 2, 1, and no lower
    for expected in (1, 1, 1, 2, 2, 2, 2, 3):  # runs of max(limit, 4) successes
        with limiter.slot() as outcome:
            outcome.append("ok")
        assert limiter.readings()["concurrency_final"] == expected
    for kind in ("slow", "failed"):
        with limiter.slot() as outcome:
            outcome.append(kind)
    assert limiter.readings() == {
        "concurrency_max": 1,
        "concurrency_min": 3,
        "concurrency_final": 3,
    }


def test_limiter_gates_threads_in_order_of_arrival() -> None:
    limiter = Limiter(1)
    order: list[int] = []
    first = limiter.slot()
    first.__enter__()
    threads = [threading.Thread(target=lambda i=i: _take(limiter, order, i)) for i in range(5)]
    for thread in threads:
        thread.start()
        time.sleep(0.02)  # each queues before the next starts
    first.__exit__(None, None, None)
    for thread in threads:
        thread.join(5)
    assert order == [0, 1, 2, 3, 4]


def _take(limiter: Limiter, order: list[int], i: int) -> None:
    with limiter.slot() as outcome:
        order.append(i)
        outcome.append("ok")
