"""Where harness.wire.load_history reads from: bytes, text, paths, stdin, gzip, JSON Lines."""

from __future__ import annotations

import bz2
import gzip
import io
import json
import lzma
import sys
from pathlib import Path
from typing import Any

import pytest

from harness.core import CanonicalMessage, TextPart, UserPromptPart
from harness.errors import WireFormatError
from harness.wire import dump_messages, load_history, parse_document, read_document, read_history

CHAT: list[dict[str, Any]] = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
EXPECTED = [CanonicalMessage.user("hi"), CanonicalMessage.response(TextPart("hello"))]


def test_every_kind_of_source(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    raw = json.dumps(CHAT).encode()
    path = tmp_path / "chat.json"
    path.write_bytes(raw)
    assert load_history(raw) == EXPECTED
    assert load_history(bytearray(raw)) == EXPECTED
    assert load_history(raw.decode()) == EXPECTED  # text that starts with [ or {
    assert load_history(path) == EXPECTED
    assert load_history(str(path)) == EXPECTED  # any other string is a path
    assert load_history(io.BytesIO(raw)) == EXPECTED
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(raw)))
    loaded = read_history("-")
    assert (loaded.messages, loaded.source) == (EXPECTED, "<stdin>")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(raw)))
    assert load_history(Path("-")) == EXPECTED
    with pytest.raises(FileNotFoundError):
        load_history(tmp_path / "missing.json")
    with pytest.raises(TypeError, match="binary mode"):
        load_history(io.StringIO("[]"))  # pyright: ignore[reportArgumentType]


@pytest.mark.parametrize(
    ("compress", "name"), [(gzip.compress, "gzip"), (bz2.compress, "bzip2"), (lzma.compress, "xz")]
)
def test_compressed_data_is_recognised_by_its_bytes(tmp_path: Path, compress: Any, name: str) -> None:
    path = tmp_path / "history.json"  # no telling extension
    path.write_bytes(compress(dump_messages(EXPECTED)))
    loaded = read_history(path)
    assert (loaded.messages, loaded.format, loaded.compression) == (EXPECTED, "pydantic-ai", name)


def test_compressed_json_lines() -> None:
    lines = b"\n".join(json.dumps(m).encode() for m in CHAT)
    loaded = read_history(gzip.compress(lines))
    assert (loaded.messages, loaded.json_lines, loaded.compression) == (EXPECTED, True, "gzip")


def test_corrupt_and_unsupported_compression() -> None:
    with pytest.raises(WireFormatError, match="gzip data is corrupt or truncated"):
        read_history(gzip.compress(b"[]")[:-6])
    with pytest.raises(WireFormatError, match="zstd-compressed"):
        read_history(b"\x28\xb5\x2f\xfd rest")


def test_json_lines_with_blank_lines_crlf_and_a_bom() -> None:
    text = "\ufeff" + "\r\n".join(json.dumps(m) for m in CHAT) + "\r\n\r\n"
    document = parse_document(text.encode())
    assert (document.json_lines, document.lines) == (True, (1, 2))
    assert load_history(text.encode()) == EXPECTED


def test_a_single_line_is_one_json_document() -> None:
    document = parse_document(json.dumps(CHAT[0]).encode())
    assert not document.json_lines
    assert load_history(json.dumps(CHAT[0])) == [CanonicalMessage.request(UserPromptPart("hi"))]


@pytest.mark.parametrize(
    ("data", "fragment", "line"),
    [
        (b"", "the document is empty", None),
        (b"[1, 2", "not valid JSON (truncated or corrupt?)", None),
        (b'[\n{"role": "user"},\n', "not valid JSON (truncated or corrupt?)", None),
        (b'{"role": "user", "content": "a"}\n{"role": "assistant", "content": \n', "not valid JSON Lines", 2),
        (b"\xff\xfe", "invalid UTF-8 at byte 0", None),
    ],
)
def test_parse_errors(data: bytes, fragment: str, line: int | None) -> None:
    with pytest.raises(WireFormatError) as caught:
        read_document(data)
    assert fragment in str(caught.value)
    assert caught.value.line == line


def test_non_finite_numbers_read_as_null_as_everywhere_in_harness() -> None:
    (_, response) = load_history(
        '[{"role": "user", "content": "x"}, {"role": "assistant", "content": null, "tool_calls":'
        ' [{"id": "c", "type": "function", "function": {"name": "f", "arguments": {"v": NaN}}}]}]'
    )
    (call,) = response.tool_calls
    assert call.args == {"v": None}
