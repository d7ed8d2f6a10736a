"""Summaries written by a model behind any OpenAI-compatible chat-completions endpoint.

Works with OpenAI and with local servers (vLLM, llama.cpp, Ollama) alike: it only
uses ``POST {base_url}/chat/completions`` with ``model``, ``messages``, ``max_tokens``
and ``temperature``. The ``openai`` package is imported when a summarizer is built,
never when this module is imported, so the offline path does not load it. Its HTTP
client runs on :mod:`ctxcli.summarizers.endpoint`, which bounds each attempt in time and
size, and the retries are made here, each through the adaptive :class:`Limiter`.

Each request sends the prompt template (:data:`DEFAULT_TEMPLATE`, or the user's) as
two messages: the text before a line ``$data`` is the system message; the user message
is the data, then the text after that line (a closing reminder: small models heed the
end of a long prompt best). The data is the earlier summary between
``<previous_summary>`` tags and the transcript between ``<transcript>`` tags, with any
such tag inside the data defused, so the model reads it as data.
"""

from __future__ import annotations

import contextlib
import email.utils
import random
import re
import string
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ctxcli import jsonio
from ctxcli.cache import SummaryCache, key
from ctxcli.errors import ConfigError, SummaryError
from ctxcli.summarizers.extractive import EXTRACTIVE, language, message_text, sentences
from ctxcli.summarizers.text import most_that_fit
from ctxcli.tokens import TokenCounter, call_function

if TYPE_CHECKING:
    from ctxcli.summarizers.endpoint import Limiter

OPENAI_BASE_URL = "https://api.openai.com/v1"
DEFAULT_MODEL = "gpt-4o-mini"
#: The packaged prompt template (``ctxcli/prompts/summary.md``).
DEFAULT_TEMPLATE = "summary.md"
#: Bound on one request's prompt (tokens of the run's counter): template, earlier
#: summary and transcript. Larger input is summarized in chunks. 2500 leaves room for
#: the reply in a 4096-token context, the smallest local servers commonly run, even when
#: the server's tokenizer needs a fifth more tokens than tiktoken for the same text.
DEFAULT_INPUT_MAX_TOKENS = 2500
DEFAULT_TIMEOUT = 60.0
#: Retries after a 408/409/429/5xx reply, a timeout or a refused connection, with
#: exponential backoff and jitter between them (``Retry-After`` honoured): see
#: :meth:`LLMSummarizer._request`.
DEFAULT_RETRIES = 2
DEFAULT_CONCURRENCY = 4
#: The least room a chunk of transcript is given in a request (tokens).
MIN_CHUNK_TOKENS = 200
#: Tokens of the message frames and tags around the data, on top of their text.
_FRAME_TOKENS = 24
_KEY_PLACEHOLDER = "sk-no-key"  # local servers want some bearer token, and ignore it

_REFUSAL = re.compile(
    r"^\W*(?:i'?m sorry|i am sorry|sorry, (?:but )?i|i (?:can(?:no|')t|am unable|'m unable|"
    r"won'?t be able)|as an ai\b|抱歉|对不起|我(?:不能|无法))",
    re.IGNORECASE,
)
_NOT_SUMMARY = re.compile(
    r"^\s*(?:error\b|exception\b|traceback\b|internal server error|bad gateway|"
    r"service unavailable|<!doctype|<html|\{\s*\"(?:error|detail)\")",
    re.IGNORECASE,
)
_TAG = re.compile(r"<(/?)\s*(transcript|previous_summary)\b", re.IGNORECASE)
_DATA_LINE = re.compile(r"^[ \t]*\$data[ \t]*$", re.MULTILINE)
_TAG_LINE = re.compile(r"</?\s*(?:transcript|previous_summary)\s*>", re.IGNORECASE)
#: A reply shorter than this (characters, after trimming) is not a summary.
MIN_SUMMARY_CHARS = 8


