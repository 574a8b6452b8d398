r"""Deterministic probes extracted from an uncompacted transcript, with no model.

A *probe* is a piece of the recorded conversation an agent may need again: a term of
the task, a user's constraint, a file path, an error line, or an identifier the next
recorded response uses. :func:`extract_probes` finds them all in one pass over the
transcript; :mod:`harness.eval.recall` then checks, request by request, which of them
are still visible in the context a stack really sent.

Every definition (the README section "Evaluating compaction" repeats them):

* **Text of a part** (:func:`part_texts`): a prompt's or a text part's content, a tool
  call's argument *values* (every string leaf of the arguments, not their JSON), a tool
  result's or a retry prompt's content (string leaves of structured content). Thinking
  counts as text of its response; tool names do not.
* **Terms of a text** (:func:`terms`): every maximal run of ASCII letters, digits and
  ``_ . / ~ -`` (a literal ``\n``, ``\t`` or ``\r`` escape separates terms), stripped of
  leading and trailing ``. - ~ /`` (and a leading ``./``); for a term holding ``/`` also
  each suffix after a ``/`` (``/testbed/a/b.py`` gives ``testbed/a/b.py``, ``a/b.py`` and
  ``b.py``), and for a term holding ``.`` or ``/`` each of its ``.``/``/``-separated
  components.
* **Identifier** (:func:`is_identifier`): a term of at least 3 characters that contains
  ``_``, ``.`` or ``/``, an upper-case letter after its first character (``camelCase``,
  ``HTTPError``), or a letter and a digit; or a number of at least 3 digits. Everything
  else (plain words) is not an identifier, nor are ``e.g``, ``i.e`` and ``etc``.
* **task**: the identifiers (terms as written, not their suffixes or components) of the
  user prompts of the first request that holds one, minus the terms of the recorded
  system prompt.
* **constraints**: the sentences of every user prompt (split at ``.``, ``!``, ``?``
  followed by white space, and at line ends) of 4 to 80 words that contain a requirement
  word: *must, should, shall, never, always, only, don't, do not, avoid, ensure, make
  sure, required, require, need to, needs to, have to, has to, cannot, can't,
  important*. Sentences of the system prompt are left out.
* **artifacts**: file paths in tool-call arguments and tool results (terms as written):
  terms whose last ``/``-component ends in a known source or document extension
  (``.py``, ``.rs``, ``.md``, ... :data:`ARTIFACT_EXTENSIONS`), or terms holding a ``/``
  whose last component has a letter and no ``.``; URLs are skipped.
* **errors**: in a tool result that reports a failure (a retry prompt answering a tool
  call; a non-zero ``<returncode>`` / ``exit code``; or any line that reads as an error),
  the lines that read as an error (an exception line ``SomeError: ...``,
  ``FAILED``/``ERROR``/``error:``/``fatal:`` lines, pytest's ``E   ...`` lines,
  ``No such file or directory``, ``command not found``, ``Permission denied``), stripped,
  10 to 400 characters long, not one of the generic lines (``Traceback (most recent call
  last):`` ...), at most the last :data:`MAX_ERROR_LINES_PER_RESULT` of each result.
* **continuation**: for request *i*, the identifiers (as written) of recorded response
  *i* (its text, thinking and tool-call arguments) that occur, among the terms, in an
  earlier message of the transcript, and not among the terms of the system prompt.
  **older continuation**: those of them that do not occur in the messages just added for
  request *i* (the previous response and the requests after it): what had to survive
  compaction.

Every probe class but continuation is deduplicated over the transcript: a probe is one
string, *due* from the first request whose uncompacted history holds it.
"""

from __future__ import annotations

__all__ = [
    "ARTIFACT_EXTENSIONS",
    "CONSTRAINT_WORDS",
    "MAX_ERROR_LINES_PER_RESULT",
    "PROBE_CLASSES",
    "Continuation",
    "Probe",
    "ProbeClass",
    "ProbeSet",
    "artifact_paths",
    "constraint_sentences",
    "error_lines",
    "extract_probes",
    "identifiers",
    "is_identifier",
    "part_texts",
    "primary_terms",
    "terms",
]

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, Final, Literal, TypeAlias

import attrs

from harness.core.messages import (
    CanonicalMessage,
    Part,
    RetryPromptPart,
    SystemPromptPart,
    TextPart,
    ThoughtPart,
    ToolCallPart,
    ToolReturnPart,
    UnknownPart,
    UserPromptPart,
)

