"""What counts as the instructions a request is sent with (private: see :class:`harness.tokens.TokenCounter`).

Instructions reach a history in two forms:

* the ``instructions`` field of a request (pydantic-ai records the instructions in force on
  every request; only the newest request's are sent), and optionally of a response (the
  instructions it was produced under);
* system prompt parts with a ``dynamic_ref`` (pydantic-ai's dynamic system prompts, which it
  re-evaluates in place when a run starts; harness's own dynamic instructions in what it
  sends), which live in the first request.

A provider's usage figure covers the instructions sent with its request. When the
instructions change afterwards, :meth:`~harness.tokens.TokenCounter.context_tokens` counts
the difference instead of trusting the figure as it is; these helpers recognise such a
change.
"""

from __future__ import annotations

__all__ = ["change_since", "dynamic_parts", "instructions_only_change", "is_dynamic", "sent_instructions"]

import bisect

import attrs

from harness.core.messages import CanonicalMessage, Part, SystemPromptPart


def is_dynamic(part: Part) -> bool:
    """Whether ``part`` is a dynamic system prompt (re-evaluated instructions)."""
    return type(part) is SystemPromptPart and part.dynamic_ref is not None


def dynamic_parts(message: CanonicalMessage) -> bool:
    """Whether ``message`` is a request holding at least one dynamic system prompt part."""
    return message.kind == "request" and any(is_dynamic(part) for part in message.parts)


def instructions_only_change(old: CanonicalMessage, new: CanonicalMessage) -> bool:
    """Whether ``new`` is ``old`` with different dynamic system prompts and nothing else changed.

    Dynamic system prompt parts may differ in content, timestamp and number (a dynamic
    prompt that returns nothing is left out); every other part and every message field
    must be equal.
    """
    if old is new or old.kind != "request" or new.kind != "request":
        return False
    if not (dynamic_parts(old) or dynamic_parts(new)):
        return False
    old_rest = [part for part in old.parts if not is_dynamic(part)]
    new_rest = [part for part in new.parts if not is_dynamic(part)]
    if old_rest != new_rest or old == new:
        return False
    return attrs.evolve(old, parts=new.parts) == new


def sent_instructions(anchor: CanonicalMessage, request: CanonicalMessage | None) -> str:
    """The instructions the request ``anchor`` answers was sent with (``""`` for none).

    The response's own ``instructions`` when it records them, otherwise those of
    ``request``, the newest request before it that carries any.
    """
    if anchor.instructions is not None:
        return anchor.instructions
    return (request.instructions or "") if request is not None else ""


def change_since(lengths: list[int], totals: list[int], index: int) -> int:
    """Tokens the dynamic system prompts changed by since the request answered at ``index`` was sent.

    ``lengths[j]`` is how long the history counted was when the ``j``-th change was seen
    (non-decreasing); ``totals[j]`` the sum of the first ``j + 1`` changes. A change seen
    in a history that already held the response at ``index`` came after its request.
    """
    if not lengths:
        return 0
    first = bisect.bisect_right(lengths, index)
    return totals[-1] - (totals[first - 1] if first else 0)
