"""What a cleared tool result keeps: its failure lines, the paths and the names it named.

A cleared result should stay small, but an agent must still see *what failed* and *where*.
:func:`excerpt` picks, from a tool result's text, with no model and no knowledge of the tool:

* **failure lines**, verbatim (see :func:`failure_lines`): the last frame and the exception
  line of every traceback; lines that report an error the way compilers, linters, test
  runners and shells do (``error:``, ``Error:``, ``fatal:``, ``panic:``, ``FAILED``,
  ``FAIL:``, ``ERROR``, ``N failed``, pytest's ``E   assert ...``); exception lines
  (``ValueError: ...``, also inside a line: ``failed: KeyError: 'x'``, and ``Caused by: ...``);
  assertion failures; a non-zero exit status
  (``exit code 2``, ``returncode: 1``, ``exited with status 127``, ``non-zero exit``);
  and the common operating-system failures (``No such file or directory``,
  ``command not found``, ``Permission denied``, ``Segmentation fault``). Lines that are
  source code (``raise X(...)``, ``except X:``, ``def``, ``class``, comments), also
  after a ``grep -n`` or line-number prefix, are never failure lines;
* **paths** (see :func:`named_paths`): file paths, in the order they first appear;
* **names** (see :func:`defined_names`): the names the result *defines*
  (``def``/``class``/``fn``/``func``/``function``/``struct``/``enum``/``trait``/``interface``).

Everything is bounded (lines, paths, names and a token budget) and deterministic: the
same text and settings give the same excerpt, so a cleared placeholder never changes
once written and the provider's prompt cache keeps hitting.
"""

from __future__ import annotations

__all__ = ["Excerpt", "defined_names", "excerpt", "failure_lines", "named_paths", "text_counter", "text_of"]

import json
import re
from collections.abc import Callable
from typing import Any, cast

import attrs

_MAX_LINE_CHARS = 400
"""A kept failure line longer than this is cut (with ``...``); no single line may dominate."""

_MAX_SCAN_CHARS = 1000
"""Only the start of a very long line is examined (a minified file is not an error report)."""

_LOCATION = re.compile(r"^\s*(?=[\w./\\-]*[A-Za-z_])[\w./\\-]+[:-]\d+(?::\d+)?[:-]\s*")
"""A ``path:12:`` / ``path:12:5:`` (compilers, linters, ``grep -n``) or ``path-12-`` prefix."""

_NUMBERED = re.compile(r"^\s*\d+(?:[:|-]|\s)\s*")
"""A listing's line-number prefix (``12:``, ``12|``, ``12-``, ``12 ``)."""

_CODE = re.compile(
    r"^(?:(?:raise|except|catch|throw|throws|def|class|import|from|elif|if|return|assert|yield|with|try|"
    r"finally|async|await|print|puts|echo|log|logger|self|this|console|fn|func|function|let|const|var|pub)\b"
    r"|#|//|/\*|\*|@|[\"'`]|[\w.]+\s*=[^=]|[\w.]+\((?!\d+\))|\}|\{)",
)
"""Source code (after the prefix): a line starting like this is never a failure line."""

_TRACEBACK = re.compile(r"^\s*Traceback \(most recent call last\):\s*$")
_FRAME = re.compile(r'^\s+File "[^"]+", line \d+')
_EXCEPTION = re.compile(
    r"^\s*(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Failure|Fault|Exit|Interrupt)"
    r"(?::\s.*|:?\s*$)"
)
_MARKERS = re.compile(
    r"(?:^|[\s:(\[])(?:error|Error|ERROR|fatal|Fatal|FATAL|panic)(?:\[[^\]]{1,20}\])?:(?:\s|$)"
    r"|\bFAILED\b|^\s*(?:FAIL|ERROR)\b|\bFAIL:\s|^E\s+(?:assert\b|[\w.]*(?:Error|Exception)\b)"
    r"|\bnpm ERR!|\bpanicked at\b|^\s*Caused by:\s|\b[A-Z]\w*(?:Error|Exception):\s\S"
    r"|\b[1-9]\d* (?:failed|errors?)\b"
    r"|\b(?:[Aa]ssert(?:ion)?)\b[^\n]{0,200}\bfailed\b"
    r"|\b(?:[Ee]xit|[Rr]eturn)[\s_-]?(?:code|status)\b\W{0,3}-?[1-9]\d*\b"
    r"|\bexited with (?:code|status) -?[1-9]|\b[Nn]on-zero exit"
    r"|\bNo such file or directory\b|\bcommand not found\b|\bPermission denied\b"
    r"|\bSegmentation fault\b|\bcore dumped\b"
)

