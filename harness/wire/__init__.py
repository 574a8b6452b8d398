r"""The JSON wire format of message histories.

A history is written as a JSON array of message objects, UTF-8 encoded. The format is
pydantic-ai's ``ModelMessagesTypeAdapter`` format, so files written here load in
pydantic-ai and its dumps load here::

    [
      {"kind": "request", "parts": [
        {"part_kind": "user-prompt", "content": "list the files"}]},
      {"kind": "response", "parts": [
        {"part_kind": "text", "content": "Sure."},
        {"part_kind": "tool-call", "tool_call_id": "tc_1", "tool_name": "bash",
         "args": {"command": "ls"}}]},
      {"kind": "request", "parts": [
        {"part_kind": "tool-return", "tool_call_id": "tc_1", "tool_name": "bash",
         "content": "README.md"}]}
    ]

Reading:

* A message needs ``kind`` (``"request"`` or ``"response"``) and a ``parts`` list; a part
  needs ``part_kind``. Tool calls and tool returns need a non-empty ``tool_call_id``.
* The part kinds harness models are ``system-prompt``, ``user-prompt``, ``tool-return``,
  ``retry-prompt`` (requests) and ``text``, ``thinking``, ``tool-call`` (responses). A
  request holding a response kind (or the reverse) is an error. Any other ``part_kind``
  (``builtin-tool-call``, ``file``, ``retry-feedback``, ...) becomes an
  :class:`~harness.core.messages.UnknownPart` that keeps every key verbatim.
* Keys a modelled part or message does not name (``provider_details``, ``id``,
  ``outcome``, ``state`` ...) go to its ``extra`` mapping verbatim.
* A key the model names but whose value is ``null`` cannot be told apart from an absent
  key by the typed field (which is ``None`` either way), so it is recorded in ``extra`` as
  ``key: None``. This is what makes the round trip exact for pydantic-ai dumps, which
  write every optional key, and for minimal files, which write none.
* Tool-call ``args`` stay exactly as given (a JSON object or a JSON string). User-prompt
  and retry-prompt content lists become tuples; their items are kept as they are.
* Timestamps are ISO-8601 strings (``Z`` accepted) and become :class:`datetime.datetime`.
* ``usage`` is pydantic-ai's ``RequestUsage`` shape and becomes
  :class:`~harness.core.messages.Usage` through :meth:`~harness.core.messages.Usage.from_pydantic_ai`.
* Legacy entries are accepted: ``{"content": ...}`` (no ``kind``/``parts``) is a request
  holding one user prompt, ``{"thought": ...}`` a response holding one thinking part (or,
  with :func:`load_messages_and_thoughts`, an entry of the separate thoughts list). An
  object with a ``role`` key (an OpenAI or Anthropic message) or a ``message`` object (a
  transcript record) is never a legacy entry: it is an error pointing to :func:`load_history`.

Writing:

* Required fields are always written; an optional field is written when it is not
  ``None``; then every ``extra`` key is written, except that a typed field that is set
  wins over an ``extra`` entry of the same name, and ``extra`` never overrides
  ``part_kind``, ``kind`` or ``parts``.
* Hence ``dump(load(doc))`` reproduces every key and value of ``doc``, with four
  normalisations: timestamps are spelled the way pydantic writes them (ISO-8601, ``Z``
  for UTC), ``usage`` is written in its full shape (below), legacy entries are written
  in the current form, and the non-standard ``NaN``/``Infinity`` tokens become ``null``.
  Every corpus file and every pydantic-ai dump round-trips exactly.
* And ``load(dump(history)) == history`` for every history whose ``extra`` mappings use
  modelled key names only as null markers (value ``None`` while the field is ``None``)
  and that holds no non-finite float (written as ``null``) and no high surrogate
  directly followed by a low one (read back as the character the pair encodes).
* Loaded ``extra``, ``metadata`` and unknown parts' data are read-only
  (:class:`~harness.core.frozen.FrozenDict`, :class:`~harness.core.frozen.FrozenList`).
  Loading parses one message at a time (a document's whole JSON tree is never held beside
  the history) and touches no process-wide state such as the garbage collector.
* pydantic-ai requires ``tool_name`` on a tool return; a
  :class:`~harness.core.messages.ToolReturnPart` without one (allowed by the contract's
  minimal form) is written without the key, which pydantic-ai refuses.
* pydantic-ai 2.x loads such a file but drops what it has no field for: ``metadata`` on
  user-prompt, text, thinking and tool-call parts (where harness keeps its marks), and it
  reads ``retry-prompt`` parts as other kinds. To hand a history to pydantic-ai code
  without losing those, use :mod:`harness.interop.pydantic_ai`, which keeps them aside.
* ``usage`` is always written in pydantic-ai's shape: ``input_tokens``,
  ``output_tokens``, ``cache_read_tokens``, ``cache_write_tokens`` plus its extra keys.
* The output is compact JSON (no spaces) with non-ASCII characters written as ``\u``
  escapes, so it is plain ASCII and therefore valid UTF-8 whatever the strings hold; a
  lone surrogate (a non-UTF-8 file name from ``os.fsdecode``) is written as its escape
  and loads back identical. CPython's encoder is also fastest in this mode.
* A non-finite float (``NaN``, ``Infinity``) is written as ``null``, as pydantic and
  JavaScript do; the non-standard ``NaN``/``Infinity`` tokens are read as ``null``. Session
  files follow the same two rules (:mod:`harness.wire.jsontext`).

Every problem is reported as a :class:`~harness.errors.WireFormatError` naming the
message index, the part index and the field.

All conversions go through one module-level :mod:`cattrs` converter, :data:`converter`,
whose hooks for the message classes are hand-written and dispatch on ``part_kind`` through
a precomputed table, so loading costs one pass over each part's keys.

Modules (internal; import from :mod:`harness.wire`):

* :mod:`harness.wire.values`: checks and conversions of single values.
* :mod:`harness.wire.fields`: the wire keys of each class and the readers and writers
  built from them.
* :mod:`harness.wire.legacy`: the legacy ``content`` and ``thought`` entries.
* :mod:`harness.wire.conversion`: the converter and its hooks.
* :mod:`harness.wire.document`: parsing and writing documents, and the load and dump functions.
* :mod:`harness.wire.jsontext`: JSON text with harness's rules for lone surrogates and
  non-finite numbers (:func:`encode_json`, :func:`decode_json`).

Foreign formats (read only): :func:`load_history` / :func:`read_history` read a history
in any accepted format (``pydantic-ai``, this wire format; ``openai``, Chat Completions
messages; ``anthropic``, Messages API messages and Claude Code transcripts) from a file,
standard input, bytes or text, JSON or JSON Lines, gzip-compressed or not, detecting the
format unless it is given; :func:`messages_from_openai` and :func:`messages_from_anthropic`
convert message lists; :func:`detect_format` tells the format of parsed JSON. Modules:

* :mod:`harness.wire.sources`: reading, decompressing and parsing (JSON, JSON Lines).
* :mod:`harness.wire.records`: the shapes of a document (lists, request bodies, records).
* :mod:`harness.wire.detect`: telling the formats apart.
* :mod:`harness.wire.foreign`: what the readers share (kept keys, turn assembly).
* :mod:`harness.wire.openai_chat`, :mod:`harness.wire.anthropic_messages`: the readers.
* :mod:`harness.wire.loading`: the load functions.
"""

