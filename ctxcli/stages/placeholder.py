"""The ``placeholder`` stage: replace large tool results with restorable placeholders.

A tool result (a ``tool`` or legacy ``function`` message) whose content is over the
threshold (tokens) has its ``content`` replaced by a placeholder text; every other key
of the message (``role``, ``tool_call_id``, ``name``, unknown keys) stays as it was.
The original content goes into :attr:`ctxcli.pipeline.Context.stored` (``{id:
original}``), which the pipeline hands on as :attr:`ctxcli.pipeline.Result.stored` and
the file driver writes to the store (see :mod:`ctxcli.store`); ``ctxcli restore`` puts
it back.

The placeholder text (its format, its id, its preview) is written and read by
:mod:`ctxcli.placeholders`.

Results that report an error (:func:`reports_error`) stay whole when ``keep_errors``:
the model learns from its mistakes. With ``clear_inputs``, long tool-call arguments are
replaced too; as arguments are JSON text by the API's definition, the replacement is
the JSON object ``{"ctxcli_placeholder": "<placeholder text>"}``.

What counts as a placeholder (the rule :func:`ctxcli.store.restore_record` follows):
text that begins with :data:`PLACEHOLDER_START` and stands where this stage writes
placeholders: the whole content of a tool result, or the :data:`ARGUMENTS_KEY`
string of call arguments (:func:`placeholder_texts`). Anywhere else (a user or an
assistant quoting one, a summary) it is ordinary text. Such text already in the
input where placeholders go (an earlier run's output, compressed again) is never
replaced; it goes to the store as its own original (``{id of the text: the text}``),
which tells ``restore`` to leave it as it is, and an original whose id such a
placeholder names stays whole here, so one id never stands for two texts in one
conversation. So ``compress`` then ``restore`` with its store gives back the input
(but see :func:`ctxcli.store.restore_record` for an original met again in another
record of the file), and the input's own placeholders restore from the earlier run's
store (or both stores concatenated).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from ctxcli.model import Conversation, Message, tool_names, units

# The placeholder text, re-exported where it was before ctxcli.placeholders held it.
from ctxcli.placeholders import ARGUMENTS_KEY as ARGUMENTS_KEY
from ctxcli.placeholders import FACT_CHARS as FACT_CHARS
from ctxcli.placeholders import FACT_LINE_CHARS as FACT_LINE_CHARS
from ctxcli.placeholders import ID_HEX as ID_HEX
from ctxcli.placeholders import LOCAL_SHELL, placeholders_of, preview_source
from ctxcli.placeholders import PLACEHOLDER_RE as PLACEHOLDER_RE
from ctxcli.placeholders import PLACEHOLDER_START as PLACEHOLDER_START
from ctxcli.placeholders import TOOL_ROLES as TOOL_ROLES
from ctxcli.placeholders import arguments_text as arguments_text
from ctxcli.placeholders import canonical_json as canonical_json
from ctxcli.placeholders import content_id as content_id
from ctxcli.placeholders import cut_preview as cut_preview
from ctxcli.placeholders import looks_like as looks_like
from ctxcli.placeholders import omitted_facts as omitted_facts
from ctxcli.placeholders import parse as parse
from ctxcli.placeholders import parse_arguments as parse_arguments
from ctxcli.placeholders import placeholder_ids as placeholder_ids
from ctxcli.placeholders import placeholder_texts as placeholder_texts
from ctxcli.placeholders import preview_text as preview_text
from ctxcli.placeholders import render as render
from ctxcli.placeholders import verbatim_ids as verbatim_ids
from ctxcli.stages.base import Context

if TYPE_CHECKING:
    from ctxcli.tokens import TokenCounter

#: What :func:`reports_error` looks for, as three patterns (one alternation of them
#: is tried at every position in all three ways): a traceback, a leading error word, a
#: non-zero exit status. The last opens with its first letter, then the word boundary
#: before it, so a search skips to an "e" or "r".
_TRACEBACK = re.compile(r"Traceback \(most recent call last\)", re.IGNORECASE)
_LEADING_ERROR = re.compile(r"\s*(?:error|exception|fatal)\b", re.IGNORECASE)
_EXIT_STATUS = re.compile(
    r"[er](?<!\w[er])(?:(?<=e)xit(?:ed)?(?: with)?(?: code| status)|(?<=e)xit_code"
    r"|(?<=r)eturn ?code|(?<=r)eturncode)"
    r"[\"']?\s*[:=]?\s*(?:[1-9]\d*|-\d+)\b",
    re.IGNORECASE,
)


class Ran(Protocol):
    """What :func:`settle_store` reads and sets of a run's result
    (:class:`ctxcli.pipeline.Result`)."""

    before: Conversation
    after: Conversation
    events: dict[str, Counter[str]]
    stored: dict[str, Any]


R = TypeVar("R", bound=Ran)


def settle_store(result: R) -> R:
    """``result`` with ``stored`` made the store's content for its conversation: the
    originals the stages replaced that the output still refers to, and the
    placeholder-like texts the input held where placeholders go, each stored as its own
    original whatever the stages (``restore`` then tells such text from a placeholder
    whose store was lost: see :func:`ctxcli.store.restore_record`). When anything was
    replaced, ``events["placeholder"]["placeholders_kept"]`` counts the placeholders
    the output still holds (four cleared arguments of one message are four). The
    caller of :func:`ctxcli.pipeline.run` calls this before it writes the store."""
    messages = result.before.messages
    as_read = {content_id(t): t for m in messages for t in placeholder_texts(m)}
    stored = {**as_read, **result.stored}
    if stored:  # only what the output still refers to: a later stage may drop some
        current = result.after.messages
        held = [placeholders_of(m) for m in current if m.changed and m.index is not None]
        as_is = [verbatim_ids(m) for m in current if m.index is not None]
        kept = set().union(*held, *as_is)
        written = any(not looks_like(value) for value in stored.values())
        stored = {key: value for key, value in stored.items() if key in kept}
        if written:
            events = result.events.setdefault("placeholder", Counter())
            events["placeholders_kept"] = sum(map(len, held))  # not the messages
    result.stored = stored
    return result


def reports_error(message: Mapping[str, Any]) -> bool:
    """True when a tool result reports an error: an ``error`` / ``is_error`` key on
    the message, content that is a JSON object with a non-empty ``error`` field, or
    text with a Python traceback, a leading ``Error:``, or a non-zero exit status
    (``exit code 2``, ``returncode: 1``)."""
    if message.get("is_error") is True or message.get("error"):
        return True
    text = preview_text(message.get("content"))
    if _TRACEBACK.search(text) or _LEADING_ERROR.match(text) or _EXIT_STATUS.search(text):
        return True
    stripped = text.lstrip()
    if stripped.startswith("{") and '"error"' in stripped:
        try:
            value = json.loads(stripped)
        except ValueError:
            return False
        return isinstance(value, dict) and bool(value.get("error"))
    return False


@dataclass(frozen=True)
class Placeholder:
    """Replace tool results over ``threshold`` tokens of content with placeholders.

    ``keep_recent``: the last N tool results stay whole. ``exclude_tools``: tools whose
    results are never replaced. ``tool_thresholds``: ``{tool name: tokens}`` overriding
    ``threshold`` per tool. ``keep_errors``: results that report an error stay whole
    (:func:`reports_error`). ``clear_inputs``: also replace tool-call arguments over the
    threshold (not those of calls whose results ``keep_recent`` keeps, nor those of the
    last unit's calls: the conversation's current state). ``head_chars`` /
    ``tail_chars``: preview lengths in characters. ``facts``: the placeholder names
    what identifies the omitted part (:func:`omitted_facts`), so a result kept as a
    placeholder holds the ids a summary of it would. ``until_fit``: replace results
    (oldest first) only while the conversation is over the budget, so one within it
    is left as it is, and give the tokens the last one freed past the budget to the
    placeholders' previews (:func:`widen`); else it runs whatever the budget. The
    default pipeline sets both (:data:`ctxcli.config.DEFAULT_OPTIONS`). A result is
    replaced only when its placeholder is smaller. The originals go to
    ``context.stored``. Text that looks like a placeholder where placeholders go is
    kept as it is and stored as its own original (see the module docstring).
    """

    name: ClassVar[str] = "placeholder"
    #: It shortens tool results but drops no message.
    fits_budget: ClassVar[bool] = False
    threshold: int = 500
    keep_recent: int = 3
    exclude_tools: tuple[str, ...] = ()
    tool_thresholds: Mapping[str, int] = field(default_factory=dict)
    keep_errors: bool = True
    clear_inputs: bool = False
    head_chars: int = 100
    tail_chars: int = 50
    facts: bool = False
    until_fit: bool = False

    def __post_init__(self) -> None:
        exclude = self.exclude_tools
        exclude = (exclude,) if isinstance(exclude, str) else tuple(exclude or ())
        object.__setattr__(self, "exclude_tools", exclude)
        if not isinstance(self.tool_thresholds, Mapping):
            raise ValueError("tool_thresholds must map tool names to tokens")
        object.__setattr__(self, "tool_thresholds", dict(self.tool_thresholds))
        numbers = {
            "threshold": self.threshold,
            "keep_recent": self.keep_recent,
            "head_chars": self.head_chars,
            "tail_chars": self.tail_chars,
            **{f"tool_thresholds[{k!r}]": v for k, v in self.tool_thresholds.items()},
        }
        for key, value in numbers.items():
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{key} must be a whole number, 0 or more, not {value!r}")

    def limit(self, tool: str) -> int:
        """The threshold (tokens of content) for ``tool``'s results and arguments."""
        return self.tool_thresholds.get(tool, self.threshold)

    def apply(
        self, conversation: Conversation, context: Context
    ) -> tuple[Conversation, Mapping[str, int]]:
        excess = self._excess(conversation, context)
        if excess is not None and excess <= 0:
            return conversation, {}
        messages = list(conversation.messages)
        results = [i for i, m in enumerate(messages) if m.role in TOOL_ROLES]
        recent = set(results[len(results) - self.keep_recent :]) if self.keep_recent else set()
        events: dict[str, int] = {}
        # Placeholder-like text the input already holds where placeholders go (an
        # earlier run's output, compressed again) is kept as it is
        # (:func:`settle_store` records it in the store as its own original, so that
        # restoring with this run's store leaves it be); its original, if this run
        # meets it too, stays whole (see ``restore``).
        held: set[str] = set()
        for message in messages:
            held |= placeholder_ids(message)
        candidates = [i for i in results if i not in recent]
        excess = self._results(messages, candidates, (held, excess), context, events)
        if self.clear_inputs:
            self._clear_all(messages, recent, context, events, held)
        if not events.get("placeholders_written"):
            return conversation, {k: v for k, v in events.items() if k == "errors_kept"}
        if excess is not None and excess < 0:  # the last placeholder overshot
            _widened(messages, -excess, context, events)
        return conversation.with_messages(messages), events

    def _clear_all(
        self,
        messages: list[Message],
        recent: set[int],
        context: Context,
        events: dict[str, int],
        held: set[str],
    ) -> None:
        """``clear_inputs``: replace the long call arguments of every assistant message
        but the last unit's, and those of the calls whose results stay whole (at the
        positions ``recent``)."""
        recent_ids = {call_id for i in recent for call_id in messages[i].result_ids}
        # A legacy function result pairs with the function_call right before it.
        recent_calls = {i - 1 for i in recent if messages[i].role == "function"}
        # The last unit is the conversation's current state: in a tool loop the
        # model goes on from those calls, which Anthropic wants exactly as they were.
        current = units(messages)[-1][0] if messages else -1
        for i, message in enumerate(messages):
            if message.role == "assistant" and i != current:
                messages[i] = self._clear_calls(
                    message, recent_ids, context, events, held, keep_function=i in recent_calls
                )

    def _excess(self, conversation: Conversation, context: Context) -> int | None:
        """With ``until_fit`` and a budget, the tokens over it; else ``None``."""
        if not self.until_fit or context.max_tokens is None:
            return None
        return conversation.tokens - context.max_tokens

    def _results(
        self,
        messages: list[Message],
        candidates: list[int],
        held_excess: tuple[set[str], int | None],
        context: Context,
        events: dict[str, int],
    ) -> int | None:
        """Replace the tool results at ``candidates`` (oldest first) in ``messages``,
        while ``excess`` (tokens over the budget, ``None``: no bound) is above 0; what
        is left of it."""
        held, excess = held_excess
        counter = context.counter
        names = tool_names([m.data for m in messages])
        for i in candidates:
            message = messages[i]
            tool = names[i]
            content = message.data.get("content")
            if excess is not None and excess <= 0:
                break
            if tool in self.exclude_tools or content is None or looks_like(content):
                continue
            if content_id(content) in held:
                continue
            tokens = counter.content(content)
            if tokens <= self.limit(tool):
                continue
            if self.keep_errors and reports_error(message.data):
                events["errors_kept"] = events.get("errors_kept", 0) + 1
                continue
            text = self._text(content, tool, tokens)
            new = message.replace({**message.data, "content": text}, counter)
            if new.tokens >= message.tokens:
                continue
            context.stored[content_id(content)] = content
            messages[i] = new
            _count(events, message, new)
            if excess is not None:
                excess -= message.tokens - new.tokens
        return excess

    def _text(self, content: Any, tool: str, tokens: int) -> str:
        return render(
            content,
            tool=tool,
            tokens=tokens,
            head=self.head_chars,
            tail=self.tail_chars,
            facts=self.facts,
        )

    def _clear_calls(
        self,
        message: Message,
        keep_ids: set[str],
        context: Context,
        events: dict[str, int],
        held: set[str],
        *,
        keep_function: bool = False,
    ) -> Message:
        data = dict(message.data)
        touched = 0
        calls = data.get("tool_calls")
        if isinstance(calls, list):
            new_calls = []
            for call in calls:
                new_call = call
                if isinstance(call, Mapping) and str(call.get("id")) not in keep_ids:
                    function = call.get("function")
                    new_function = self._clear_function(function, context, held)
                    if new_function is not function:
                        new_call = {**call, "function": new_function}
                        touched += 1
                new_calls.append(new_call)
            data["tool_calls"] = new_calls
        function_call = data.get("function_call")
        if isinstance(function_call, Mapping) and not keep_function:
            new_function = self._clear_function(function_call, context, held)
            if new_function is not function_call:
                data["function_call"] = new_function
                touched += 1
        if not touched:
            return message
        new = message.replace(data, context.counter)
        _count(events, message, new, count=touched, key="inputs_cleared")
        return new

    def _clear_function(self, function: Any, context: Context, held: set[str]) -> Any:
        if not isinstance(function, Mapping):
            return function
        counter = context.counter
        tool = str(function.get("name") or "")
        arguments = function.get("arguments")
        if tool in self.exclude_tools or tool == LOCAL_SHELL or not isinstance(arguments, str):
            return function  # excluded, or no place for a placeholder (LOCAL_SHELL)
        if looks_like(arguments_text(arguments)) or looks_like(arguments):
            return function
        if content_id(arguments) in held:
            return function
        tokens = counter.text(arguments)
        if tokens <= self.limit(tool):
            return function
        text = self._text(arguments, tool, tokens)
        replaced = json.dumps({ARGUMENTS_KEY: text}, ensure_ascii=False)
        if counter.text(replaced) >= tokens:
            return function
        context.stored[content_id(arguments)] = arguments
        return {**function, "arguments": replaced}


