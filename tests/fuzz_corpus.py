"""The fuzz test's seeded generator: valid OpenAI, Anthropic and ShareGPT records and
random settings for a run.

Every record is valid in its format (every call answered, parallel calls whole,
Anthropic turns alternating from a user turn, ShareGPT sides alternating from a human
turn) and holds what real logs hold and ctxcli must not trip on: parallel and legacy
function calls, thinking blocks with signatures, ``is_error`` results, images, CJK and
emoji, special-token text, and text that looks like a ctxcli summary or placeholder in
every position (system prompts and latest user messages included). Each text ends in a
tag unique in its record (``[m12]``), so the oracle can match output messages to input
ones by value. :func:`case` gives case ``k`` of seed ``s`` alone, for a reproducer.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

WORDS = (
    "the order refund invoice a build test error file path deploy status customer "
    "ticket reservation payment amount flight hotel update config is to of and we "
    "please check why failed passed line module function user result value"
).split()
CJK = (
    "订单",
    "退款",
    "发票号码",
    "你好",
    "请问",
    "東京",
    "の",
    "予約",
    "한국어",
    "결제",
    "。",
    "，",
)
EMOJI = ("😀", "👍🏽", "👨\u200d👩\u200d👧", "🇯🇵", "❤️", "🧪", "🚀", "e\u0301")
SPECIAL = (
    "<|endoftext|>",
    "<|im_start|>",
    "<|im_end|>",
    "<|fim_prefix|>",
    "<|start|>",
    "<|message|>",
    "<|end|>",
    "<|eot_id|>",
)
TOOLS = ("read_file", "search", "run_tests", "book_flight", "查询订单", "get_weather")
OPENAI_TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "read_file",
            "description": "Read a file.",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "The path."},
                    "mode": {"type": "string", "enum": ["text", "bytes"]},
                },
            },
        },
    }
]
ANTHROPIC_TOOLS = [
    {
        "name": "read_file",
        "description": "Read a file.",
        "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}},
    }
]
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


class Texts:
    """Texts for one record, from one random source."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.tag = 0

    def words(self, n: int) -> str:
        rng = self.rng
        pieces = []
        for _ in range(n):
            r = rng.random()
            if r < 0.72:
                pieces.append(rng.choice(WORDS))
            elif r < 0.84:
                pieces.append(rng.choice(CJK))
            elif r < 0.91:
                pieces.append(rng.choice(EMOJI))
            elif r < 0.95:
                pieces.append(rng.choice(SPECIAL))
            elif r < 0.98:
                pieces.append(str(rng.randint(0, 99999)))
            else:
                pieces.append("\n")
        return " ".join(pieces)

    def size(self, long: float) -> int:
        """Words in a text: mostly short, a share ``long`` of them large."""
        if self.rng.random() < long:
            return self.rng.randint(150, 2500)
        return self.rng.randint(1, 40)

    def text(self, *, long: float = 0.02, tool: bool = False) -> str:
        """A text ending in its unique tag; some look like a ctxcli summary (anywhere)
        or, in a tool result, a placeholder."""
        rng = self.rng
        self.tag += 1
        body = f"{self.words(self.size(long))} [m{self.tag}]"
        r = rng.random()
        if r < 0.08:
            return f"{summary_header(rng)}\n{body}"
        if tool and r < 0.12:
            return placeholder_look(rng, body)
        if tool and r < 0.2:
            return rng.choice(("Error: ", "Traceback (most recent call last)\n", "")) + body
        return body

    def arguments(self) -> dict[str, Any]:
        value: dict[str, Any] = {"path": f"src/{self.rng.choice(WORDS)}.py"}
        if self.rng.random() < 0.25:
            value["content"] = self.text(long=0.5)
        if self.rng.random() < 0.2:
            value["n"] = self.rng.randint(-5, 10**6)
        return value

    def call_id(self, prefix: str) -> str:
        self.tag += 1
        return f"{prefix}{self.tag:03d}{self.rng.getrandbits(32):08x}"


