"""The stash: harness values pydantic-ai has no field for, kept in its message ``metadata``.

Where pydantic-ai cannot hold a harness value (metadata on a user prompt, text, thinking
or tool-call part, a missing timestamp or usage, a retry prompt), the converted message's
``metadata`` gets an entry under :data:`STASH_KEY` holding, per part and for the
message's own fields, both the harness form and the pydantic-ai form it was written as.
On the way back the harness form is restored wherever the pydantic-ai form is unchanged.

Everything here works on the JSON forms (dicts), so this module does not import
pydantic-ai.
"""

from __future__ import annotations

__all__ = ["STASH_KEY", "restore", "stashed_metadata"]

from collections.abc import Mapping
from typing import Any, Final, cast

from harness.core.messages import CanonicalMessage

STASH_KEY: Final = "harness_interop"
"""Key of pydantic-ai ``metadata`` holding the harness values pydantic-ai has no field for."""


def _pop_stash(item: dict[str, Any]) -> dict[str, Any] | None:
    """Take the stash out of a dumped pydantic-ai message (restoring its ``metadata``)."""
    raw: object = item.get("metadata")
    if not isinstance(raw, dict):
        return None
    metadata = cast("dict[str, Any]", raw)
    found: object = metadata.get(STASH_KEY)
    if not isinstance(found, dict):
        return None
    stash = cast("dict[str, Any]", found)
    rest = {k: v for k, v in metadata.items() if k != STASH_KEY}
    item["metadata"] = None if (not rest and stash.get("metadata_none")) else rest
    return stash


def _fields(item: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in item.items() if k != "parts"}


def restore(item: dict[str, Any]) -> dict[str, Any]:
    """The harness form of a dumped pydantic-ai message, using its stash where still valid.

    Args:
        item: One message as pydantic-ai dumps it (JSON mode); its ``metadata`` loses the
            stash entry.
    """
    stash = _pop_stash(item)
    if stash is None:
        return item
    out = dict(item)
    message = stash.get("message")
    if isinstance(message, dict):
        message = cast("dict[str, Any]", message)
        if message.get("pydantic_ai") == _fields(item):
            out = {**cast("dict[str, Any]", message.get("harness", {})), "parts": item["parts"]}
    parts_stash = stash.get("parts")
    if isinstance(parts_stash, dict) and isinstance(item.get("parts"), list):
        parts = list(cast("list[Any]", item["parts"]))
        for key, entry in cast("dict[str, Any]", parts_stash).items():
            if not (isinstance(entry, dict) and key.isdigit()):
                continue
            index = int(key)
            entry = cast("dict[str, Any]", entry)
            if index < len(parts) and parts[index] == entry.get("pydantic_ai"):
                parts[index] = entry.get("harness")
        out["parts"] = parts
    return out


def stashed_metadata(
    metadata: Mapping[str, Any] | None,
    ours: dict[str, Any],
    theirs: dict[str, Any],
    canonical: CanonicalMessage,
    again: CanonicalMessage,
) -> dict[str, Any]:
    """A pydantic-ai message's ``metadata`` with the harness values its round trip would lose.

    Args:
        metadata: The pydantic-ai message's ``metadata``.
        ours: The harness message's JSON form.
        theirs: The pydantic-ai message's JSON form.
        canonical: The harness message.
        again: What ``theirs`` reads back as, without a stash.
    """
    stash: dict[str, Any] = {}
    if len(canonical.parts) == len(again.parts):
        parts = {
            str(index): {"harness": ours["parts"][index], "pydantic_ai": theirs["parts"][index]}
            for index, (a, b) in enumerate(zip(canonical.parts, again.parts, strict=True))
            if a != b
        }
        if parts:
            stash["parts"] = parts
    if again.replace(parts=canonical.parts) != canonical or len(canonical.parts) != len(again.parts):
        stash["message"] = {"harness": _fields(ours), "pydantic_ai": _fields(theirs)}
    if metadata is None:
        stash["metadata_none"] = True
    return {**(metadata or {}), STASH_KEY: stash}
