"""Token counting: tiktoken plus the chat format's per-message overhead.

Every count here is in **tokens** of one tiktoken encoding. The rules follow the
OpenAI cookbook notebook ``How_to_count_tokens_with_tiktoken.ipynb``
(``num_tokens_from_messages`` and ``num_tokens_for_tools``), extended to the parts of
the chat format the notebook leaves out (tool calls, content parts, images); each
constant below says where it comes from.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import marshal
import os
import sys
import tempfile
import threading
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from ctxcli import jsonio
from ctxcli.errors import TokenizerError
from ctxcli.memo import TextMemo

if TYPE_CHECKING:
    import tiktoken

#: Cookbook ``tokens_per_message`` for every chat model since gpt-3.5-turbo-0613:
#: ``<|start|>{role}<|message|>{content}<|end|>`` frames each message with 3 tokens.
TOKENS_PER_MESSAGE = 3
#: Cookbook ``tokens_per_name``: a ``name`` field costs its text plus 1 token.
TOKENS_PER_NAME = 1
#: Cookbook: "every reply is primed with <|start|>assistant<|message|>" (3 tokens),
#: added once per conversation.
REPLY_PRIMING = 3
#: Per tool call, on top of its function name and arguments. OpenAI does not publish
#: how a call is rendered in the prompt; we charge the same 3-token frame the cookbook
#: charges a message, since each call is a separate item. The cookbook itself counts
#: tool calls not at all, so reference counts made by its rule are lower by 3 per call.
TOOL_CALL_OVERHEAD = 3
#: A fixed cost per image part, never the length of its base64 data. OpenAI's vision
#: pricing charges a ``detail: "low"`` image 85 tokens, and 85 is the base of every
#: ``high`` image too (85 + 170 per 512 px tile); without decoding the image we charge
#: the base. LangChain's ``count_tokens_approximately`` uses the same 85.
IMAGE_TOKENS = 85
#: A fixed cost per Anthropic ``document`` block whose source is not plain text (a
#: base64 PDF, a URL, a file id), never the length of its data. Anthropic's PDF
#: support page puts one page at 1,500 to 3,000 tokens; without decoding the file we
#: charge one page at the low end. A ``text`` source counts its text instead.
DOCUMENT_TOKENS = 1500
#: Cookbook ``num_tokens_for_tools`` constants for gpt-4o / gpt-4o-mini.
FUNC_INIT, PROP_INIT, PROP_KEY, ENUM_INIT, ENUM_ITEM, FUNC_END = 7, 3, 3, -3, 3, 12

DEFAULT_MODEL = "gpt-4o"
#: The largest token budget: JSON numbers past 2**53 are not exact.
MAX_BUDGET = 2**53

#: Parts counted at :data:`IMAGE_TOKENS`: images, a Responses computer-use screenshot.
_IMAGE_PART_TYPES = frozenset({"image_url", "image", "input_image", "computer_screenshot"})
#: The keys of a Gemini part (which has no ``type``) that holds a file's data.
_GEMINI_MEDIA = ("inlineData", "fileData", "inline_data", "file_data")


def encoding_name_for(model: str | None = None, encoding: str | None = None) -> str:
    """Return the tiktoken encoding name for ``encoding`` or else ``model``.

    Unknown model names fall back to ``o200k_base``, as the current cookbook does
    (:func:`knows_model` tells them apart, so a caller can say so).
    """
    if encoding:
        return encoding
    import tiktoken

    try:
        return tiktoken.encoding_name_for_model(model or DEFAULT_MODEL)
    except KeyError:
        return "o200k_base"


def knows_model(model: str) -> bool:
    """True when tiktoken knows ``model``'s encoding (by name or name prefix)."""
    import tiktoken

    try:
        tiktoken.encoding_name_for_model(model)
    except KeyError:
        return False
    return True


#: What a parsed-encoding file in ``cache_dir`` starts with; the SHA-256 of the rest
#: follows, so a torn or damaged file is rebuilt, never trusted.
_ENCODING_MAGIC = b"ctxcli-encoding-1\n"