_CANDIDATES = (
    "traceback", "error", "exception", "failure", "fault", "exit", "interrupt", "fatal", "panic", "fail",
    "err!", "caused by", "non-zero", "no such file", "command not found", "permission denied",
    "segmentation fault", "core dumped",
)  # fmt: skip
"""Every failure line holds one of these (lower-cased), a return code or status, or starts with
``E`` (pytest's ``E   ...``): a text with none has no failure line, found with a few C-speed
substring searches."""


_RETURN_STATUS = re.compile(r"return[\s_-]?(?:code|status)")


def _may_fail(text: str) -> bool:
    lowered = text.lower()
    if any(word in lowered for word in _CANDIDATES) or text.startswith("E") or "\nE" in text:
        return True
    return "return" in lowered and _RETURN_STATUS.search(lowered) is not None


_EXTENSIONS = (
    "py|pyi|pyx|ipynb|rs|go|js|jsx|mjs|cjs|ts|tsx|java|kt|kts|scala|swift|c|h|cc|cpp|cxx|hpp|hh|cs|fs|rb|php|"
    "pl|pm|lua|r|jl|ex|exs|erl|hs|ml|mli|clj|dart|vue|svelte|sh|bash|zsh|fish|ps1|bat|sql|graphql|proto|"
    "md|rst|txt|adoc|tex|json|jsonl|yaml|yml|toml|ini|cfg|conf|env|lock|xml|html|htm|css|scss|sass|less|"
    "csv|tsv|log|gradle|cmake|mk|make|dockerfile|tf|nix|patch|diff"
)
_PATH = re.compile(
    r"(?<![\w/.:@%$~+-])"
    r"((?:\.{1,2}/|/|~/)?(?:[\w@+-][\w@.+-]*/)+[\w@+-][\w@.+-]*"
    rf"|[\w-][\w.-]*\.(?:{_EXTENSIONS}))"
    r"(?![\w/-])",
)
_DOTTED_EXTENSION = re.compile(rf"\.(?:{_EXTENSIONS})$", re.IGNORECASE)
_DEFINITION = re.compile(
    r"(?:^|[\s(])(?:def|class|fn|func|function|struct|enum|trait|interface)\s+([A-Za-z_][\w]*)"
)


def _cut(line: str) -> str:
    line = line.rstrip()
    return line if len(line) <= _MAX_LINE_CHARS else line[: _MAX_LINE_CHARS - 3] + "..."


def _failure(line: str) -> bool:
    """Whether one line (outside a traceback) reports a failure."""
    if not line.strip():
        return False
    line = line[:_MAX_SCAN_CHARS]
    located = _LOCATION.match(line)
    if located is not None:
        rest = line[located.end() :]
    else:
        numbered = _NUMBERED.match(line)
        rest = line[numbered.end() :] if numbered is not None else line.lstrip()
    if _CODE.match(rest):
        return False
    if _EXCEPTION.match(line) or (located is not None and _EXCEPTION.match(rest)):
        return True
    return bool(_MARKERS.search(line))


def failure_lines(text: str) -> list[str]:
    """The lines of ``text`` that report a failure, in order, without repeats.

    A traceback contributes its last ``File "...", line N`` frame and the line that names
    the exception (the first unindented line after the frames, whatever the exception's
    name). Every other line is a failure line when it is not source code and matches one
    of the generic markers of the module docstring. Lines are kept verbatim (trailing
    whitespace removed; a line over 400 characters is cut to 397 plus ``...``).

    Args:
        text: A tool result's text.

    Returns:
        The failure lines, first occurrence order.
    """
    if not _may_fail(text):
        return []
    found: dict[str, None] = {}
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        if _TRACEBACK.match(line):
            last_frame: str | None = None
            index += 1
            while index < len(lines):
                current = lines[index]
                if _FRAME.match(current):
                    last_frame = current
                elif current.strip() and not current[:1].isspace():
                    break
                index += 1
            if last_frame is not None:
                found.setdefault(_cut(last_frame))
            if index < len(lines) and not _TRACEBACK.match(lines[index]):
                found.setdefault(_cut(lines[index]))
                index += 1
            continue
        if _failure(line):
            found.setdefault(_cut(line))
        index += 1
    return list(found)


def _is_path(token: str) -> bool:
    if "/" not in token:
        return True  # a bare name only matches with a known extension
    if token.startswith(("/", "./", "../", "~/")) or token.count("/") >= 2:
        return any(c.isalpha() for c in token)
    return bool(_DOTTED_EXTENSION.search(token))


def named_paths(text: str) -> list[str]:
    """The file paths ``text`` names, in first-appearance order, without repeats.

    A path is a token of path characters that either holds a ``/`` and starts with ``/``,
    ``./``, ``../`` or ``~/``, holds two ``/`` or ends in a file extension, or is a bare
    file name with a common source, document or configuration extension (``.py``,
    ``.rs``, ``.ts``, ``.md``, ``.json``, ``.toml``, ...). URLs are not paths.
    Trailing ``.``, ``,``, ``:`` and ``)`` are not part of a path.
    """
    if "/" not in text and "." not in text:
        return []
    found: dict[str, None] = {}
    for match in _PATH.finditer(text):
        token = match.group(1).rstrip(".,:;")
        if token and _is_path(token):
            found.setdefault(token)
    return list(found)


