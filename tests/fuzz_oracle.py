"""The fuzz test's oracle: checks one output record against its input record, written
apart from ctxcli (it imports nothing of the package).

It has its own rules, per format, for what a valid transcript is, its own idea of what
must be kept, and its own token counter (tiktoken directly, by the cookbook rule as the
README gives it). It reads what ctxcli wrote to disk: the output record, the stats
(``over_budget``) and the store of placeholder originals.

- **Matching.** Each output message is an input message (in input order, unchanged or
  with placeholders standing for a tool result's content or a call's arguments, whose
  originals the store holds under the placeholder's id), or a new ctxcli summary. A
  placeholder-like text the input already held is matched as it is.
- **Pairing.** OpenAI: every ``tool`` message follows the assistant that made its call,
  with only tool messages between, every call is answered; a ``function`` message
  follows an assistant ``function_call`` and every one is answered. Anthropic: the
  first message is a user message; the ``tool_result`` blocks of a user message answer
  exactly the ``tool_use`` ids of the assistant message just before, and open their
  message; two assistant messages never meet, nor a user message and one opening with
  tool results (the API merges two user turns into one); thinking blocks only open an
  assistant message, and in an ongoing tool loop (the input ends on tool results) the
  last assistant message is kept exactly, thinking blocks and signatures included.
  ShareGPT: the first turn after the system turns is a human turn, system turns stand
  only first, sides alternate (human and observation, gpt and function_call), a
  function_call is followed by an observation and an observation follows one. A human
  turn may open with ctxcli summaries, and close with one, joined by a blank line
  (each known by its seal, the README's SHA-256 rule); for matching, keeping and
  counting, the turn is those pieces, each a turn of its own.
- **Protected.** System and developer messages (and a record's top-level ``system``)
  are kept unchanged, as are the latest user message (its own text) and the last
  message (a tool result there may hold a placeholder).
- **Budget.** Tokens by the README's rule: 3 per message + role + content + name and 1,
  tool calls (name, arguments and 3 per call), 85 per image, ``tools`` definitions by
  the cookbook's ``num_tokens_for_tools``, 3 for reply priming. Anthropic and ShareGPT
  records are counted as the messages of the neutral model their format modules
  describe (a user message's tool results are tool messages); what the README leaves
  open follows those docstrings (thinking: its text; a redacted block: its data).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import tiktoken

SUMMARY_START = "[ctxcli summary]"
_SEAL_LINE = re.compile(r"(\[ctxcli summary\] [^\n]*) #(\d{9})")
_JOINER = "\n\n"
_PLACEHOLDER_ID = re.compile(r"\[ctxcli placeholder id=([0-9a-f]{12,64}) ")
_ARGS_KEY = "ctxcli_placeholder"
_IMAGE_TYPES = frozenset({"image_url", "image", "input_image"})


class Bad(Exception):
    """A broken rule: ``kind`` is the report's category, ``detail`` says which."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class Counter:
    """Tokens by the README's rule (see the module docstring), with tiktoken."""

    def __init__(self, encoding: str) -> None:
        self._encode = tiktoken.get_encoding(encoding).encode_ordinary
        self._memo: dict[str, int] = {}

    def text(self, text: str) -> int:
        found = self._memo.get(text)
        if found is None:
            found = self._memo[text] = len(self._encode(text))
        return found

    def content(self, content: Any) -> int:
        if content is None:
            return 0
        if isinstance(content, str):
            return self.text(content)
        if isinstance(content, list):
            return sum(self.part(p) for p in content)
        return self.text(_json(content))

    def part(self, part: Any) -> int:
        if isinstance(part, str):
            return self.text(part)
        kind = part.get("type")
        if kind in _IMAGE_TYPES:
            return 85
        if kind == "thinking":
            return self.text(part["thinking"])
        if kind == "redacted_thinking":
            return self.text(part["data"])
        if kind == "tool_use":
            return self.text(part["name"]) + self.text(_json(part.get("input")))
        if kind == "tool_result":
            return self.content(part.get("content"))
        if isinstance(part.get("text"), str):
            return self.text(part["text"])
        return self.text(_json(part))

    def message(
        self,
        role: str,
        content: Any,
        *,
        name: Any = None,
        calls: Sequence[tuple[str, str]] = (),
        function: tuple[str, str] | None = None,
    ) -> int:
        """3 + role + content (+ name + 1) + each call's name, arguments and 3 (+ a
        legacy function call's name and arguments)."""
        total = 3 + self.text(role) + self.content(content)
        if isinstance(name, str):
            total += self.text(name) + 1
        total += sum(self.text(n) + self.text(a) + 3 for n, a in calls)
        if function is not None:
            total += self.text(function[0]) + self.text(function[1])
        return total

    def tools(self, tools: Any) -> int:
        """The cookbook's ``num_tokens_for_tools`` for function tools; any other shape
        as the text of its JSON (a string as it is)."""
        if not tools:
            return 0
        if isinstance(tools, str):
            return self.text(tools)
        total = 0
        for tool in tools:
            function = tool.get("function")
            if not isinstance(function, Mapping):
                total += self.text(_json(tool))
                continue
            total += 7 + self.text(f"{function['name']}:{function['description'].rstrip('.')}")
            properties = function["parameters"]["properties"]
            if properties:
                total += 3
                for key, spec in properties.items():
                    total += 3 + self.text(
                        f"{key}:{spec.get('type', '')}:{spec.get('description', '').rstrip('.')}"
                    )
                    if "enum" in spec:
                        total += -3 + sum(3 + self.text(str(e)) for e in spec["enum"])
        return total + 12

    def record(self, record: Mapping[str, Any]) -> int:
        """Tokens of a whole record of any of the three formats."""
        if "conversations" in record:
            total = sum(self._sharegpt(t) for t in unjoined(record["conversations"]))
            if record.get("system"):
                total += self.message("system", record["system"])
        elif any(k in record for k in ("system",)) or _anthropic_blocks(record["messages"]):
            total = sum(self._anthropic(m) for m in record["messages"])
            if "system" in record:
                total += self.message("system", record["system"])
        else:
            total = sum(self._openai(m) for m in record["messages"])
        return total + 3 + self.tools(record.get("tools"))

    def _openai(self, m: Mapping[str, Any]) -> int:
        calls = [
            (c["function"]["name"], c["function"]["arguments"]) for c in m.get("tool_calls") or ()
        ]
        fc = m.get("function_call")
        function = (fc["name"], fc["arguments"]) if fc else None
        return self.message(
            m["role"], m.get("content"), name=m.get("name"), calls=calls, function=function
        )

    def _anthropic(self, m: Mapping[str, Any]) -> int:
        content = m["content"]
        if isinstance(content, str):
            return self.message(m["role"], content)
        if m["role"] == "assistant":
            calls = [(b["name"], _json(b["input"])) for b in content if b["type"] == "tool_use"]
            rest = [b for b in content if b["type"] != "tool_use"]
            return self.message("assistant", rest, calls=calls)
        total, run = 0, []
        for block in content:
            if block["type"] == "tool_result":
                if run:
                    total += self.message("user", run)
                run = []
                total += self.message("tool", block.get("content"))
            else:
                run.append(block)
        if run or not content:
            total += self.message("user", run)
        return total

    def _sharegpt(self, turn: Mapping[str, Any]) -> int:
        sender, value = turn["from"], turn["value"]
        if sender == "function_call":
            call = json.loads(value)
            arguments = call["arguments"]
            arguments = arguments if isinstance(arguments, str) else _json(arguments)
            return self.message("assistant", None, function=(call["name"], arguments))
        role = {"human": "user", "gpt": "assistant", "observation": "function", "tool": "function"}
        return self.message(role.get(sender, sender), value)