ProbeClass: TypeAlias = Literal["task", "constraint", "artifact", "error"]
PROBE_CLASSES: Final[tuple[ProbeClass, ...]] = ("task", "constraint", "artifact", "error")
"""The deduplicated probe classes (continuation is per request, see :class:`Continuation`)."""

MAX_ERROR_LINES_PER_RESULT: Final = 5
"""Error lines kept per failing tool result (its last ones: the exception comes last)."""

CONSTRAINT_WORDS: Final = (
    "must",
    "should",
    "shall",
    "never",
    "always",
    "only",
    "don't",
    "do not",
    "avoid",
    "ensure",
    "make sure",
    "required",
    "require",
    "need to",
    "needs to",
    "have to",
    "has to",
    "cannot",
    "can't",
    "important",
)
"""Words that make a user sentence a constraint (matched case-insensitively, whole words)."""

ARTIFACT_EXTENSIONS: Final = frozenset(
    [
        "py",
        "pyi",
        "rs",
        "toml",
        "md",
        "rst",
        "txt",
        "json",
        "yaml",
        "yml",
        "cfg",
        "ini",
        "lock",
        "js",
        "ts",
        "tsx",
        "jsx",
        "c",
        "h",
        "cc",
        "cpp",
        "hpp",
        "go",
        "java",
        "kt",
        "rb",
        "sh",
        "bash",
        "zsh",
        "html",
        "css",
        "scss",
        "xml",
        "csv",
        "sql",
        "ipynb",
        "tex",
        "patch",
        "diff",
        "log",
        "conf",
        "env",
    ]
)
"""Extensions that make a term without ``/`` a file name."""

