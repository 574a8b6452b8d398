"""What a structural digest keeps of the messages it replaces: names and failure lines.

Both detectors are generic, read from the shape of the text rather than any one agent's
tools:

* **names**: identifiers an agent refers to again: paths (``a/b.py``), dotted names
  (``pkg.mod.func``, ``self.attr``), ``snake_case`` and ``CamelCase``/``camelCase``
  identifiers and dunder names, at least four characters long;
* **failure lines**: the lines of a tool output that report a failure: exception lines
  (``SomeError: ...``, ``...Exception``), lines starting with ``error``/``fatal``/
  ``failed``/``FAIL``/``ERROR``/``panic``, pytest's ``E   ...`` lines, ``command not
  found``, ``No such file or directory``, ``Permission denied``, a non-zero exit status.
  The last few of an output are kept verbatim (bounded), so the agent can match them
  against what it sees next.
"""

from __future__ import annotations

__all__ = ["NameTally", "extract_names", "failure_lines"]

import re
from collections.abc import Iterable, Iterator

_NAME = re.compile(
    r"(?:[\w.-]*[A-Za-z0-9_]/[\w./-]*[A-Za-z0-9_])"  # paths
    r"|(?:[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)"  # dotted names
    r"|(?:\b_{0,2}[A-Za-z][A-Za-z0-9]*_\w*[A-Za-z0-9])"  # snake_case, dunders
    r"|(?:\b[A-Z][a-z0-9]+[A-Z]\w*)"  # CamelCase
    r"|(?:\b[A-Z][A-Z0-9]+[a-z]\w*)"  # HTTPServer
    r"|(?:\b[a-z][a-z0-9]+[A-Z]\w*)"  # camelCase
)
_MIN_NAME = 4
_MAX_NAME = 100
_SCAN_CHARS = 40_000  # of one text; names past it are not looked for

_FAILURE = re.compile(
    r"^(?:[A-Za-z_][\w.]*(?:Error|Exception|Warning|Exit|Interrupt|Failure)\b.*"
    r"|(?i:error|fatal|failed|failure|fail)\b.*"
    r"|(?:FAIL(?:ED)?|ERROR|FATAL|panic)\b.*"
    r"|thread '.*' panicked.*"
    r"|.*\b(?:command not found|No such file or directory|Permission denied|Segmentation fault)\b.*"
    r"|.*\b(?:[Ee]xit(?:ed)?(?: with)? (?:code|status)|returncode|return code)\s*[:=]?\s*[1-9]\d*\b.*"
    r"|.*\b\w+(?:Error|Exception):\s.*"
    r"|.*<tool_use_error>.*)$"
)
_PYTEST_E = re.compile(r"^E\s{2,}\S")
_HINTS = ("error", "fail", "fatal", "traceback", "exception", "exit", "not found", "no such file", "denied")


def extract_names(text: str) -> Iterator[str]:
    """Yield the identifiers of ``text`` worth keeping, in order of appearance (with repeats)."""
    for match in _NAME.finditer(text[:_SCAN_CHARS]):
        name = match.group(0).strip(".-/")
        if _MIN_NAME <= len(name) <= _MAX_NAME and not name.replace(".", "").isdigit():
            yield name


def failure_lines(text: str, *, limit: int = 3, max_chars: int = 300) -> list[str]:
    """The distinctive lines of ``text`` that report a failure, verbatim (its last ``limit``).

    The last ones are kept because an exception or a test summary comes last. The
    generic ``Traceback (most recent call last):`` header is not distinctive and is
    skipped. Lines longer than ``max_chars`` are cut.
    """
    lowered = text.lower()
    if not any(hint in lowered for hint in _HINTS):
        return []
    found: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if len(line) < 4 or line.startswith("Traceback (most recent call last)") or line in found:
            continue
        if _FAILURE.match(line) or _PYTEST_E.match(raw):
            found.append(line)
    return [line if len(line) <= max_chars else line[: max_chars - 1] + "…" for line in found[-limit:]]


class NameTally:
    """Scores names by how often and how recently they occur; a heavier source counts more."""

    def __init__(self) -> None:
        self._scores: dict[str, float] = {}
        self._last: dict[str, int] = {}
        self._clock = 0

    def add(self, names: Iterable[str], weight: float) -> None:
        """Count each name of ``names`` with ``weight``."""
        for name in names:
            self._clock += 1
            self._scores[name] = self._scores.get(name, 0.0) + weight
            self._last[name] = self._clock

    def top(self, count: int, *, exclude: Iterable[str] = ()) -> list[str]:
        """The ``count`` best names (score, then recency), best first, without ``exclude``."""
        skip = set(exclude)
        ranked = sorted(
            (name for name in self._scores if name not in skip),
            key=lambda name: (self._scores[name], self._last[name]),
            reverse=True,
        )
        return ranked[:count]