def defined_names(text: str) -> list[str]:
    """The names ``text`` defines (``def x``, ``class X``, ``fn x``, ...), in order, without repeats."""
    return list(dict.fromkeys(match.group(1) for match in _DEFINITION.finditer(text)))


@attrs.frozen
class Excerpt:
    """What a cleared result keeps.

    Attributes:
        failures: Failure lines, verbatim.
        paths: File paths the result named.
        names: Names the result defined.
        lines: Lines of the original text.
    """

    failures: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    lines: int = 0

    def __bool__(self) -> bool:
        """True when the excerpt keeps anything."""
        return bool(self.failures or self.paths or self.names)

    def render(self) -> str:
        """The excerpt as the lines that follow the placeholder (empty when it keeps nothing).

        Format (each block only when it has something)::

            failure lines (2 of 57 lines):
            <failure line>
            <failure line>
            paths: <path> <path>
            names: <name> <name>
        """
        out: list[str] = []
        if self.failures:
            out.append(f"failure lines ({len(self.failures)} of {self.lines} lines):")
            out.extend(self.failures)
        if self.paths:
            out.append("paths: " + " ".join(self.paths))
        if self.names:
            out.append("names: " + " ".join(self.names))
        return "\n".join(out)


def _split(items: list[str], limit: int) -> list[str]:
    """At most ``limit`` items: the first half and the last half (the cause and the outcome)."""
    if len(items) <= limit:
        return items
    head = (limit + 1) // 2
    return items[:head] + items[len(items) - (limit - head) :]


def excerpt(
    text: str,
    *,
    errors: bool = True,
    paths: bool = True,
    names: bool = False,
    max_lines: int = 6,
    max_paths: int = 8,
    max_names: int = 8,
    max_tokens: int = 60,
    count: Callable[[str], int] | None = None,
) -> Excerpt:
    """The bounded excerpt a cleared result keeps (see the module docstring).

    With more than ``max_lines`` failure lines, the first half and the last half are
    kept (the first error is often the cause, the last the outcome). Paths and names keep
    their first ``max_paths`` / ``max_names``. Then, while the rendered excerpt holds more
    than ``max_tokens`` tokens (by ``count``, default ``len(text) // 4``), names go first,
    then paths, then failure lines from the end.

    Args:
        text: The tool result's text.
        errors: Keep failure lines.
        paths: Keep file paths.
        names: Keep defined names.
        max_lines: At most this many failure lines.
        max_paths: At most this many paths.
        max_names: At most this many names.
        max_tokens: At most this many tokens for the whole excerpt.
        count: Counts the tokens of a text (the capability passes the exact counter).
    """
    measure = count if count is not None else _estimate
    kept_failures = _split(failure_lines(text), max_lines) if errors and max_lines > 0 else []
    # A path or a name already visible in a kept failure line is not repeated.
    kept_paths = [p for p in named_paths(text) if not _shown(p, kept_failures)][:max_paths] if paths else []
    kept_names = [n for n in defined_names(text) if not _shown(n, kept_failures)][:max_names] if names else []
    lines = len(text.splitlines())
    result = Excerpt(tuple(kept_failures), tuple(kept_paths), tuple(kept_names), lines)
    while result and _over(result.render(), max_tokens, measure):
        result = _shrink(result)
    return result


def _over(text: str, limit: int, measure: Callable[[str], int]) -> bool:
    """Whether ``text`` holds more than ``limit`` tokens.

    A text of at most ``limit`` UTF-8 bytes cannot (every token is at least one byte): it is
    not counted.
    """
    return len(text.encode()) > limit and measure(text) > limit


def _shown(item: str, lines: list[str]) -> bool:
    return any(item in line for line in lines)


def _shrink(result: Excerpt) -> Excerpt:
    if result.names:
        return attrs.evolve(result, names=result.names[:-1])
    if result.paths:
        return attrs.evolve(result, paths=result.paths[:-1])
    return attrs.evolve(result, failures=result.failures[:-1])


def _estimate(text: str) -> int:
    return len(text) // 4


def text_counter(counter: object) -> Callable[[str], int] | None:
    """The ``count_text`` method of a token counter, or ``None`` when it has none.

    :class:`harness.tokens.TokenCounter` has one; a bare ``PartCounter`` may not.
    """
    function: object = getattr(counter, "count_text", None)
    return cast("Callable[[str], int]", function) if callable(function) else None


def text_of(content: Any) -> str:
    """A tool result's content as text: a string as it is, anything else as its JSON."""
    if isinstance(content, str):
        return content
    try:
        return json.dumps(content, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(content)
