"""Use harness histories and capabilities from pydantic-ai.

Needs the ``pydantic-ai`` extra (``pip install "harness-loop[pydantic-ai]"``); importing
this package without pydantic-ai installed raises
:class:`~harness.errors.InteropError`.

Conversion:

* :func:`messages_from_pydantic_ai` turns pydantic-ai ``ModelMessage`` objects into
  :class:`~harness.core.messages.CanonicalMessage` objects, :func:`messages_to_pydantic_ai`
  goes back. Both go through the JSON form both libraries share (see :mod:`harness.wire`),
  so every pydantic-ai part kind survives: kinds harness does not model become
  :class:`~harness.core.messages.UnknownPart` objects that keep every key.
* pydantic-ai -> harness -> pydantic-ai gives messages equal to pydantic-ai's own
  serialisation round trip (``validate_python(dump_python(m, mode="json"))``), which is
  ``m`` itself for messages pydantic-ai loaded or built (pydantic-ai's first round trip
  fills in inferred values, such as an ``ImageUrl``'s media type, and narrows
  ``BinaryContent`` to ``BinaryImage``).
* harness -> pydantic-ai -> harness gives equal messages. Where pydantic-ai has no place
  for a harness value (metadata on a user prompt, text, thinking or tool-call part, a
  missing timestamp or usage, a retry prompt, which pydantic-ai 2.x stores as a retried
  tool return or as retry feedback), the harness form is kept in the pydantic-ai message's
  ``metadata`` under the key :data:`STASH_KEY` (pydantic-ai never sends ``metadata`` to the
  model) and restored on the way back, as long as the pydantic-ai side left that part (or
  the message's own fields) unchanged.

Running a capability stack:

* :class:`HarnessCapabilities` is a pydantic-ai capability: its ``before_model_request``
  runs the stack (through :func:`harness.run.compaction.compact`, with the invariant guard)
  and writes the edited history back to the run's persistent history
  (``RunContext.messages``); request-scoped parts (a limit warning) go into the request
  being sent only.
* :func:`as_history_processor` returns the same stack as a pydantic-ai history processor,
  for ``pydantic_ai.capabilities.ProcessHistory``. pydantic-ai stores a history
  processor's output as the run's history, so request-scoped parts are stored too; the
  processor removes the ones it added on the next request (they carry a harness mark).
* Both hand the stack the pydantic-ai run's usage, request count and request limit
  (:func:`run_limits`: ``RunContext.usage`` becomes ``RequestContext.usage`` and
  ``requests``; ``UsageLimits.request_limit``, 50 by default, becomes ``max_iterations``,
  since pydantic-ai has no iteration limit of its own), so a limit warner's iteration and
  total-token warnings fire; tokens the stack charges (a summarizer's) are added to the
  run's usage (``usage.requests`` is unchanged: harness usage does not count requests).

Both convert each pydantic-ai message once: conversions are cached by object identity in
both directions (pydantic-ai passes the same message objects on every request), and only
messages the stack changed are converted back, reusing the pydantic-ai part objects of
every part the stack left alone.

Modules (import the public names from this package):

* :mod:`~harness.interop.pydantic_ai.convert`: the lossless conversion, both ways.
* :mod:`~harness.interop.pydantic_ai.stash`: the harness values kept in pydantic-ai ``metadata``.
* :mod:`~harness.interop.pydantic_ai.cache`: :class:`MessageConverter`, cached by identity.
* :mod:`~harness.interop.pydantic_ai.processor`: :func:`as_history_processor`.
* :mod:`~harness.interop.pydantic_ai.capability`: :class:`HarnessCapabilities`.
"""

from __future__ import annotations

__all__ = [
    "STASH_KEY",
    "HarnessCapabilities",
    "HarnessHistoryProcessor",
    "MessageConverter",
    "ProcessedHistory",
    "RunLimits",
    "as_history_processor",
    "messages_from_pydantic_ai",
    "messages_to_pydantic_ai",
    "run_limits",
]

import importlib

from harness.errors import InteropError

try:
    # What the submodules import from pydantic-ai, checked first so that a missing or too
    # old pydantic-ai fails with the install hint whichever submodule is imported.
    for _module, _name in (
        ("pydantic", "ValidationError"),
        ("pydantic_ai.messages", "ModelMessagesTypeAdapter"),
        ("pydantic_ai.capabilities", "AbstractCapability"),
        ("pydantic_ai.models", "ModelRequestContext"),
        ("pydantic_ai.tools", "RunContext"),
        ("pydantic_ai.usage", "RunUsage"),
    ):
        getattr(importlib.import_module(_module), _name)
except (ImportError, AttributeError) as _exc:  # pragma: no cover - exercised in a subprocess test
    raise InteropError(
        "harness.interop.pydantic_ai needs pydantic-ai; install it with "
        '`pip install "harness-loop[pydantic-ai]"` (pydantic-ai-slim>=2.62)'
    ) from _exc

from harness.interop.pydantic_ai.cache import MessageConverter
from harness.interop.pydantic_ai.capability import HarnessCapabilities
from harness.interop.pydantic_ai.convert import messages_from_pydantic_ai, messages_to_pydantic_ai
from harness.interop.pydantic_ai.processor import (
    HarnessHistoryProcessor,
    ProcessedHistory,
    RunLimits,
    as_history_processor,
    run_limits,
)
from harness.interop.pydantic_ai.stash import STASH_KEY