def _sealed(text: str) -> bool:
    """True for a summary as the README says ctxcli seals one: its first line ends in
    `` #`` and nine digits, the first 8 bytes (big-endian) of the SHA-256 of
    ``ctxcli summary\0`` + that line's header + line end + body, modulo 10**9."""
    head, line_end, body = text.partition("\n")
    seal = _SEAL_LINE.fullmatch(head)
    if seal is None or not line_end:
        return False
    data = f"ctxcli summary\0{seal[1]}\n{body}".encode("utf-8", "surrogatepass")
    return int.from_bytes(hashlib.sha256(data).digest()[:8], "big") % 10**9 == int(seal[2])


def pieces(value: str) -> list[tuple[str, bool]]:
    """A human turn's value cut at the blank lines that join ctxcli summaries to it:
    the summaries that open it and the one that closes it, and the text between, each
    with whether it is a summary."""
    parts = value.split(_JOINER)
    out: list[tuple[str, bool]] = []
    plain: list[str] = []
    i = 0
    while i < len(parts):
        end = next(
            (
                j
                for j in range(i + 1, len(parts) + 1)
                if parts[i].startswith(SUMMARY_START) and _sealed(_JOINER.join(parts[i:j]))
            ),
            None,
        )
        if end is None:
            plain.append(parts[i])
            i += 1
            continue
        if plain:
            out.append((_JOINER.join(plain), False))
            plain = []
        out.append((_JOINER.join(parts[i:end]), True))
        i = end
    if plain or not out:
        out.append((_JOINER.join(plain), False))
    texts = [k for k, (_, summary) in enumerate(out) if not summary]
    # A summary amid the text, or closing it but the last, is the user's own.
    if texts and max(texts[-1], len(out) - 2) > texts[0]:
        first, last = texts[0], max(texts[-1], len(out) - 2)
        out[first : last + 1] = [(_JOINER.join(piece for piece, _ in out[first : last + 1]), False)]
    return out


