"""Google-style docstrings: a description and per-name descriptions, for tool and field schemas."""

from __future__ import annotations

__all__ = ["ARGUMENT_SECTIONS", "ATTRIBUTE_SECTIONS", "parse_google_docstring"]

import inspect
import re
from collections.abc import Collection
from typing import Final

ARGUMENT_SECTIONS: Final = frozenset({"Args", "Arguments", "Parameters"})
"""Sections that describe a function's parameters."""

ATTRIBUTE_SECTIONS: Final = frozenset({"Attributes", "Fields", "Keys"})
"""Sections that describe the fields of a dataclass, an attrs class or a ``TypedDict``."""

_SECTION = re.compile(
    r"^(Args|Arguments|Parameters|Returns|Return|Raises|Yields|Examples?|Notes?|Attributes|Fields|Keys):\s*$"
)
_PARAM = re.compile(r"^(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")


def parse_google_docstring(
    doc: str | None, *, sections: Collection[str] = ARGUMENT_SECTIONS
) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its description and per-name descriptions.

    Args:
        doc: The docstring (``None`` or empty gives ``("", {})``).
        sections: The sections whose entries are collected (default: the argument
            sections; :data:`ATTRIBUTE_SECTIONS` for the fields of a class).

    Returns:
        ``(description, {name: description})``. The description is everything before the
        first section header; continuation lines of an entry are joined with spaces.
    """
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    param_indent: int | None = None
    for raw in lines:
        stripped = raw.strip()
        header = _SECTION.match(stripped)
        if header and (raw == stripped):
            section = header.group(1)
            current = None
            param_indent = None
            continue
        if section is None:
            description.append(raw)
            continue
        if section not in sections or not stripped:
            continue
        indent = len(raw) - len(raw.lstrip())
        match = _PARAM.match(stripped)
        if match and (param_indent is None or indent <= param_indent):
            param_indent = indent
            name = match.group(1).lstrip("*")
            current = name
            params[name] = match.group(3).strip()
        elif current is not None:
            params[current] = f"{params[current]} {stripped}".strip()
    return "\n".join(description).strip(), params
