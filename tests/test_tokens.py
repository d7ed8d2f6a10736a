"""Token counting by the cookbook rule, with its documented extensions."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxcli import tokens
from ctxcli.errors import TokenizerError
from ctxcli.tokens import (
    IMAGE_TOKENS,
    REPLY_PRIMING,
    TOKENS_PER_MESSAGE,
    TOOL_CALL_OVERHEAD,
    TokenCounter,
    encoding_name_for,
    load_encoding,
)

COUNTER = TokenCounter("cl100k_base")


def test_a_message_is_frame_plus_role_plus_content() -> None:
    text = "Hello there, how are you?"
    expected = TOKENS_PER_MESSAGE + COUNTER.text("user") + COUNTER.text(text)
    assert COUNTER.message({"role": "user", "content": text}) == expected
    assert COUNTER.messages([{"role": "user", "content": text}]) == expected + REPLY_PRIMING


def test_a_name_costs_its_text_plus_one() -> None:
    plain = COUNTER.message({"role": "user", "content": "hi"})
    named = COUNTER.message({"role": "user", "content": "hi", "name": "bob"})
    assert named - plain == COUNTER.text("bob") + 1


@pytest.mark.parametrize(
    "text", ["<|endoftext|>", "a <|fim_prefix|> b <|im_start|>", "<|endofprompt|>"]
)
def test_special_token_literals_are_plain_text(text: str) -> None:
    assert COUNTER.text(text) > 1  # as text, several tokens; never a raise


def test_tool_calls_count_name_arguments_and_overhead() -> None:
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'},
    }
    base = COUNTER.message({"role": "assistant", "content": None})
    with_call = COUNTER.message({"role": "assistant", "content": None, "tool_calls": [call, call]})
    one = COUNTER.text("get_weather") + COUNTER.text('{"city": "Oslo"}') + TOOL_CALL_OVERHEAD
    assert with_call - base == 2 * one


def test_an_image_costs_a_fixed_amount_whatever_its_size() -> None:
    small = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 10}}
    large = {"type": "image_url", "image_url": {"url": "data:image/png;base64," + "A" * 100_000}}
    assert COUNTER.content([small]) == COUNTER.content([large]) == IMAGE_TOKENS


def test_odd_content_never_raises() -> None:
    assert COUNTER.content(None) == 0
    assert COUNTER.content([{"type": "mystery", "payload": [1, 2]}]) > 0
    assert COUNTER.content([{"type": "text", "text": "hi"}, "bare"]) == COUNTER.text(
        "hi"
    ) + COUNTER.text("bare")
    assert COUNTER.text("\ud83d lone surrogate") > 0
    assert COUNTER.message({"role": "assistant", "tool_calls": ["not a call"]}) > 0


def test_tools_follow_the_cookbook_formula() -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_weather",
                "description": "Get the weather.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "unit": {"type": "string", "description": "Unit.", "enum": ["c", "f"]}
                    },
                },
            },
        }
    ]
    expected = (
        7 + COUNTER.text("get_weather:Get the weather") + 3 + 3 + COUNTER.text("unit:string:Unit")
    )
    expected += -3 + (3 + COUNTER.text("c")) + (3 + COUNTER.text("f")) + 12
    assert COUNTER.tools(tools) == expected
    assert COUNTER.tools(None) == 0
    assert COUNTER.tools('[{"name": "x"}]') == COUNTER.text('[{"name": "x"}]')


def test_model_names_pick_their_encoding() -> None:
    assert encoding_name_for("gpt-4o") == "o200k_base"
    assert encoding_name_for("gpt-4") == "cl100k_base"
    assert encoding_name_for("some-local-model") == "o200k_base"
    assert encoding_name_for("gpt-4o", "cl100k_base") == "cl100k_base"


def test_an_unknown_encoding_is_a_clear_error() -> None:
    with pytest.raises(TokenizerError, match=r"unknown encoding 'nope' \(known: .*o200k_base"):
        TokenCounter("nope")


SAMPLES = ["Hello there", "déjà vu 東京 🚀", "<|endoftext|> is text here", " \n\t  x = 1\n" * 5]


@pytest.fixture
def fresh() -> Iterator[None]:
    """Each load below reads or writes its cache file: none built earlier is reused."""
    tokens._LOADED.clear()
    yield
    tokens._LOADED.clear()


@pytest.mark.usefixtures("fresh")
def test_the_cached_encoding_counts_as_tiktoken_does(tmp_path: Path) -> None:
    import tiktoken

    reference = tiktoken.get_encoding("cl100k_base")
    first = load_encoding("cl100k_base", tmp_path)  # parses the BPE file, keeps the result
    (kept,) = tmp_path.iterdir()
    tag = sys.implementation.cache_tag
    assert kept.name == f"tiktoken-{tiktoken.__version__}-cl100k_base-{tag}.marshal"
    assert load_encoding("cl100k_base", tmp_path / "elsewhere") is first  # one per process
    tokens._LOADED.clear()
    again = load_encoding("cl100k_base", tmp_path)  # read back from the cache file
    for text in SAMPLES:
        expected = reference.encode_ordinary(text)
        assert first.encode_ordinary(text) == expected
        assert again.encode_ordinary(text) == expected
    assert again.n_vocab == reference.n_vocab and again.name == reference.name


@pytest.mark.usefixtures("fresh")
def test_a_damaged_cache_file_is_rebuilt_not_trusted(tmp_path: Path) -> None:
    load_encoding("cl100k_base", tmp_path)
    tokens._LOADED.clear()
    (kept,) = tmp_path.iterdir()
    data = bytearray(kept.read_bytes())
    data[-100] ^= 0xFF  # one flipped byte in the ranks
    kept.write_bytes(bytes(data))
    encoding = load_encoding("cl100k_base", tmp_path)
    assert encoding.encode_ordinary("Hello there") == [9906, 1070]
    assert kept.read_bytes() != bytes(data)  # written afresh
    tokens._LOADED.clear()
    kept.write_bytes(b"ctxcli-encoding-1\n")  # torn
    assert load_encoding("cl100k_base", tmp_path).encode_ordinary("Hello") == [9906]


@pytest.mark.usefixtures("fresh")
def test_an_unusable_cache_folder_is_passed_over(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    encoding = load_encoding("cl100k_base", blocked / "cache")
    assert encoding.encode_ordinary("Hello") == [9906]
    with pytest.raises(TokenizerError, match="unknown encoding"):
        TokenCounter("no_such_base", cache_dir=tmp_path)