class LLMStats:
    """Counters of one summarizer's model use, safe to update from several threads.

    ``calls``: requests made (not counting retries); ``retries``: extra attempts made;
    ``cache_hits``: summaries read from the cache; ``failures``: calls that gave no
    usable summary; ``extracted``: summaries written as the extraction, the model's
    text left out, since it left out facts the room could not hold beside it (see
    :func:`with_facts`); ``prompt_tokens`` / ``completion_tokens``: the endpoint's ``usage``
    (its own tokenizer); ``wait_seconds``: time spent on the endpoint's account
    (attempts and the backoff between them, not the wait for a slot), summed over
    threads. These count up: the difference of two snapshots is the use between them.

    :data:`GAUGES` are levels instead, read from the summarizer's
    :class:`ctxcli.summarizers.endpoint.Limiter` (see there): a snapshot starts a new
    window for ``concurrency_max`` and ``concurrency_min``, so the one taken at the end
    of a file describes that file when one was taken at its start.
    """

    FIELDS = (
        "calls",
        "retries",
        "cache_hits",
        "failures",
        "extracted",
        "prompt_tokens",
        "completion_tokens",
        "wait_seconds",
    )
    GAUGES: tuple[str, ...] = ("concurrency_max", "concurrency_min", "concurrency_final")

    def __init__(self, limiter: Limiter | None = None) -> None:
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()
        self._limiter = limiter

    def add(self, **counts: float) -> None:
        with self._lock:
            self._counts.update(counts)

    def snapshot(self) -> dict[str, float]:
        """The counters now, every field present, and the gauges with a limiter."""
        with self._lock:
            counts = {name: self._counts[name] for name in self.FIELDS}
        return {**counts, **(self._limiter.readings() if self._limiter else {})}


def load_template(path: str | Path | None = None) -> str:
    """The prompt template: the file at ``path``, or the packaged one.

    A template is the system message, then optionally a line ``$data`` and what follows
    the data in the user message (see the module docstring). ``$language`` (the language
    to write in) and ``$max_words`` (a word bound derived from the token bound) are
    substituted; any other ``$`` text is left as it is. Raises :class:`ConfigError`
    naming the file when it cannot be read or is empty.
    """
    try:
        if path is None:
            text = (
                resources.files("ctxcli")
                .joinpath("prompts")
                .joinpath(DEFAULT_TEMPLATE)
                .read_text(encoding="utf-8")
            )
        else:
            text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the summary template: {exc}") from None
    if not text.strip():
        raise ConfigError(f"{path}: the summary template is empty")
    return text


def transcript(messages: Sequence[Mapping[str, Any]]) -> list[str]:
    """One line of text per message, ``role: text``, tool calls as
    ``assistant called name(arguments)`` and results as ``tool result: text``. JSON
    in tool results and arguments is written compactly (the same data, fewer tokens)."""
    lines = []
    for message in messages:
        role = str(message.get("role", "?"))
        text = message_text(message).strip()
        if role in ("tool", "function"):
            text = _compact(text)
            name = message.get("name")
            lines.append(f"tool result{f' ({name})' if name else ''}: {text}")
            continue
        if text:
            lines.append(f"{role}: {text}")
        calls = list(message.get("tool_calls") or [])
        if isinstance(message.get("function_call"), Mapping):
            calls.append({"function": message["function_call"]})
        for call in calls:
            function = call_function(call)
            if function is not None:
                arguments = function.get("arguments") or ""
                arguments = (
                    _compact(arguments)
                    if isinstance(arguments, str)
                    else jsonio.dumps(arguments).decode()  # past 64 bits too
                )
                lines.append(f"{role} called {function.get('name', '?')}({arguments})")
    return lines