def unjoined(turns: Sequence[Any]) -> list[Any]:
    """``turns`` with each human turn that holds joined summaries as its pieces."""
    out: list[Any] = []
    for turn in turns:
        human = isinstance(turn, Mapping) and turn.get("from") in ("human", "user")
        if not human or not isinstance(turn.get("value"), str):
            out.append(turn)
            continue
        out += [{**turn, "value": piece} for piece, _ in pieces(turn["value"])]
    return out


def _anthropic_blocks(messages: Sequence[Mapping[str, Any]]) -> bool:
    kinds = {"tool_use", "tool_result", "thinking", "redacted_thinking", "document"}
    for m in messages:
        content = m.get("content")
        if isinstance(content, list) and any(
            isinstance(b, Mapping)
            and (b.get("type") in kinds or (b.get("type") == "image" and "source" in b))
            for b in content
        ):
            return True
    return False


def format_of(record: Mapping[str, Any]) -> str:
    if "conversations" in record:
        return "sharegpt"
    if "system" in record or _anthropic_blocks(record["messages"]):
        return "anthropic"
    return "openai"


# --- matching output messages to input ones -------------------------------------------


@dataclass
class Store:
    """The originals a run's store holds, by id."""

    originals: dict[str, Any] = field(default_factory=dict)
    #: Restored output: a ShareGPT function_call whose arguments were put back is
    #: written as new JSON text, equal as JSON to the original (``restore`` cannot know
    #: the original's spacing: the store holds the arguments only).
    restored: bool = False

    def stands_for(self, text: Any, original: Any) -> bool:
        """True when ``text`` is a placeholder whose original in the store is
        ``original``."""
        if not isinstance(text, str):
            return False
        match = _PLACEHOLDER_ID.match(text)
        if not match or match.group(1) not in self.originals:
            return False
        return self.originals[match.group(1)] == original

    def stands_for_arguments(self, value: Any, arguments: Any, *, as_json: bool) -> bool:
        """True when ``value`` (arguments: JSON text, or an object when not ``as_json``)
        is ``{"ctxcli_placeholder": <placeholder of the original arguments>}``."""
        try:
            inner = json.loads(value) if as_json else value
        except (TypeError, ValueError):
            return False
        if not (isinstance(inner, dict) and list(inner) == [_ARGS_KEY]):
            return False
        match = _PLACEHOLDER_ID.match(str(inner[_ARGS_KEY]))
        stored = self.originals.get(match.group(1)) if match else None
        if not isinstance(stored, str):
            return False
        if as_json:
            return stored == arguments
        try:
            return bool(json.loads(stored) == arguments)
        except ValueError:
            return False