def cleared_calls(
    message: Message, threshold: int, context: Context, held: set[str]
) -> tuple[Message, dict[str, Any]]:
    """``message`` (an assistant's) with each tool-call argument string of more than
    ``threshold`` tokens replaced by a placeholder that lists the facts it omits, as
    ``clear_inputs`` writes them, and the originals it replaced (``{id: arguments}``);
    ``message`` itself when none is smaller so. Arguments whose id is in ``held`` (the
    ids of the conversation's own placeholders: :func:`placeholder_ids`) stay whole,
    so one id never stands for two texts (see the module docstring), and so do those
    of the tools in ``context.whole_tools``; ``context`` gives the token counter."""
    scratch = Context(None, context.counter)
    events: dict[str, int] = {}
    whole = tuple(sorted(context.whole_tools))
    clearing = Placeholder(threshold=threshold, facts=True, exclude_tools=whole)
    new = clearing._clear_calls(message, set(), scratch, events, held)
    return new, scratch.stored


def _count(
    events: dict[str, int], old: Message, new: Message, *, count: int = 1, key: str = ""
) -> None:
    events["placeholders_written"] = events.get("placeholders_written", 0) + count
    events["tokens_saved"] = events.get("tokens_saved", 0) + old.tokens - new.tokens
    if key:
        events[key] = events.get(key, 0) + count