_TERM = re.compile(r"[A-Za-z0-9_./~-]+")
_STRIP = ".-~/"
_ESCAPES = re.compile(r"\\[nrt]")
_COMPONENT = re.compile(r"[./]")
_NOT_IDENTIFIERS: Final = frozenset({"e.g", "i.e", "etc", "..."})
_CONSTRAINT = re.compile(
    r"(?<![A-Za-z'])(?:" + "|".join(re.escape(w) for w in CONSTRAINT_WORDS) + r")(?![A-Za-z'])",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
_RETURN_CODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>|\bexit (?:code|status):?\s*(-?\d+)", re.I)
_ERROR_LINE = re.compile(
    r"^\s*(?:[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)\b:?"
    r"|E\s{2,}\S"
    r"|(?:FAILED|FAIL|ERROR|Error|error|fatal|FATAL|panic|thread '.*' panicked)\b"
    r")"
    r"|No such file or directory|command not found|Permission denied|ModuleNotFoundError"
    r"|Traceback \(most recent call last\)"
)
_GENERIC_ERRORS: Final = frozenset(
    {
        "Traceback (most recent call last):",
        "During handling of the above exception, another exception occurred:",
        "The above exception was the direct cause of the following exception:",
    }
)
_MIN_CONSTRAINT_WORDS: Final = 4
_MAX_CONSTRAINT_WORDS: Final = 80
_MIN_ERROR_CHARS: Final = 10
_MAX_ERROR_CHARS: Final = 400


# ---------------------------------------------------------------------------- text


def _leaves(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():  # pyright: ignore[reportUnknownVariableType]
            yield from _leaves(item)
    elif isinstance(value, list | tuple):
        for item in value:  # pyright: ignore[reportUnknownVariableType]
            yield from _leaves(item)
    elif value is not None:
        yield str(value)  # pyright: ignore[reportUnknownArgumentType]


def _call_args(part: ToolCallPart) -> Any:
    args = part.args
    if isinstance(args, str):
        try:
            return json.loads(args)
        except ValueError:
            return args
    return args


def part_texts(part: Part) -> list[str]:
    """The texts of ``part`` that probes are searched in (see the module docstring)."""
    if isinstance(part, SystemPromptPart | TextPart | ThoughtPart):
        return [part.content]
    if isinstance(part, UserPromptPart):
        return [part.text]
    if isinstance(part, ToolCallPart):
        return list(_leaves(_call_args(part)))
    if isinstance(part, ToolReturnPart | RetryPromptPart):
        return list(_leaves(part.content))
    if isinstance(part, UnknownPart):  # pyright: ignore[reportUnnecessaryIsInstance]
        return list(_leaves(dict(part.data)))
    return []  # pragma: no cover - every part kind is handled above


def _primary(text: str) -> list[str]:
    out: list[str] = []
    for raw in _TERM.findall(_ESCAPES.sub(" ", text)):
        term = (raw[2:] if raw.startswith("./") else raw).strip(_STRIP)
        if term:
            out.append(term)
    return out


def primary_terms(text: str) -> set[str]:
    """The terms of ``text`` as written: no path suffixes, no components (see :func:`terms`)."""
    return set(_primary(text))


def terms(text: str) -> set[str]:
    """Every term of ``text``, with path suffixes and components (see the module docstring)."""
    found: set[str] = set()
    for term in _primary(text):
        found.add(term)
        if "/" in term:
            pieces = term.split("/")
            for index in range(1, len(pieces)):
                suffix = "/".join(pieces[index:]).strip(_STRIP)
                if suffix:
                    found.add(suffix)
        if "/" in term or "." in term:
            for piece in _COMPONENT.split(term):
                piece = piece.strip(_STRIP)
                if piece:
                    found.add(piece)
    return found


def is_identifier(term: str) -> bool:
    """Whether ``term`` is an identifier: a path, a dotted or snake name, camelCase, or a number."""
    if len(term) < 3 or term in _NOT_IDENTIFIERS:
        return False
    if term.isdigit():
        return True
    if "_" in term or "." in term or "/" in term:
        return any(c.isalnum() for c in term)
    if any(c.isupper() for c in term[1:]) and any(c.islower() for c in term):
        return True
    return any(c.isdigit() for c in term) and any(c.isalpha() for c in term)


def identifiers(texts: Iterable[str], *, expanded: bool = False) -> set[str]:
    """The identifiers among the terms of ``texts`` as written (``expanded``: among :func:`terms`)."""
    found: set[str] = set()
    for text in texts:
        found.update(t for t in (terms(text) if expanded else primary_terms(text)) if is_identifier(t))
    return found


def constraint_sentences(text: str) -> list[str]:
    """The sentences of a user prompt that state a requirement, in order, stripped."""
    out: list[str] = []
    for sentence in _SENTENCE_END.split(text):
        sentence = sentence.strip()
        words = len(sentence.split())
        if _MIN_CONSTRAINT_WORDS <= words <= _MAX_CONSTRAINT_WORDS and _CONSTRAINT.search(sentence):
            out.append(sentence)
    return out


def _is_path(term: str) -> bool:
    last = term.rsplit("/", 1)[-1]
    stem, dot, extension = last.rpartition(".")
    if dot:
        return bool(stem) and extension.lower() in ARTIFACT_EXTENSIONS
    return "/" in term and any(c.isalpha() for c in last)


def artifact_paths(text: str) -> list[str]:
    """The file paths of ``text``, in order of appearance, deduplicated (URLs skipped)."""
    out: list[str] = []
    seen: set[str] = set()
    text = _ESCAPES.sub(" ", text)
    for match in _TERM.finditer(text):
        raw = match.group()
        if text[max(0, match.start() - 1) : match.start()] == ":" or raw.startswith("//"):
            continue  # the path of a URL (scheme://host/...)
        term = raw[2:] if raw.startswith("./") else raw
        term = term.strip(_STRIP)
        if term and _is_path(term) and term not in seen:
            seen.add(term)
            out.append(term)
    return out


def _reports_failure(part: ToolReturnPart | RetryPromptPart, text: str, lines: list[str]) -> bool:
    if isinstance(part, RetryPromptPart):
        return True
    for match in _RETURN_CODE.finditer(text):
        code = match.group(1) or match.group(2)
        if code is not None and int(code) != 0:
            return True
    return bool(lines)


def error_lines(part: ToolReturnPart | RetryPromptPart) -> list[str]:
    """The distinctive error lines of a tool result that reports a failure (see the module docstring)."""
    text = "\n".join(part_texts(part))
    candidates: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if (
            _ERROR_LINE.search(line)
            and _MIN_ERROR_CHARS <= len(stripped) <= _MAX_ERROR_CHARS
            and stripped not in _GENERIC_ERRORS
            and stripped not in candidates
        ):
            candidates.append(stripped)
    if not _reports_failure(part, text, candidates):
        return []
    return candidates[-MAX_ERROR_LINES_PER_RESULT:]


# ---------------------------------------------------------------------------- probes


@attrs.frozen
class Probe:
    """One probe.

    Attributes:
        index: Its number in :attr:`ProbeSet.probes`.
        cls: Its class.
        text: The string that must be visible.
        term: ``True``: visible when it is a term of one part (:func:`terms`);
            ``False``: visible when it is a substring of one part's text.
        due: The 1-based request from which it is scored (its source is in the history).
    """

    index: int
    cls: ProbeClass
    text: str
    term: bool
    due: int


@attrs.frozen
class Continuation:
    """The continuation probes of one request.

    Attributes:
        request: The 1-based request.
        identifiers: Identifiers of the recorded response to it that occur earlier.
        older: Those of them absent from the messages just added for this request.
    """

    request: int
    identifiers: frozenset[str]
    older: frozenset[str]


@attrs.frozen
class ProbeSet:
    """Every probe of one transcript.

    Attributes:
        probes: The deduplicated probes (task, constraint, artifact, error).
        continuations: One entry per request (per recorded response), in order.
        requests: How many requests a full replay makes (recorded responses).
    """

    probes: tuple[Probe, ...]
    continuations: tuple[Continuation, ...]
    requests: int

    def of(self, cls: ProbeClass) -> list[Probe]:
        """The probes of one class, in order."""
        return [p for p in self.probes if p.cls == cls]

    def texts(self, cls: ProbeClass) -> list[str]:
        """The strings of the probes of one class, in order."""
        return [p.text for p in self.probes if p.cls == cls]


class _Builder:
    def __init__(self) -> None:
        self.probes: list[Probe] = []
        self.seen: set[tuple[ProbeClass, str]] = set()

    def add(self, cls: ProbeClass, text: str, *, term: bool, due: int) -> None:
        key = (cls, text)
        if key not in self.seen:
            self.seen.add(key)
            self.probes.append(Probe(len(self.probes), cls, text, term, due))


def _system_texts(history: Sequence[CanonicalMessage]) -> list[str]:
    return [
        p.content for m in history if m.kind == "request" for p in m.parts if isinstance(p, SystemPromptPart)
    ]


def extract_probes(history: Sequence[CanonicalMessage]) -> ProbeSet:
    """Extract every probe of an uncompacted transcript (deterministic, no model).

    Request *i* (1-based) is the request answered by the *i*-th recorded response: its
    uncompacted history is every message before that response.
    """
    system = _system_texts(history)
    system_terms: set[str] = set()
    for text in system:
        system_terms.update(terms(text))  # expanded: what the system prompt shows
    system_sentences = {s for text in system for s in constraint_sentences(text)}
    builder = _Builder()
    continuations: list[Continuation] = []
    last_seen: dict[str, int] = {}  # term -> index of the last message holding it
    request = 1  # the request whose uncompacted history the current message enters
    previous_response = -1
    task_done = False
    for position, message in enumerate(history):
        if message.kind == "response":
            texts = [t for p in message.parts for t in part_texts(p)]
            used = identifiers(texts) - system_terms
            earlier = frozenset(t for t in used if t in last_seen)
            older = frozenset(t for t in earlier if last_seen[t] < previous_response)
            continuations.append(Continuation(request, earlier, older))
            request += 1
            previous_response = position
            for term in identifiers(texts, expanded=True):
                last_seen[term] = position
            for part in message.parts:
                if isinstance(part, ToolCallPart):
                    for text in part_texts(part):
                        for path in artifact_paths(text):
                            builder.add("artifact", path, term=True, due=request)
            continue
        users = [p for p in message.parts if isinstance(p, UserPromptPart)]
        if users and not task_done:
            task_done = True
            for term in sorted(identifiers(p.text for p in users) - system_terms):
                builder.add("task", term, term=True, due=request)
        for part in message.parts:
            if isinstance(part, SystemPromptPart):
                continue
            texts = part_texts(part)
            for term in identifiers(texts, expanded=True):
                last_seen[term] = position
            if isinstance(part, UserPromptPart):
                for sentence in constraint_sentences(part.text):
                    if sentence not in system_sentences:
                        builder.add("constraint", sentence, term=False, due=request)
            elif isinstance(part, ToolReturnPart) or (
                isinstance(part, RetryPromptPart) and part.answers_tool_call
            ):
                for text in texts:
                    for path in artifact_paths(text):
                        builder.add("artifact", path, term=True, due=request)
                for line in error_lines(part):
                    builder.add("error", line, term=False, due=request)
    return ProbeSet(tuple(builder.probes), tuple(continuations), len(continuations))