from __future__ import annotations

__all__ = [
    "FORMAT_CHOICES",
    "HISTORY_FORMATS",
    "FormatChoice",
    "HistoryFormat",
    "LoadedHistory",
    "Source",
    "SourceDocument",
    "converter",
    "decode_json",
    "detect_format",
    "dump_messages",
    "encode_json",
    "history_from_document",
    "load_history",
    "load_messages",
    "load_messages_and_thoughts",
    "messages_from_anthropic",
    "messages_from_jsonable",
    "messages_from_openai",
    "messages_to_jsonable",
    "parse_document",
    "read_document",
    "read_history",
]

from harness.wire.anthropic_messages import messages_from_anthropic
from harness.wire.conversion import converter
from harness.wire.detect import detect_format
from harness.wire.document import (
    dump_messages,
    load_messages,
    load_messages_and_thoughts,
    messages_from_jsonable,
    messages_to_jsonable,
)
from harness.wire.foreign import HISTORY_FORMATS, HistoryFormat
from harness.wire.jsontext import decode_json, encode_json
from harness.wire.loading import (
    FORMAT_CHOICES,
    FormatChoice,
    LoadedHistory,
    history_from_document,
    load_history,
    read_history,
)
from harness.wire.openai_chat import messages_from_openai
from harness.wire.sources import Source, SourceDocument, parse_document, read_document