def _same_except(a: Mapping[str, Any], b: Mapping[str, Any], key: str) -> bool:
    return set(a) == set(b) and all(a[k] == b[k] for k in a if k != key)


def openai_same(original: Mapping[str, Any], out: Any, store: Store) -> bool:
    """``out`` is ``original``, or it with placeholders where ctxcli writes them."""
    if out == original:
        return True
    if not isinstance(out, Mapping) or set(out) != set(original):
        return False
    for key in original:
        a, b = original[key], out[key]
        if a == b:
            continue
        if key == "content" and original.get("role") in ("tool", "function"):
            if not store.stands_for(b, a):
                return False
        elif key == "tool_calls":
            if not (isinstance(b, list) and len(a) == len(b)):
                return False
            for call, new in zip(a, b):
                if call == new:
                    continue
                if not (
                    _same_except(call, new, "function")
                    and _same_except(call["function"], new["function"], "arguments")
                ):
                    return False
                if not store.stands_for_arguments(
                    new["function"]["arguments"], call["function"]["arguments"], as_json=True
                ):
                    return False
        elif key == "function_call":
            if not (
                _same_except(a, b, "arguments")
                and store.stands_for_arguments(b["arguments"], a["arguments"], as_json=True)
            ):
                return False
        else:
            return False
    return True


def anthropic_block_same(original: Mapping[str, Any], out: Any, store: Store) -> bool:
    if out == original:
        return True
    if not isinstance(out, Mapping):
        return False
    if original.get("type") == "tool_result" and _same_except(original, out, "content"):
        return store.stands_for(out["content"], original["content"])
    if original.get("type") == "tool_use" and _same_except(original, out, "input"):
        return store.stands_for_arguments(out["input"], original["input"], as_json=False)
    return False


def anthropic_same(original: Mapping[str, Any], out: Any, store: Store) -> bool:
    """``out`` is the entry ``original``, whole (an assistant entry) or some of its
    blocks in order (a user entry), each as it was or with a placeholder."""
    if out == original:
        return True
    if not isinstance(out, Mapping) or not _same_except(original, out, "content"):
        return False
    blocks, kept = original["content"], out["content"]
    if not isinstance(blocks, list) or not isinstance(kept, list) or not kept:
        return False
    if original["role"] == "assistant" and len(kept) != len(blocks):
        return False
    j = 0
    for block in kept:
        while j < len(blocks) and not anthropic_block_same(blocks[j], block, store):
            j += 1
        if j == len(blocks):
            return False
        j += 1
    return True


def sharegpt_same(original: Mapping[str, Any], out: Any, store: Store) -> bool:
    if out == original:
        return True
    if not isinstance(out, Mapping) or not _same_except(original, out, "value"):
        return False
    if original["from"] in ("observation", "tool"):
        return store.stands_for(out["value"], original["value"])
    if original["from"] == "function_call":
        try:
            call, new = json.loads(original["value"]), json.loads(out["value"])
        except ValueError:
            return False
        if store.restored and call == new:
            return True
        return (
            isinstance(new, dict)
            and _same_except(call, new, "arguments")
            and store.stands_for_arguments(new["arguments"], call["arguments"], as_json=False)
        )
    return False


def is_summary(message: Mapping[str, Any], fmt: str) -> bool:
    """A message ctxcli wrote: a user (or system) message whose text opens with the
    summary header."""
    if fmt == "sharegpt":
        return message.get("from") in ("human", "user", "system") and str(
            message.get("value")
        ).startswith(SUMMARY_START)
    if message.get("role") not in ("user", "system") or set(message) != {"role", "content"}:
        return False
    content = message["content"]
    if fmt == "anthropic":
        return (
            isinstance(content, list)
            and len(content) == 1
            and content[0].get("type") == "text"
            and str(content[0].get("text")).startswith(SUMMARY_START)
        )
    return isinstance(content, str) and content.startswith(SUMMARY_START)