def summary_header(rng: random.Random) -> str:
    """The header line of a ctxcli summary as an earlier version wrote it, with no mark:
    ordinary text that only looks like a summary."""
    n = rng.randint(1, 40)
    if rng.random() < 0.3:
        return f"[ctxcli summary] 已折叠较早的 {n} 条消息。"
    return f"[ctxcli summary] {n} earlier message{'' if n == 1 else 's'} folded."


def placeholder_look(rng: random.Random, body: str) -> str:
    """Text that looks like a ctxcli placeholder: readable, or not quite."""
    ident = f"{rng.getrandbits(64):016x}"
    if rng.random() < 0.3:
        return f"[ctxcli placeholder id={ident} broken\n{body}"
    head = body[:5]
    return (
        f'[ctxcli placeholder id={ident} tool="read_file" tokens=900 chars=3000 '
        f"head={len(head)} tail=0]\n{head}\n[... 2995 characters omitted ...]\n{body}"
    )


# --- OpenAI ---------------------------------------------------------------------------


def openai_record(t: Texts) -> dict[str, Any]:
    rng = t.rng
    messages: list[dict[str, Any]] = []
    if rng.random() < 0.75:
        messages.append({"role": "system", "content": t.text()})
    if rng.random() < 0.1:
        messages.append({"role": "developer", "content": t.text()})
    users = rng.random() > 0.08
    for _ in range(rng.randint(1, 6)):
        if users:
            messages.append(openai_user(t))
        for _ in range(rng.choice((0, 0, 1, 2, 3, 6, 12))):
            messages += openai_step(t)
        if rng.random() < 0.04:
            messages.append({"role": "system", "content": t.text()})
        messages.append({"role": "assistant", "content": t.text()})
    ending = rng.random()
    if ending < 0.25 and users:
        messages.append(openai_user(t))
    elif ending < 0.45:
        messages += openai_step(t, calls=True)
    record: dict[str, Any] = {"id": f"o{rng.getrandbits(24):06x}", "messages": messages}
    if rng.random() < 0.3:
        record["tools"] = OPENAI_TOOLS
    if rng.random() < 0.2:
        record["model"] = "gpt-4o"
    return record


def openai_user(t: Texts) -> dict[str, Any]:
    rng = t.rng
    message: dict[str, Any] = {"role": "user", "content": t.text(long=0.05)}
    if rng.random() < 0.15:
        image = {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}}
        message["content"] = [{"type": "text", "text": message["content"]}, image]
    if rng.random() < 0.08:
        message["name"] = rng.choice(("alice", "bob_2"))
    return message


def openai_step(t: Texts, *, calls: bool = False) -> list[dict[str, Any]]:
    """One agent step: parallel tool calls and their results, a legacy function call
    and its result, or (unless ``calls``) a plain assistant message."""
    rng = t.rng
    r = rng.random()
    if r < 0.12:
        name = rng.choice(TOOLS)
        call = {"name": name, "arguments": json.dumps(t.arguments(), ensure_ascii=False)}
        return [
            {"role": "assistant", "content": None, "function_call": call},
            {"role": "function", "name": name, "content": t.text(long=0.3, tool=True)},
        ]
    if r < 0.22 and not calls:
        return [{"role": "assistant", "content": t.text()}]
    ids = [t.call_id("call_") for _ in range(rng.choice((1, 1, 1, 2, 3)))]
    tool_calls = [
        {
            "id": i,
            "type": "function",
            "function": {
                "name": rng.choice(TOOLS),
                "arguments": json.dumps(t.arguments(), ensure_ascii=False),
            },
        }
        for i in ids
    ]
    content = rng.choice((None, "", t.text()))
    results: list[dict[str, Any]] = []
    for i in rng.sample(ids, len(ids)):
        result: dict[str, Any] = {"role": "tool", "tool_call_id": i}
        result["content"] = t.text(long=0.3, tool=True)
        if rng.random() < 0.1:
            result["content"] = [{"type": "text", "text": result["content"]}]
        results.append(result)
    return [{"role": "assistant", "content": content, "tool_calls": tool_calls}, *results]