def load_encoding(name: str, cache_dir: str | Path | None = None) -> tiktoken.Encoding:
    """tiktoken's encoding ``name``, as ``tiktoken.get_encoding`` builds it.

    tiktoken builds an encoding from its constructor's output: the name, the split
    pattern, the special tokens and the mergeable ranks, which it parses from the
    base64 BPE file on every start (about 0.2 s of a short run for ``o200k_base``).
    With ``cache_dir``, that output is kept there with :mod:`marshal` (one file per
    tiktoken version, encoding and Python, about 3.4 MB for ``o200k_base``, checked by
    SHA-256) and read back in about 0.06 s; the :class:`tiktoken.Encoding` built from
    it is the same. The folder is an optimisation: when it cannot be read or written,
    the encoding is built as tiktoken does. Like ``tiktoken.get_encoding``, it builds
    one encoding per name and process. Only ``cache_dir`` is read and written; the
    environment is never consulted here (``TIKTOKEN_CACHE_DIR`` still governs where
    tiktoken keeps its BPE files).

    Raises ``ValueError`` for an unknown name, and whatever tiktoken raises when its
    BPE file can be neither read nor downloaded.
    """
    import tiktoken
    import tiktoken.registry

    if cache_dir is None:
        return tiktoken.get_encoding(name)  # tiktoken keeps one per process itself
    with _LOCK:
        if name in _LOADED:
            return _LOADED[name]
        # marshal's format belongs to one Python: the file is named for it too.
        tag = sys.implementation.cache_tag or "python"
        path = Path(cache_dir) / f"tiktoken-{tiktoken.__version__}-{name}-{tag}.marshal"
        kwargs = _read_encoding(path, name)
        if kwargs is None:
            if name not in tiktoken.registry.list_encoding_names():  # finds the constructors
                return tiktoken.get_encoding(name)  # its error names the known encodings
            kwargs = tiktoken.registry.ENCODING_CONSTRUCTORS[name]()  # type: ignore[index]
            _write_encoding(path, kwargs)
        encoding = _LOADED[name] = tiktoken.Encoding(**kwargs)
        return encoding


#: Encodings :func:`load_encoding` built, by name: one per process, as tiktoken keeps.
_LOADED: dict[str, tiktoken.Encoding] = {}
_LOCK = threading.Lock()


def _read_encoding(path: Path, name: str) -> dict[str, Any] | None:
    try:
        data = path.read_bytes()
    except OSError:
        return None
    start = len(_ENCODING_MAGIC) + 32
    digest, body = data[len(_ENCODING_MAGIC) : start], data[start:]
    if not data.startswith(_ENCODING_MAGIC) or hashlib.sha256(body).digest() != digest:
        return None
    try:
        kwargs = marshal.loads(body)
    except (EOFError, ValueError, TypeError):
        return None
    if not isinstance(kwargs, dict) or kwargs.get("name") != name:
        return None
    if not isinstance(kwargs.get("mergeable_ranks"), dict):
        return None
    return kwargs