SAME = {"openai": openai_same, "anthropic": anthropic_same, "sharegpt": sharegpt_same}


def match(fmt: str, inputs: Sequence[Any], outputs: Sequence[Any], store: Store) -> list[int]:
    """The input position of each output message, in order: ``-1`` for a new summary,
    ``-2`` for a message that is neither an input message nor a summary."""
    same = SAME[fmt]
    found: list[int] = []
    j = 0
    for out in outputs:
        k = next((k for k in range(j, len(inputs)) if same(inputs[k], out, store)), None)
        if k is not None:
            found.append(k)
            j = k + 1
        else:
            found.append(-1 if is_summary(out, fmt) else -2)
    return found


# --- the rules -------------------------------------------------------------------------


def openai_pairing(messages: Sequence[Mapping[str, Any]]) -> Iterator[str]:
    open_ids: set[str] = set()
    function_open = False
    for i, m in enumerate(messages):
        role = m.get("role")
        if role == "tool":
            if m.get("tool_call_id") not in open_ids:
                yield f"message {i}: tool result {m.get('tool_call_id')!r} not right after its call"
            open_ids.discard(m.get("tool_call_id"))
            continue
        if open_ids:
            yield f"message {i}: calls {sorted(open_ids)} unanswered before it"
        if role == "function":
            if not function_open:
                yield f"message {i}: function result without a function_call before it"
            function_open = False
            continue
        if function_open:
            yield f"message {i}: function_call unanswered before it"
        open_ids = {c["id"] for c in m.get("tool_calls") or ()}
        function_open = role == "assistant" and isinstance(m.get("function_call"), Mapping)
    if open_ids or function_open:
        yield "the last calls are unanswered"