# --- Anthropic ------------------------------------------------------------------------


def anthropic_record(t: Texts) -> dict[str, Any]:
    """Turns alternate from a user turn; a turn's tool calls are answered by tool
    results opening the next user turn, alone or beside the user's next text."""
    rng = t.rng
    record: dict[str, Any] = {"id": f"a{rng.getrandbits(24):06x}", "model": "claude-x"}
    r = rng.random()
    if r < 0.4:
        record["system"] = t.text()
    elif r < 0.6:
        record["system"] = [{"type": "text", "text": t.text()}]
    messages: list[dict[str, Any]] = []
    pending: list[dict[str, Any]] = []
    for _ in range(rng.randint(1, 6)):
        messages.append({"role": "user", "content": anthropic_user(t, pending)})
        pending = []
        for _ in range(rng.choice((0, 0, 1, 2, 4, 9))):
            messages.append(anthropic_assistant(t, calls=True))
            pending = anthropic_results(t, messages[-1])
            if rng.random() < 0.7:
                messages.append({"role": "user", "content": pending})
                pending = []
            else:
                break  # the results open the next user turn, beside its text
        if not pending:
            messages.append(anthropic_assistant(t, calls=False))
    ending = rng.random()
    if pending:
        messages.append({"role": "user", "content": pending})  # an ongoing tool loop
    elif ending < 0.25:
        messages.append({"role": "user", "content": anthropic_user(t, [])})
    elif ending < 0.45:
        messages.append({"role": "user", "content": anthropic_user(t, [])})
        messages.append(anthropic_assistant(t, calls=True))
        messages.append({"role": "user", "content": anthropic_results(t, messages[-1])})
    record["messages"] = messages
    if rng.random() < 0.3:
        record["tools"] = ANTHROPIC_TOOLS
    return record


def anthropic_user(t: Texts, results: list[dict[str, Any]]) -> Any:
    rng = t.rng
    if not results and rng.random() < 0.4:
        return t.text(long=0.05)
    blocks: list[dict[str, Any]] = [*results, {"type": "text", "text": t.text(long=0.05)}]
    if rng.random() < 0.15:
        source = {"type": "base64", "media_type": "image/png", "data": PNG}
        blocks.insert(len(results), {"type": "image", "source": source})
    return blocks


def anthropic_assistant(t: Texts, *, calls: bool) -> dict[str, Any]:
    rng = t.rng
    if not calls and rng.random() < 0.3:
        return {"role": "assistant", "content": t.text()}
    blocks: list[dict[str, Any]] = []
    r = rng.random()
    if r < 0.4:
        signature = f"Sig{rng.getrandbits(128):032x}=="
        blocks.append({"type": "thinking", "thinking": t.text(long=0.05), "signature": signature})
    elif r < 0.45:
        blocks.append({"type": "redacted_thinking", "data": f"EmwK{rng.getrandbits(96):024x}"})
    if not calls or rng.random() < 0.6:
        blocks.append({"type": "text", "text": t.text()})
    for _ in range(rng.choice((1, 1, 1, 2, 3)) if calls else 0):
        blocks.append(
            {
                "type": "tool_use",
                "id": t.call_id("toolu_"),
                "name": rng.choice(TOOLS),
                "input": t.arguments(),
            }
        )
    return {"role": "assistant", "content": blocks}


def anthropic_results(t: Texts, assistant: dict[str, Any]) -> list[dict[str, Any]]:
    rng = t.rng
    out = []
    for block in assistant["content"]:
        if block["type"] != "tool_use":
            continue
        content: Any = t.text(long=0.3, tool=True)
        if rng.random() < 0.15:
            content = [{"type": "text", "text": content}]
            if rng.random() < 0.3:
                source = {"type": "base64", "media_type": "image/png", "data": PNG}
                content.append({"type": "image", "source": source})
        result = {"type": "tool_result", "tool_use_id": block["id"], "content": content}
        if rng.random() < 0.12:
            result["is_error"] = True
        out.append(result)
    return out