def widen(messages: list[Message], spare: int, context: Context) -> int:
    """Give ``spare`` tokens to the placeholders in ``messages`` (whose originals are
    in ``context.stored``), newest first: each is written again with a longer head,
    or whole when the spare tokens hold it all (:func:`_wider`). Returns how many
    were widened; ``messages`` is changed in place."""
    widened = 0
    for i in reversed(range(len(messages))):
        message = messages[i]
        match = parse(message.data.get("content")) if spare > 8 else None
        if match is None or message.role not in TOOL_ROLES:
            continue
        original = context.stored.get(match.group("id"))
        if original is None:
            continue
        new = _wider(message, original, match, spare, context.counter)
        if new is not None:
            spare -= new.tokens - message.tokens
            messages[i] = new
            widened += 1
    return widened


def _wider(
    message: Message, original: Any, match: re.Match[str], spare: int, counter: TokenCounter
) -> Message | None:
    """``message``'s placeholder with a head longer by as much as ``spare`` tokens
    allow (the longest that fits, found in a few halvings), or ``None``. The preview
    stays under the tokens of the original's content (the ``tokens`` its header says):
    when ``spare`` holds the original, it is put back whole instead, for a preview of
    all but a few characters would cost more than the result it stands for."""
    head, tail, tokens = (int(match.group(k)) for k in ("head", "tail", "tokens"))
    if isinstance(original, str):
        whole = message.replace({**message.data, "content": original}, counter)
        if whole.tokens <= message.tokens + spare:
            return whole
    length = len(preview_source(original))
    tool = json.loads(match.group("tool"))

    def wider(grow: int) -> Message | None:
        text = render(original, tool=tool, tokens=tokens, head=head + grow, tail=tail, facts=True)
        new = message.replace({**message.data, "content": text}, counter)
        fits = new.tokens <= message.tokens + spare and counter.text(text) < tokens
        return new if fits else None

    low, high = 1, min(int(spare * length / max(1, tokens) * 0.9), length - head - tail - 1)
    best = wider(high) if high >= low else None
    if best is None:  # the widest that fits below it, by bisection (a few renders)
        high -= 1
        for _ in range(6):
            if low > high:
                break
            middle = (low + high) // 2
            found = wider(middle)
            if found is None:
                high = middle - 1
            else:
                best, low = found, middle + 1
    return best if best is not None and best.tokens > message.tokens else None


def _widened(messages: list[Message], spare: int, context: Context, events: dict[str, int]) -> None:
    """:func:`widen` the placeholders in ``messages`` with ``spare`` tokens, counting
    them in ``events["previews_widened"]``."""
    widened = widen(messages, spare, context)
    if widened:
        events["previews_widened"] = widened