def anthropic_rules(messages: Sequence[Mapping[str, Any]]) -> Iterator[str]:
    if messages and messages[0]["role"] != "user":
        yield f"the first message is {messages[0]['role']}"
    uses: list[str] = []
    for i, m in enumerate(messages):
        blocks = m["content"] if isinstance(m["content"], list) else []
        kinds = [b.get("type") for b in blocks]
        results = [b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"]
        if sorted(results) != sorted(uses):
            yield f"message {i}: tool results {results} answer the calls {uses} before it"
        if results and any(k != "tool_result" for k in kinds[: len(results)]):
            yield f"message {i}: tool results do not open the message"
        if i and m["role"] == messages[i - 1]["role"] and (m["role"] == "assistant" or results):
            yield f"message {i}: two {m['role']} messages meet"
        thinking = [j for j, k in enumerate(kinds) if k in ("thinking", "redacted_thinking")]
        if thinking and (m["role"] != "assistant" or thinking != list(range(len(thinking)))):
            yield f"message {i}: thinking blocks not opening an assistant message"
        uses = (
            [b["id"] for b in blocks if b.get("type") == "tool_use"]
            if m["role"] == "assistant"
            else []
        )
    if uses:
        yield "the last calls are unanswered"


def sharegpt_rules(turns: Sequence[Mapping[str, Any]]) -> Iterator[str]:
    sides = {
        "human": "u",
        "user": "u",
        "observation": "u",
        "tool": "u",
        "gpt": "a",
        "assistant": "a",
        "function_call": "a",
    }
    senders = [t["from"] for t in turns]
    lead = next((i for i, s in enumerate(senders) if s != "system"), len(senders))
    if "system" in senders[lead:]:
        yield f"turn {senders.index('system', lead)}: a system turn after the dialogue began"
    if lead < len(senders) and senders[lead] not in ("human", "user"):
        yield f"turn {lead}: the first turn is {senders[lead]!r}"
    for i in range(lead + 1, len(senders)):
        if sides.get(senders[i]) == sides.get(senders[i - 1]):
            yield f"turn {i}: two {senders[i - 1]!r}/{senders[i]!r} turns on one side"
        if senders[i] in ("observation", "tool") and senders[i - 1] != "function_call":
            yield f"turn {i}: an observation without its function_call"
    for i, s in enumerate(senders):
        if s == "function_call" and (
            i + 1 == len(senders) or senders[i + 1] not in ("observation", "tool")
        ):
            yield f"turn {i}: a function_call without its observation"


RULES = {"openai": openai_pairing, "anthropic": anthropic_rules, "sharegpt": sharegpt_rules}


# --- what must be kept -----------------------------------------------------------------


def _user_text(message: Mapping[str, Any], fmt: str) -> Any:
    """The user's own part of a user message (Anthropic: its blocks that are not tool
    results), or ``None`` for another message."""
    if fmt == "sharegpt":
        return message["value"] if message["from"] in ("human", "user") else None
    if message.get("role") != "user":
        return None
    content = message["content"]
    if fmt == "anthropic" and isinstance(content, list):
        own = [b for b in content if b.get("type") != "tool_result"]
        return own or None
    return content


def protected(fmt: str, inputs: Sequence[Any]) -> dict[int, str]:
    """Input positions that must be in the output as they were -> why: every system
    message, the latest user message (its own text), and the last message (possibly
    with placeholders: marked ``last``)."""
    keep: dict[int, str] = {}
    for i, m in enumerate(inputs):
        role = m.get("from") if fmt == "sharegpt" else m.get("role")
        if role in ("system", "developer"):
            keep[i] = "system"
    users = [i for i, m in enumerate(inputs) if _user_text(m, fmt) is not None]
    if users:
        keep[users[-1]] = "latest user"
    if inputs:
        keep.setdefault(len(inputs) - 1, "last")
    return keep


def check_kept(fmt: str, inputs: Sequence[Any], outputs: Sequence[Any], found: list[int]) -> None:
    at = {k: n for n, k in enumerate(found) if k >= 0}
    for k, why in protected(fmt, inputs).items():
        if k not in at:
            raise Bad("lost", f"the {why} message (input {k}) was dropped")
        out = outputs[at[k]]
        if why == "system" and out != inputs[k]:
            raise Bad("lost", f"the system message (input {k}) was changed")
        if why == "latest user" and _user_text(out, fmt) != _user_text(inputs[k], fmt):
            raise Bad("lost", f"the latest user message (input {k}) was changed")
    if fmt == "anthropic" and inputs and inputs[-1]["role"] == "user":
        content = inputs[-1]["content"]
        loop = isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)
        assistants = [i for i, m in enumerate(inputs) if m["role"] == "assistant"]
        if (
            loop
            and assistants
            and (assistants[-1] not in at or outputs[at[assistants[-1]]] != inputs[assistants[-1]])
        ):
            raise Bad(
                "invalid",
                f"the last assistant turn (input {assistants[-1]}) of the tool loop was not kept exactly",
            )


def check_record(before: Mapping[str, Any], after: Mapping[str, Any], store: Store) -> str:
    """Every rule for one record; returns its format. Raises :class:`Bad`."""
    fmt = format_of(before)
    key = "conversations" if fmt == "sharegpt" else "messages"
    if {k: v for k, v in before.items() if k != key} != {
        k: v for k, v in after.items() if k != key
    }:
        raise Bad(
            "lost"
            if "system" in before and before.get("system") != after.get("system")
            else "invalid",
            "the record's other keys changed",
        )
    inputs, outputs = before[key], after[key]
    broken = list(RULES[fmt](outputs))
    if broken and not list(RULES[fmt](inputs)):
        raise Bad("invalid", "; ".join(broken))
    if fmt == "sharegpt":
        outputs = unjoined(outputs)
    found = match(fmt, inputs, outputs, store)
    check_kept(fmt, inputs, outputs, found)
    if -2 in found:
        n = found.index(-2)
        text = json.dumps(outputs[n], ensure_ascii=False)[:200]
        raise Bad(
            "invalid", f"output message {n} is neither an input message nor a summary: {text}"
        )
    return fmt