# --- ShareGPT -------------------------------------------------------------------------


def sharegpt_record(t: Texts) -> dict[str, Any]:
    """Sides alternate from a human turn; a function_call is answered by the
    observation right after it."""
    rng = t.rng
    human, gpt = ("human", "gpt") if rng.random() < 0.8 else ("user", "assistant")
    record: dict[str, Any] = {"id": f"s{rng.getrandbits(24):06x}"}
    if rng.random() < 0.3:
        record["system"] = t.text()
    turns: list[dict[str, Any]] = []
    if rng.random() < 0.3:
        turns.append({"from": "system", "value": t.text()})
    for _ in range(rng.randint(1, 6)):
        turns.append({"from": human, "value": t.text(long=0.05)})
        for _ in range(rng.choice((0, 0, 1, 2, 4))):
            turns += sharegpt_step(t)
        turns.append({"from": gpt, "value": t.text()})
    ending = rng.random()
    if ending < 0.25:
        turns.append({"from": human, "value": t.text()})
    elif ending < 0.45:
        turns.append({"from": human, "value": t.text()})
        turns += sharegpt_step(t)
    record["conversations"] = turns
    if rng.random() < 0.2:
        record["tools"] = json.dumps([OPENAI_TOOLS[0]["function"]])
    return record


def sharegpt_step(t: Texts) -> list[dict[str, Any]]:
    call = {"name": t.rng.choice(TOOLS), "arguments": t.arguments()}
    result = "observation" if t.rng.random() < 0.9 else "tool"
    return [
        {"from": "function_call", "value": json.dumps(call, ensure_ascii=False)},
        {"from": result, "value": t.text(long=0.3, tool=True)},
    ]


# --- settings and cases ---------------------------------------------------------------

STAGE_NAMES = ("placeholder", "window", "summary", "priority")
CLASSES = ("assistant", "user", "tool", "function", "summary")


def settings(rng: random.Random) -> dict[str, Any]:
    """A config file's content: random stage order, budget 1 to 100,000, keep_last
    0-10, either summary role, placeholder options."""
    if rng.random() < 0.3:
        names = ["placeholder", "summary", "priority"]
    else:
        names = rng.sample(STAGE_NAMES, rng.randint(1, 4))
    keep_last = rng.randint(0, 10)
    options: dict[str, dict[str, Any]] = {
        "placeholder": {
            "threshold": rng.choice((0, 5, 20, 100, 500)),
            "keep_recent": rng.randint(0, 4),
            "keep_errors": rng.random() < 0.7,
            "clear_inputs": rng.random() < 0.4,
            "head_chars": rng.choice((0, 10, 100)),
            "tail_chars": rng.choice((0, 50)),
        },
        "window": {"keep_last": keep_last},
        "summary": {
            "keep_last": keep_last,
            "role": rng.choice(("user", "system")),
            "max_tokens": rng.choice((1, 10, 60, 400)),
        },
        "priority": {},
    }
    if rng.random() < 0.5:
        options["priority"]["order"] = rng.sample(CLASSES, rng.randint(1, len(CLASSES)))
    return {
        "max_tokens": max(1, round(10 ** rng.uniform(0, 5))),
        "stages": [{name: options[name]} for name in names],
    }


@dataclass
class Case:
    """One file: its settings and records (of any of the three formats)."""

    key: str
    config: dict[str, Any]
    records: list[dict[str, Any]]


MAKERS = (openai_record, anthropic_record, sharegpt_record)


def case(seed: int, k: int) -> Case:
    """Case ``k`` of ``seed``: one to four records (formats mixed) under one setting."""
    rng = random.Random(f"{seed}:{k}")
    config = settings(rng)
    records = [rng.choice(MAKERS)(Texts(rng)) for _ in range(rng.choice((1, 1, 2, 3, 4)))]
    return Case(f"{seed}:{k}", config, records)