def _write_encoding(path: Path, kwargs: Mapping[str, Any]) -> None:
    """Write atomically (a temporary file renamed), or not at all."""
    try:
        body = marshal.dumps(dict(kwargs))
    except ValueError:
        return  # a plugin's encoding with values marshal cannot hold
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        f = tempfile.NamedTemporaryFile(dir=path.parent, prefix=".tmp-", delete=False)  # noqa: SIM115
    except OSError:
        return
    try:
        with f:
            f.write(_ENCODING_MAGIC + hashlib.sha256(body).digest() + body)
        os.replace(f.name, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(f.name)


def unknown_encoding(encoding: str) -> str | None:
    """The error for an encoding name tiktoken does not know (``unknown encoding
    'nope' (known: cl100k_base, …)``), naming the ones it does; ``None`` for a known
    one."""
    import tiktoken.registry

    known = sorted(tiktoken.registry.list_encoding_names())
    if encoding in known:
        return None
    return f"unknown encoding {encoding!r} (known: {', '.join(known)})"


def call_function(call: Any) -> Mapping[str, Any] | None:
    """The function a tool call calls (``{"name", "arguments"}``): its ``function``,
    or for a call of a custom tool (``{"type": "custom", "custom": {"name", "input"}}``,
    OpenAI's ChatCompletionMessageCustomToolCall: free text, no JSON) a view of it with
    its ``input`` as the arguments; ``None`` for neither. A stage that rewrites
    arguments writes only a ``function``'s: a custom call's input stays as it is."""
    if not isinstance(call, Mapping):
        return None
    function = call.get("function")
    if isinstance(function, Mapping):
        return function
    custom = call.get("custom") if call.get("type") == "custom" else None
    if isinstance(custom, Mapping):
        return {"name": custom.get("name"), "arguments": custom.get("input")}
    return None


class TokenCounter:
    """Counts tokens of texts and chat messages with one tiktoken encoding.

    Texts are encoded with ``encode_ordinary``, so special-token literals such as
    ``<|endoftext|>`` count as the plain text they are and never raise. Counts of
    texts are memoised (:class:`ctxcli.memo.TextMemo`, bounded memory): a system
    prompt repeated in every record is encoded once per run.

    ``cache_dir``: where :func:`load_encoding` may keep the parsed encoding, so that
    later runs start faster (``None``: parse tiktoken's BPE file every time).

    Raises :class:`TokenizerError` for an unknown encoding name, or when its BPE file
    is neither cached nor downloadable (offline: point ``TIKTOKEN_CACHE_DIR`` at a
    folder holding it).
    """

    def __init__(
        self,
        encoding: str = "o200k_base",
        *,
        image_tokens: int = IMAGE_TOKENS,
        tool_call_overhead: int = TOOL_CALL_OVERHEAD,
        cache_dir: str | Path | None = None,
    ) -> None:
        self.encoding_name = encoding
        self.image_tokens = image_tokens
        self.tool_call_overhead = tool_call_overhead
        try:
            self._encode = load_encoding(encoding, cache_dir).encode_ordinary
        except ValueError:
            raise TokenizerError(unknown_encoding(encoding) or encoding) from None
        except Exception as exc:  # network or file errors from tiktoken's download
            cache = os.environ.get("TIKTOKEN_CACHE_DIR", "not set")
            raise TokenizerError(
                f"cannot load the {encoding} tokenizer ({type(exc).__name__}); offline, set "
                f"TIKTOKEN_CACHE_DIR to a folder with its BPE file (now: {cache})"
            ) from None
        self.text: TextMemo[int] = TextMemo(self._count_text, share_as=f"tokens {encoding}")
        self._roles: dict[str, int] = {}

    def _count_text(self, text: str) -> int:
        try:
            return len(self._encode(text))
        except UnicodeEncodeError:
            # A lone surrogate (from a JSON "\ud83d" escape) cannot be encoded as UTF-8.
            return len(self._encode(text.encode("utf-8", "replace").decode("utf-8")))

    def content(self, content: Any) -> int:
        """Tokens of a message ``content``: a string, ``None``, or a list of parts.

        Text parts count their text, image parts a fixed :data:`IMAGE_TOKENS`, and any
        other part the text of its JSON. Anthropic blocks count as follows: ``document``
        a fixed :data:`DOCUMENT_TOKENS` (its text, for a ``text`` source), ``thinking``
        its thinking text, ``redacted_thinking`` its opaque ``data`` as text,
        ``tool_use`` its name and the JSON of its input, ``tool_result`` its content
        (a string or nested blocks, counted by this same rule). OpenAI ``reasoning``
        parts count their summary text and :func:`opaque_tokens` of their encrypted
        content, ``compaction`` parts the latter alone; a ``computer_call_output`` item
        its ``computer_screenshot`` as an image. Gemini ``inlineData`` and
        ``fileData`` parts count as an image or a document (:meth:`_media`). Nothing
        here raises on an unknown part: it counts as its JSON.
        """
        if content is None:
            return 0
        if isinstance(content, str):
            return self.text(content)
        if isinstance(content, list):
            return sum(self._part(part) for part in content)
        return self.text(_json_text(content))

    def _part(self, part: Any) -> int:
        if isinstance(part, str):
            return self.text(part)
        if not isinstance(part, Mapping):
            return self.text(_json_text(part))
        kind = part.get("type")
        if kind in _IMAGE_PART_TYPES:
            return self.image_tokens
        if kind is None and any(k in part for k in _GEMINI_MEDIA):
            return self._media(part)
        if kind in _BLOCK_COUNTERS:
            return _BLOCK_COUNTERS[kind](self, part)
        for key in ("text", "value"):  # OpenAI parts; LLaMA-Factory's {type, value}
            value = part.get(key)
            if isinstance(value, str):
                return self.text(value)
        return self.text(_json_text(part))

    def _media(self, part: Mapping[str, Any]) -> int:
        """A Gemini ``inlineData`` / ``fileData`` part: an image at the fixed image
        cost, any other file (a PDF, audio, video) at :data:`DOCUMENT_TOKENS`; never
        the length of its base64 data."""
        media = next((part[k] for k in _GEMINI_MEDIA if k in part), None)
        mime = media.get("mimeType", media.get("mime_type")) if isinstance(media, Mapping) else None
        return self.image_tokens if str(mime).startswith("image/") else DOCUMENT_TOKENS

    def message(self, message: Mapping[str, Any]) -> int:
        """Tokens of one chat message by the cookbook rule, tool calls included.

        3 per message + role + content + name (+1 for a name) + for each tool call its
        function name and arguments plus :data:`TOOL_CALL_OVERHEAD`; a legacy
        ``function_call`` counts its name and arguments. ``tool_call_id`` is not
        counted, as in the cookbook's reference counts.
        """
        total = TOKENS_PER_MESSAGE
        role = message.get("role")
        if isinstance(role, str):
            role_tokens = self._roles.get(role)
            if role_tokens is None:
                role_tokens = self._roles[role] = self.text(role)
            total += role_tokens
        total += self.content(message.get("content"))
        name = message.get("name")
        if isinstance(name, str):
            total += self.text(name) + TOKENS_PER_NAME
        # Not ctxcli.model.tool_calls: a call that is no object counts too (as its JSON),
        # and ctxcli.model imports this module.
        tool_calls = message.get("tool_calls")
        if isinstance(tool_calls, list):
            for call in tool_calls:
                total += self.tool_call(call) + self.tool_call_overhead
        function_call = message.get("function_call")
        if function_call is not None and isinstance(function_call, Mapping):
            total += self.tool_call({"function": function_call})
        return total

    def tool_call(self, call: Any) -> int:
        """Tokens of one tool call's function name and arguments (no overhead); a
        custom tool's call, of its name and input (:func:`call_function`)."""
        if not isinstance(call, Mapping):
            return self.text(_json_text(call))
        function = call_function(call)
        if function is None:
            return self.text(_json_text(call))
        total = 0
        for key in ("name", "arguments"):
            value = function.get(key)
            if isinstance(value, str):
                total += self.text(value)
            elif value is not None:
                total += self.text(_json_text(value))
        return total

    def tools(self, tools: Any) -> int:
        """Tokens of a request's ``tools`` definitions (cookbook ``num_tokens_for_tools``).

        ``tools`` is the Chat Completions list of ``{"type": "function", "function":
        {name, description, parameters}}``. Anything else (a JSON string, another
        provider's shape) counts as the text of its JSON. ``None`` or empty is 0.
        """
        if not tools:
            return 0
        if not isinstance(tools, list):
            return self.text(tools if isinstance(tools, str) else _json_text(tools))
        total = 0
        for tool in tools:
            function = tool.get("function") if isinstance(tool, Mapping) else None
            if isinstance(function, Mapping):
                total += self._function(function)
            else:
                total += self.text(_json_text(tool))
        return total + FUNC_END

    def _function(self, function: Mapping[str, Any]) -> int:
        """Tokens of one ``{name, description, parameters}`` definition of :meth:`tools`."""
        description = str(function.get("description") or "").rstrip(".")
        total = FUNC_INIT + self.text(f"{function.get('name', '')}:{description}")
        parameters = function.get("parameters")
        properties = parameters.get("properties") if isinstance(parameters, Mapping) else None
        if properties and not isinstance(properties, Mapping):
            return total + self.text(_json_text(properties))  # not a JSON Schema: as text
        if properties:
            total += PROP_INIT + sum(self._property(key, spec) for key, spec in properties.items())
        return total

    def _property(self, key: str, spec: Any) -> int:
        """Tokens of one parameter of a :meth:`_function` (its name, type, description
        and enum)."""
        spec = spec if isinstance(spec, Mapping) else {}
        description = str(spec.get("description") or "").rstrip(".")
        total = PROP_KEY + self.text(f"{key}:{spec.get('type', '')}:{description}")
        enum = spec.get("enum")
        if isinstance(enum, list):
            total += ENUM_INIT + sum(ENUM_ITEM + self.text(str(item)) for item in enum)
        return total

    def messages(self, messages: Iterable[Mapping[str, Any]], tools: Any = None) -> int:
        """Tokens of a whole request: every message, reply priming and ``tools``."""
        return sum(self.message(m) for m in messages) + REPLY_PRIMING + self.tools(tools)


class NullCounter(TokenCounter):
    """A :class:`TokenCounter` that counts every text as 0 tokens and loads no
    tokenizer: for checks that need no sizes, such as ``ctxcli validate``, which must
    work offline without tiktoken's files."""

    def __init__(self) -> None:
        self.encoding_name = "none"
        self.image_tokens = 0
        self.tool_call_overhead = 0
        self._roles = {}
        self.text = TextMemo(lambda text: 0)


def _json_text(value: Any) -> str:
    try:
        return orjson.dumps(value, default=str).decode()
    except TypeError:  # a lone surrogate (JSON allows "\ud83d"; orjson writes no such
        # str), or nesting past orjson's 254 levels
        return jsonio.std_dumps(value, default=str)


def _document(counter: TokenCounter, part: Mapping[str, Any]) -> int:
    source = part.get("source")
    if isinstance(source, Mapping) and source.get("type") == "text":
        return counter.text(str(source.get("data") or ""))
    return DOCUMENT_TOKENS


def _text_of(value: Any) -> str:
    return value if isinstance(value, str) else _json_text(value)


def opaque_tokens(encrypted: Any) -> int:
    """Tokens charged for an opaque ``encrypted_content`` (an OpenAI ``reasoning`` or
    ``compaction`` item), which no tokenizer can read: what its bytes could hold, at
    4 bytes a token (the OpenAI cookbook's rule of thumb for English text) of the 3/4
    of its length that base64 text decodes to."""
    return len(encrypted) * 3 // 16 if isinstance(encrypted, str) else 0


def _reasoning(counter: TokenCounter, part: Mapping[str, Any]) -> int:
    summary = part.get("summary")
    texts = (
        [s.get("text") for s in summary if isinstance(s, Mapping)]
        if isinstance(summary, list)
        else []
    )
    return sum(counter.text(t) for t in texts if isinstance(t, str)) + opaque_tokens(
        part.get("encrypted_content")
    )


_BLOCK_COUNTERS: dict[str, Callable[[TokenCounter, Mapping[str, Any]], int]] = {
    "reasoning": _reasoning,
    "compaction": lambda c, p: opaque_tokens(p.get("encrypted_content")),
    "document": _document,
    "thinking": lambda c, p: c.text(_text_of(p.get("thinking", ""))),
    "redacted_thinking": lambda c, p: c.text(_text_of(p.get("data", ""))),
    "tool_use": lambda c, p: (
        c.text(_text_of(p.get("name", ""))) + c.text(_json_text(p.get("input")))
    ),
    "tool_result": lambda c, p: c.content(p.get("content")),
    # A Responses computer_call_output: its screenshot as an image, the rest as JSON (a
    # 13 KB screenshot counted 9,172 tokens as text).
    "computer_call_output": lambda c, p: (
        c.content([p.get("output")])
        + c.text(_json_text({k: v for k, v in p.items() if k != "output"}))
    ),
}


@functools.lru_cache(maxsize=8)
def get_counter(encoding: str = "o200k_base") -> TokenCounter:
    """A shared :class:`TokenCounter` per encoding name (one per process)."""
    return TokenCounter(encoding)