def fit(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """``text`` within ``max_tokens`` tokens: whole if it fits, else its leading
    sentences (split by :func:`ctxcli.summarizers.extractive.sentences`, joined by a
    space); a first sentence that alone is too long is cut and ends in "…"."""
    if counter.text(text) <= max_tokens:
        return text
    kept: list[str] = []
    for sentence in sentences(text):
        if counter.text(" ".join([*kept, sentence])) > max_tokens:
            break
        kept.append(sentence)
    if kept:
        return " ".join(kept)
    first = (sentences(text) or [text])[0]
    low = most_that_fit(  # the longest cut that fits, on characters
        len(first), lambda k: counter.text(first[:k].rstrip() + "…") <= max_tokens
    )
    return first[:low].rstrip() + "…" if low else ""


#: How many times :func:`with_facts` shortens the model's text before it gives the
#: extraction alone.
FACT_TRIES = 4
#: The least room (tokens) the model's text keeps beside the facts it left out.
MIN_MODEL_TOKENS = 16


def with_facts(text: str, extracted: str, max_tokens: int, counter: TokenCounter) -> str:
    """The model's ``text`` and, after it, the facts of the extractive body
    ``extracted`` it leaves out, within ``max_tokens`` tokens: the model's text is cut
    on sentences (:func:`fit`) to make room, and when even that cannot hold them all,
    ``extracted`` alone. So a model summary never keeps fewer facts than the extractive
    one (facts as :mod:`ctxcli.score` defines them, and the extraction's error lines).

    The facts go on a line of their own under the extraction's label (``Facts:``,
    ``关键信息：``), so a later merge reads them as facts.
    """
    if not text.strip():
        return extracted
    wanted = _facts_of(extracted)
    missing = _missing(wanted, text)
    if not missing:
        return text
    (items, prose), label = _items_of(extracted), _facts_label(extracted)
    for _ in range(FACT_TRIES):
        said = [next((item for item in items if fact in item), None) or _word(fact, prose)
                for fact in missing]  # fmt: skip
        line = f"{label} {'; '.join(dict.fromkeys(said))}"
        shown = _beside(text, line, max_tokens, counter)
        if shown is None:
            break
        joined = f"{shown}\n{line}" if shown else line
        if not _missing(wanted, joined) and counter.text(joined) <= max_tokens:
            return joined
        # The cut lost some: say those too (or, with none lost, cut a little more).
        missing = _missing(wanted, shown) or missing
    return extracted


def _missing(wanted: Sequence[str], text: str) -> list[str]:
    return [fact for fact in wanted if fact not in text]


def _facts_label(extracted: str) -> str:
    """The label of the extraction's facts line (``Facts:``, ``关键信息：``)."""
    lines = (line.split(" ", 1)[0] for line in extracted.splitlines())
    return next((line for line in lines if _FACTS_LINE.match(line)), "Facts:")


def _beside(text: str, line: str, max_tokens: int, counter: TokenCounter) -> str | None:
    """``text`` cut (:func:`fit`) to leave ``line`` room within ``max_tokens``, or
    ``None`` when that leaves it less than :data:`MIN_MODEL_TOKENS`."""
    room = max_tokens - counter.text("\n" + line)
    return fit(text, room, counter) if room >= MIN_MODEL_TOKENS else None


def _items_of(body: str) -> tuple[list[str], list[str]]:
    """The items of an extractive body a missing fact is said with, its facts
    (labelled records) first, then its actions and error lines; and its requests and
    notes, of which a fact is said by its word alone (:func:`_word`): the extraction
    gives no bare fact a line of its own says
    (:func:`ctxcli.summarizers.extractive._costed`)."""
    from ctxcli.summarizers.extractive import parse_summary

    sections = parse_summary(body)
    items = [item for key in ("facts", "actions", "errors") for item in sections[key]]
    return items, sections["requests"] + sections["instructions"] + sections["notes"]


def _word(fact: str, prose: Sequence[str]) -> str:
    """The word of the first of ``prose`` that holds ``fact``, without the punctuation
    that ends it (``#W700`` of "where is order #W700?"); ``fact`` when none holds it
    or the word is longer by more than :data:`WORD_EXTRA_CHARS`."""
    for text in prose:
        at = text.find(fact)
        if at >= 0:
            start = text.rfind(" ", 0, at) + 1
            end = text.find(" ", at)
            word = text[start : None if end < 0 else end].rstrip(".,;:?!)]）。，？！")
            return word if len(word) <= len(fact) + WORD_EXTRA_CHARS else fact
    return fact


#: The most characters :func:`_word` adds to a fact (a sign, a unit); past that (a
#: Chinese sentence, which has no spaces) the fact is said alone.
WORD_EXTRA_CHARS = 8


_FACTS_LINE = re.compile(r"^(?:Facts:|关键信息：)")


def _facts_of(body: str) -> list[str]:
    """The facts of an extractive body, in the order it says them: ids, numbers,
    dates, amounts and paths (:func:`ctxcli.score.facts_of`), and its error lines."""
    from ctxcli.score import facts_of
    from ctxcli.summarizers.extractive import parse_summary

    found = facts_of(body, "assistant")
    kinds = [found[kind] for kind in ("ids", "dates", "amounts", "paths")]
    every = set().union(*kinds)
    ordered = sorted(every, key=lambda fact: (body.find(fact), fact))
    # a fact inside a longer one is said by it
    out = [f for f in ordered if not any(f != g and f in g for g in every)]
    return out + parse_summary(body)["errors"]


class LLMSummarizer:
    """A :class:`ctxcli.summarizers.Summarizer` that asks a chat model.

    ``base_url`` is the endpoint (``…/v1``), ``model`` the summary model (separate from
    the tokenizer model), ``api_key`` its key (``None`` for a local server that needs
    none), ``timeout`` seconds per attempt, the whole of it (see
    :mod:`ctxcli.summarizers.endpoint`), ``retries`` the retries on 429/5xx/timeouts,
    ``template`` the prompt template text (:func:`load_template`),
    ``input_max_tokens`` the bound on one request's prompt in tokens of the run's
    counter, ``cache`` a :class:`SummaryCache` or ``None``, ``concurrency`` how many
    conversations the caller may summarize at once, and the most requests in flight:
    :attr:`limiter` lowers that while the endpoint is overloaded.

    A reply is a failure (:class:`SummaryError`, so the caller falls back) when it is
    over :data:`ctxcli.summarizers.endpoint.MAX_REPLY_BYTES`, not a summary (see
    ``_checked``) or an echo of its input (:func:`_echoed`); only the summary as
    returned is cached.

    Thread-safe: the openai client, the cache and :attr:`stats` may be shared by
    threads. The key is only handed to the client: it is in no message, error or
    ``repr``. Raises :class:`ConfigError` for bad settings.
    """

    def __init__(
        self,
        *,
        model: str = DEFAULT_MODEL,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = DEFAULT_RETRIES,
        template: str | None = None,
        input_max_tokens: int = DEFAULT_INPUT_MAX_TOKENS,
        cache: SummaryCache | None = None,
        concurrency: int = DEFAULT_CONCURRENCY,
    ) -> None:
        import openai

        if not model:
            raise ConfigError("the llm summarizer needs a model name (--summary-model)")
        if timeout <= 0 or retries < 0 or concurrency < 1 or input_max_tokens < 1:
            raise ConfigError(
                "llm timeout must be above 0, retries 0 or more, concurrency and "
                "input_max_tokens 1 or more"
            )
        self.model = model
        self.base_url = (base_url or OPENAI_BASE_URL).rstrip("/")
        if api_key is None and self.base_url == OPENAI_BASE_URL:
            raise ConfigError(
                "the llm summarizer has no API key for OpenAI: set the variable named by "
                "--api-key-env (default OPENAI_API_KEY), or give --base-url of a local server"
            )
        self.timeout = float(timeout)
        self.retries = retries
        self.template = template if template is not None else load_template()
        self.input_max_tokens = input_max_tokens
        self.cache = cache
        self.concurrency = concurrency
        from ctxcli.summarizers import endpoint

        self.limiter = endpoint.Limiter(concurrency)
        self.stats = LLMStats(self.limiter)
        self._secret = api_key or ""
        self._openai = openai
        self._endpoint = endpoint
        self._client = openai.OpenAI(
            api_key=api_key or _KEY_PLACEHOLDER,
            base_url=self.base_url,
            timeout=self.timeout,
            max_retries=0,  # retried here, each attempt through the limiter
            http_client=endpoint.http_client(self.base_url, timeout=self.timeout),
        )

    #: It calls a model: its client and cache are not to be forked into workers.
    offline = False

    def __repr__(self) -> str:
        return f"LLMSummarizer(model={self.model!r}, base_url={_shown(self.base_url)!r})"

    def summarize(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        previous: str | None,
        max_tokens: int,
        counter: TokenCounter,
    ) -> str:
        """Summary body of ``messages`` with ``previous`` folded in, within
        ``max_tokens`` tokens of ``counter``.

        Input larger than ``input_max_tokens`` is split into chunks of whole messages
        (a message too long alone is cut), and the chunks are folded in turn: each
        request gets the summary so far plus the next chunk, so no request (and no
        merge) exceeds the bound however long the history is. With no messages (an
        earlier summary written again, smaller), the extractive summarizer merges
        ``previous`` alone: no model is asked.

        Raises :class:`SummaryError` when a request fails after its retries, or the
        reply is too large, empty, a refusal, not a summary or an echo of its input.
        """
        lines = transcript(messages)
        if not lines:  # nothing new: the previous summary written again, smaller, as the
            # extractive summarizer merges one (no model to ask, and within the bound)
            return EXTRACTIVE.summarize(
                messages, previous=previous, max_tokens=max_tokens, counter=counter
            )
        lang = "Chinese (中文)" if language(lines) == "zh" else "the language the user writes in"
        prompt = string.Template(self.template).safe_substitute(
            language=lang, max_words=max(10, max_tokens * 3 // 5)
        )
        if _DATA_LINE.search(prompt):
            system, after = (part.strip() for part in _DATA_LINE.split(prompt, maxsplit=1))
        else:
            system, after = prompt.strip(), ""
        room = self.input_max_tokens - counter.text(system) - counter.text(after) - _FRAME_TOKENS
        summary = fit(previous, max(room // 2, max_tokens), counter) if previous else None
        chunk_room = max(MIN_CHUNK_TOKENS, room - max_tokens)
        for chunk in _chunks(lines, chunk_room, counter):
            summary = self._ask(system, after, chunk, summary, max_tokens, counter)
        extracted = EXTRACTIVE.summarize(
            messages, previous=previous, max_tokens=max_tokens, counter=counter
        )
        body = with_facts(summary or "", extracted, max_tokens, counter)
        if body == extracted and summary and summary.strip() != extracted.strip():
            self.stats.add(extracted=1)
        return body

    def _ask(
        self,
        system: str,
        after: str,
        chunk: str,
        previous: str | None,
        max_tokens: int,
        counter: TokenCounter,
    ) -> str:
        data = f"<transcript>\n{_defuse(chunk)}\n</transcript>"
        if previous:
            data = f"<previous_summary>\n{_defuse(previous)}\n</previous_summary>\n\n{data}"
        if after:
            data = f"{data}\n\n{after}"
        request: list[Any] = [
            {"role": "system", "content": system},
            {"role": "user", "content": data},
        ]
        cache_key = key(self.base_url, self.model, self.template, max_tokens, request)
        cached = self.cache.get(cache_key) if self.cache else None
        if cached is not None:
            self.stats.add(cache_hits=1)
            return fit(cached, max_tokens, counter)
        text = fit(self._request(request, max_tokens), max_tokens, counter)
        repeated = _echoed(text, prompt=f"{system}\n{after}", data=chunk)
        if repeated:
            self.stats.add(failures=1)
            raise SummaryError(f"the model reply repeats the {repeated}")
        if self.cache:
            self.cache.put(cache_key, text)  # the summary as written, never the raw reply
        return text

    def _request(self, request: list[Any], max_tokens: int) -> str:
        """The model's checked reply to ``request``, after up to :attr:`retries` retries
        of the failures :meth:`_retried` names, with exponential backoff and jitter
        (``Retry-After`` honoured up to a minute); raises :class:`SummaryError`."""
        self.stats.add(calls=1)
        for attempt in range(self.retries + 1):
            response, problem = self._attempt(request, max_tokens)
            if problem is None:
                break
            if attempt == self.retries or not self._retried(problem):
                self.stats.add(failures=1)
                raise SummaryError(self._describe(problem, attempt)) from None
            self.stats.add(retries=1)
            pause = _backoff(attempt, problem)
            time.sleep(pause)
            self.stats.add(wait_seconds=pause)
        usage = getattr(response, "usage", None)
        self.stats.add(
            prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
            completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
        )
        try:
            text = _checked(response)
        except SummaryError:
            self.stats.add(failures=1)
            raise
        # A hostile or broken endpoint could echo the request's key back: it never
        # reaches an output, the cache or a warning.
        return text.replace(self._secret, "***") if self._secret else text

    def _attempt(self, request: list[Any], max_tokens: int) -> tuple[Any, Exception | None]:
        """One attempt, in a slot of :attr:`limiter`: the parsed completion, or the
        exception that ended the attempt (any failure means fallback, never a crash)."""
        with self.limiter.slot() as outcome:
            started = time.perf_counter()
            try:
                response = self._client.chat.completions.create(
                    model=self.model, messages=request, max_tokens=max_tokens, temperature=0
                )
            except Exception as exc:
                outcome.append("overload" if self._overload(exc) else "failed")
                return None, exc
            finally:
                took = time.perf_counter() - started
                self.stats.add(wait_seconds=took)
            # A reply that took over half the timeout waited in a queue at the server:
            # no sign that it takes more requests at once.
            outcome.append("ok" if took < self.timeout / 2 else "slow")
            return response, None

    def _overload(self, exc: BaseException) -> bool:
        """True for the signs of an endpoint with more requests than it can take: a
        timeout, HTTP 429 or 503."""
        return isinstance(exc, self._openai.APITimeoutError) or (
            getattr(exc, "status_code", None) in (429, 503)
        )

    def _retried(self, exc: BaseException) -> bool:
        """True for the failures worth another attempt: timeouts, connection errors,
        HTTP 408, 409, 429 and 5xx; not a reply the endpoint would send again (too
        large, compressed)."""
        openai = self._openai
        if _rejection(exc) is not None:
            return False
        if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError)):
            return True
        status = getattr(exc, "status_code", None)
        return isinstance(status, int) and (status in (408, 409, 429) or status >= 500)

    def _describe(self, exc: BaseException, retries: int) -> str:
        """A short reason for ``exc``, the last of ``retries`` + 1 attempts, that never
        carries the key or a reply body."""
        openai = self._openai
        after = f" after {retries} retries" if retries else ""
        rejection = _rejection(exc)
        if rejection is not None:
            reason = rejection
        elif isinstance(exc, openai.APITimeoutError):
            reason = f"the model endpoint timed out ({self.timeout:g} s per attempt{after})"
        elif isinstance(exc, openai.APIConnectionError):
            reason = f"cannot reach the model endpoint {_shown(self.base_url)}{after}"
        elif isinstance(exc, openai.APIStatusError):
            reason = f"the model endpoint answered HTTP {exc.status_code}{after}"
        elif isinstance(exc, (openai.APIResponseValidationError, ValueError)):
            reason = "the model endpoint sent a malformed reply"
        else:
            reason = f"the model call failed ({type(exc).__name__})"
        return reason.replace(self._secret, "***") if self._secret else reason


def _rejection(exc: BaseException) -> str | None:
    """The reason of the :class:`ctxcli.summarizers.endpoint.ReplyRejected` that caused
    ``exc`` (the openai client wraps it in a connection error), or ``None``."""
    from ctxcli.summarizers.endpoint import ReplyRejected

    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ReplyRejected):
            return seen.reason
        seen = seen.__cause__ or seen.__context__
    return None


#: Backoff between attempts (seconds): 0.5, 1, 2, … up to 8, less up to a quarter at
#: random; a ``Retry-After`` (or ``retry-after-ms``) up to :data:`MAX_RETRY_AFTER` wins.
#: The same schedule as the openai client's own.
INITIAL_BACKOFF, MAX_BACKOFF, MAX_RETRY_AFTER = 0.5, 8.0, 60.0


def _backoff(retry: int, exc: BaseException) -> float:
    """Seconds to wait before retry number ``retry`` + 1 after ``exc``."""
    response = getattr(exc, "response", None)
    asked = _retry_after(response.headers) if response is not None else None
    if asked is not None and 0 <= asked <= MAX_RETRY_AFTER:
        return asked
    return min(INITIAL_BACKOFF * 2.0**retry, MAX_BACKOFF) * (1 - 0.25 * random.random())


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds a ``retry-after-ms`` or ``Retry-After`` header (seconds or an HTTP date)
    asks for, or ``None``."""
    with contextlib.suppress(TypeError, ValueError):
        return float(headers.get("retry-after-ms", "")) / 1000
    value = headers.get("retry-after", "")
    with contextlib.suppress(TypeError, ValueError):
        return float(value)
    with contextlib.suppress(TypeError, ValueError, IndexError):
        return email.utils.parsedate_to_datetime(value).timestamp() - time.time()
    return None


def _checked(response: Any) -> str:
    """The summary text of a chat completion; raises :class:`SummaryError` when the
    reply is empty, filtered, a refusal or obviously not a summary."""
    choices = getattr(response, "choices", None)
    if not choices:
        raise SummaryError("the model reply has no choices")
    choice = choices[0]
    message = getattr(choice, "message", None)
    if getattr(message, "refusal", None) or getattr(choice, "finish_reason", None) == (
        "content_filter"
    ):
        raise SummaryError("the model refused to summarize")
    content = getattr(message, "content", None)
    text = content.strip() if isinstance(content, str) else ""
    # Small models sometimes echo the delimiters of the data.
    text = _TAG_LINE.sub("", text).strip()
    if not text:
        raise SummaryError("the model reply was empty")
    if _REFUSAL.match(text):
        raise SummaryError("the model refused to summarize")
    if _NOT_SUMMARY.match(text) or len(text) < MIN_SUMMARY_CHARS:
        raise SummaryError("the model reply is not a summary")
    if getattr(choice, "finish_reason", None) == "length":
        # Cut off mid-sentence at the completion limit: drop the unfinished sentence.
        parts = sentences(text)
        if len(parts) > 1 and not parts[-1].endswith((".", "!", "?", "。", "！", "？")):
            text = " ".join(parts[:-1])
    return text


#: Echo detection (:func:`_echoed`) compares pieces of this many characters, after
#: folding case and runs of whitespace: long enough that a summary's own wording rarely
#: matches by chance, short enough to catch an echo with a changed word here and there.
ECHO_PIECE_CHARS = 24
#: A reply is an echo when at least this share of its pieces occurs in the prompt (the
#: template's text) …
ECHO_OF_PROMPT = 0.5
#: … or in the transcript it was given (a summary quotes ids and errors, not most of
#: its input).
ECHO_OF_DATA = 0.8


def _echoed(reply: str, *, prompt: str, data: str) -> str | None:
    """``"prompt"`` or ``"transcript"`` when ``reply`` largely repeats that text (see
    :data:`ECHO_OF_PROMPT`, :data:`ECHO_OF_DATA`), else ``None``. The earlier summary is
    not compared: a model may rightly keep it as it was."""
    if _repeated(reply, prompt) >= ECHO_OF_PROMPT:
        return "prompt"
    if _repeated(reply, data) >= ECHO_OF_DATA:
        return "transcript"
    return None


def _repeated(reply: str, source: str) -> float:
    """The share (0 to 1) of ``reply``'s overlapping pieces of :data:`ECHO_PIECE_CHARS`
    characters that occur in ``source``; 0 for a reply too short to judge (under two
    pieces' length)."""
    size = ECHO_PIECE_CHARS
    reply, source = _folded(reply), _folded(source)
    count = len(reply) - size + 1
    if count < size:
        return 0.0
    pieces = {source[i : i + size] for i in range(len(source) - size + 1)}
    return sum(reply[i : i + size] in pieces for i in range(count)) / count


def _folded(text: str) -> str:
    return " ".join(text.casefold().split())


def _chunks(lines: Sequence[str], room: int, counter: TokenCounter) -> list[str]:
    """``lines`` grouped into texts of at most ``room`` tokens each; a line longer
    than ``room`` alone is cut into pieces."""
    chunks: list[str] = []
    current: list[str] = []
    used = 0
    for line in lines:
        for piece in _pieces(line, room, counter):
            cost = counter.text(piece) + 1
            if current and used + cost > room:
                chunks.append("\n".join(current))
                current, used = [], 0
            current.append(piece)
            used += cost
    if current:
        chunks.append("\n".join(current))
    return chunks


def _pieces(text: str, room: int, counter: TokenCounter) -> list[str]:
    if counter.text(text) <= room:
        return [text]
    pieces = []
    while text:
        size = min(len(text), max(1, room * 2))  # most tokens hold 2+ characters
        while size > 1 and counter.text(text[:size]) > room:
            size = size * 3 // 4
        pieces.append(text[:size])
        text = text[size:]
    return pieces


def _compact(text: str) -> str:
    """JSON ``text`` re-serialised without spaces; other text as it is."""
    if text[:1] not in ("{", "["):
        return text
    return jsonio.compact(text)


def _defuse(text: str) -> str:
    """``text`` with any ``<transcript>``/``<previous_summary>`` tag made harmless, so
    data cannot close its delimiter and pose as instructions."""
    return _TAG.sub(lambda m: f"<{m.group(1)} {m.group(2)}", text)


def _shown(url: str) -> str:
    """``url`` without any ``user:password@`` part."""
    return re.sub(r"(?<=://)[^/@]*@", "", url)
