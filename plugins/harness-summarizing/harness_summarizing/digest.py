"""A deterministic, offline summarizer: the structural digest.

The digest needs no model and cannot fail. It records what a coding agent's history is
mostly about, read from the structure of the messages rather than their prose:

* the user's requests, verbatim (each bounded);
* files read and files written, from tool names and arguments (``read_file``/``Read``/
  ``view``/``open`` and shell ``cat``/``head``/``tail``/``nl``/``sed -n``/``less`` are
  reads; ``write_file``/``Write``/``Edit``/``str_replace``/``create`` and shell
  ``sed -i``/``tee``/``touch``/``cp``/``mv``/``>`` redirects are writes);
* shell commands run, with their outcome (exit status from ``<returncode>`` tags,
  ``exit code N`` text or ``returncode``/``exit_code`` keys; otherwise ``error`` when an
  error marker is seen, else ``ok``) and the first line of their output;
* errors seen (the last line of tracebacks, ``...Error:`` lines, non-zero exits, retry
  prompts);
* the last state: the newest assistant text.

Incremental digests merge exactly: the structured payload is kept in the summary part's
harness mark, and the markdown rendering is what the model reads.
"""

from __future__ import annotations

__all__ = ["Digest", "StructuralDigest", "extract_file_paths"]

import json
import re
import shlex
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from harness.core import (
    CanonicalMessage,
    RetryPromptPart,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
    harness_mark,
)
from harness_summarizing.prompt import bound_text
from harness_summarizing.summarizer import Summary, SummaryRequest

_READ_TOOLS = frozenset(
    {"read_file", "read", "view", "view_file", "open", "open_file", "cat", "readfile", "notebookread"}
)
_WRITE_TOOLS = frozenset(
    {
        "write_file",
        "write",
        "edit",
        "multiedit",
        "edit_file",
        "str_replace",
        "create_file",
        "create",
        "notebookedit",
        "writefile",
        "replace_in_file",
        "insert",
        "append_file",
    }
)
_EDITOR_TOOLS = frozenset({"str_replace_editor", "str_replace_based_edit_tool", "text_editor"})
_PATH_KEYS = ("path", "file_path", "filename", "file", "target_file", "notebook_path", "filepath")
_COMMAND_KEYS = ("command", "cmd", "script")
_SHELL_READERS = frozenset({"cat", "head", "tail", "nl", "less", "more", "bat", "open"})
_SHELL_WRITERS = frozenset({"tee", "touch", "create"})
_SEPARATORS = frozenset({"|", "||", "&&", ";", "&", "(", ")", ";;", "|&"})
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
_RETURNCODE_TAG = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_RETURNCODE_TEXT = re.compile(
    r"(?i)\b(?:exit(?:ed)?(?:\s+with)?(?:\s+code|\s+status)|return\s*code|returncode|exit_code)"
    r"\s*[:=]?\s*(-?\d+)"
)
_OUTPUT_TAG = re.compile(r"<output>(.*?)</output>", re.DOTALL)
_ERROR_LINE = re.compile(
    r"^\s*(?:[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt)\b.*"
    r"|(?i:error|fatal|failed|fail)\b[:\s].*"
    r"|.*\b(?:command not found|No such file or directory|Permission denied)\b.*"
    r"|.*<tool_use_error>.*)$"
)


def _str_list(value: object) -> list[str]:
    if isinstance(value, list):
        items: list[object] = list(value)  # pyright: ignore[reportUnknownArgumentType]
        return [str(v) for v in items]
    return []


@attrs.define
class Digest:
    """The structured payload of a structural digest (JSON round-trippable).

    Attributes:
        messages: Messages summarized so far (over every compaction).
        tool_calls: Tool calls summarized so far.
        requests: The user's requests, verbatim (each bounded).
        requests_omitted: Requests dropped to respect the bound.
        files_read: Paths read, in first-seen order.
        files_written: Paths written, in first-seen order.
        commands: ``{"command", "outcome", "output"}`` dicts, oldest first.
        commands_omitted: Commands dropped to respect the bound.
        tools: Calls per non-shell tool name.
        errors: Errors seen, oldest first.
        errors_omitted: Errors dropped to respect the bound.
        last_state: The newest assistant text, bounded.
        earlier_summary: Text of an earlier (model-written) summary this digest continues.
    """

    messages: int = 0
    tool_calls: int = 0
    requests: list[str] = attrs.field(factory=list[str])
    requests_omitted: int = 0
    files_read: list[str] = attrs.field(factory=list[str])
    files_written: list[str] = attrs.field(factory=list[str])
    commands: list[dict[str, str]] = attrs.field(factory=list[dict[str, str]])
    commands_omitted: int = 0
    tools: dict[str, int] = attrs.field(factory=dict[str, int])
    errors: list[str] = attrs.field(factory=list[str])
    errors_omitted: int = 0
    last_state: str | None = None
    earlier_summary: str | None = None

    def to_json(self) -> dict[str, Any]:
        """Return the payload as a JSON-compatible dict."""
        return attrs.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Digest:
        """Read a payload written by :meth:`to_json` (unknown or malformed keys are ignored)."""
        commands_raw: object = data.get("commands")
        commands: list[dict[str, str]] = []
        if isinstance(commands_raw, list):
            for item in commands_raw:  # pyright: ignore[reportUnknownVariableType]
                if isinstance(item, Mapping):
                    commands.append({str(k): str(v) for k, v in item.items()})  # pyright: ignore[reportUnknownVariableType,reportUnknownArgumentType]
        tools_raw: object = data.get("tools")
        tools: dict[str, int] = {}
        if isinstance(tools_raw, Mapping):
            for k, v in tools_raw.items():  # pyright: ignore[reportUnknownVariableType]
                if isinstance(v, int):
                    tools[str(k)] = v  # pyright: ignore[reportUnknownArgumentType]

        def _int(key: str) -> int:
            value = data.get(key)
            return value if isinstance(value, int) and not isinstance(value, bool) else 0

        def _opt_str(key: str) -> str | None:
            value = data.get(key)
            return value if isinstance(value, str) else None

        return cls(
            messages=_int("messages"),
            tool_calls=_int("tool_calls"),
            requests=_str_list(data.get("requests")),
            requests_omitted=_int("requests_omitted"),
            files_read=_str_list(data.get("files_read")),
            files_written=_str_list(data.get("files_written")),
            commands=commands,
            commands_omitted=_int("commands_omitted"),
            tools=tools,
            errors=_str_list(data.get("errors")),
            errors_omitted=_int("errors_omitted"),
            last_state=_opt_str("last_state"),
            earlier_summary=_opt_str("earlier_summary"),
        )


def _strip_heredocs(command: str) -> str:
    """Drop here-document bodies (their text is data, not shell syntax)."""
    lines = command.split("\n")
    kept: list[str] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        kept.append(line)
        delimiters = [m.group(2) for m in _HEREDOC.finditer(line)]
        index += 1
        for delimiter in delimiters:
            while index < len(lines) and lines[index].strip() != delimiter:
                index += 1
            index += 1
    return "\n".join(kept)


def _tokens(line: str) -> list[str]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:
        return line.split()


def _is_path(token: str) -> bool:
    return bool(token) and not token.startswith(("-", "&", "$(")) and not token.startswith("/dev/")


def _segments(tokens: list[str]) -> Iterable[list[str]]:
    segment: list[str] = []
    for token in tokens:
        if token in _SEPARATORS:
            if segment:
                yield segment
            segment = []
        else:
            segment.append(token)
    if segment:
        yield segment


def _file_args(args: list[str], *, skip_values: frozenset[str] = frozenset()) -> list[str]:
    files: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg in skip_values:
            skip = True
            continue
        if arg.startswith(("-", "+")):
            continue
        if _is_path(arg):
            files.append(arg)
    return files


def _sed_files(args: list[str]) -> tuple[list[str], list[str]]:
    in_place = any(
        a == "-i" or (a.startswith("-i") and not a.startswith("--")) or a.startswith("--in-place")
        for a in args
    )
    quiet = any(
        a in ("-n", "--quiet", "--silent") or (a.startswith("-") and "n" in a[1:] and len(a) < 5)
        for a in args
    )
    has_script_option = any(a in ("-e", "--expression", "-f") for a in args)
    positional = _file_args(args, skip_values=frozenset({"-e", "--expression", "-f"}))
    files = positional if has_script_option else positional[1:]
    if in_place:
        return [], files
    return (files, []) if quiet or files else ([], [])


def _segment_files(segment: list[str], current: list[str]) -> tuple[list[str], list[str]]:
    """Reads and writes of one simple command; ``current`` tracks SWE-agent's open file."""
    reads: list[str] = []
    writes: list[str] = []
    words: list[str] = []
    index = 0
    while index < len(segment):
        token = segment[index]
        if token in (">", ">>", ">|", "&>", "&>>"):
            if index + 1 < len(segment) and _is_path(segment[index + 1]):
                writes.append(segment[index + 1])
            index += 2
            continue
        if token in (">&", "<&", "<<", "<<-", "<<<"):
            index += 2
            continue
        if token == "<":
            if index + 1 < len(segment) and _is_path(segment[index + 1]):
                reads.append(segment[index + 1])
            index += 2
            continue
        words.append(token)
        index += 1
    while words and (words[0] in ("sudo", "env") or ("=" in words[0] and not words[0].startswith("="))):
        words = words[1:]
    if words and words[-1].isdigit() and writes:
        words = words[:-1]  # "2" of "2> file"
    if not words:
        return reads, writes
    program = words[0].rsplit("/", 1)[-1]
    args = words[1:]
    if program in _SHELL_READERS:
        files = _file_args(args, skip_values=frozenset({"-n", "-c", "--lines", "--bytes"}))
        if program == "open":
            files = files[:1]
            if files:
                current[:] = files
        reads.extend(files)
    elif program == "sed":
        sed_reads, sed_writes = _sed_files(args)
        reads.extend(sed_reads)
        writes.extend(sed_writes)
    elif program in _SHELL_WRITERS:
        files = _file_args(args)
        if program == "create":
            files = files[:1]
            if files:
                current[:] = files
        writes.extend(files)
    elif program in ("cp", "mv", "install"):
        files = _file_args(args)
        if len(files) >= 2:
            writes.append(files[-1])
    elif program in ("edit", "insert", "append") and current:
        writes.append(current[0])
    return reads, writes


def extract_file_paths(command: str, *, current: list[str] | None = None) -> tuple[list[str], list[str]]:
    """Return the files a shell command reads and writes (a heuristic over common tools).

    Args:
        command: The shell command line(s).
        current: SWE-agent's currently open file, updated by ``open``/``create`` (a one-item
            list used as a mutable cell); ``edit`` writes it.

    Returns:
        ``(reads, writes)``, each in command order (may hold duplicates).
    """
    cell = current if current is not None else []
    reads: list[str] = []
    writes: list[str] = []
    for line in _strip_heredocs(command).split("\n"):
        for segment in _segments(_tokens(line)):
            seg_reads, seg_writes = _segment_files(segment, cell)
            reads.extend(seg_reads)
            writes.extend(seg_writes)
    return reads, writes


def _content_text(content: object) -> str:
    if isinstance(content, str):
        return content
    return _ENCODER.encode(content)


def _first_line(text: str, limit: int) -> str:
    for line in text.splitlines():
        stripped = line.strip()
        if stripped:
            return bound_text(stripped, limit)
    return ""


_KEPT_HEAD_CHARS = 120
_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)

_ERROR_HINTS = (
    "error",
    "fail",
    "fatal",
    "traceback",
    "exception",
    "exit",
    "interrupt",
    "not found",
    "no such file",
    "denied",
    "tool_use_error",
)


def _error_line(text: str) -> str | None:
    lowered = text.lower()
    if not any(hint in lowered for hint in _ERROR_HINTS):
        return None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if any(line.startswith("Traceback (most recent call last)") for line in lines):
        for line in reversed(lines):
            if _ERROR_LINE.match(line):
                return line
        return lines[-1]
    for line in lines:
        if _ERROR_LINE.match(line):
            return line
    return None


def _mapping_outcome(content: Mapping[str, object]) -> tuple[int | None, str]:
    code: int | None = None
    for key in ("returncode", "exit_code", "exit_status", "exitCode", "status_code"):
        value = content.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            code = value
            break
    output_parts = [
        str(content[key]) for key in ("stdout", "output", "content", "stderr", "error") if content.get(key)
    ]
    return code, "\n".join(output_parts) if output_parts else _content_text(content)


def _outcome(content: object) -> tuple[int | None, str]:
    """Exit code (when reported) and the output text of a tool return."""
    if isinstance(content, Mapping):
        mapping: Mapping[str, object] = content  # pyright: ignore[reportUnknownVariableType]
        return _mapping_outcome(mapping)
    text = _content_text(content)
    match = _RETURNCODE_TAG.search(text)
    if match is None:
        head = text[:300]
        match = _RETURNCODE_TEXT.search(head) or _RETURNCODE_TEXT.search(text[-300:])
    code = int(match.group(1)) if match else None
    output_match = _OUTPUT_TAG.search(text)
    output = output_match.group(1) if output_match else _RETURNCODE_TAG.sub("", text)
    return code, output


def _tool_paths(args: Mapping[str, Any]) -> list[str]:
    paths: list[str] = []
    for key in _PATH_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value:
            paths.append(value)
    for key in ("paths", "files"):
        value = args.get(key)
        if isinstance(value, list):
            paths.extend(str(v) for v in value if isinstance(v, str))  # pyright: ignore[reportUnknownVariableType]
    return paths


def _command_of(args: Mapping[str, Any]) -> str | None:
    for key in _COMMAND_KEYS:
        value = args.get(key)
        if isinstance(value, str) and value.strip():
            return value
        if isinstance(value, list) and value and all(isinstance(v, str) for v in value):  # pyright: ignore[reportUnknownVariableType]
            return shlex.join(value)  # pyright: ignore[reportUnknownArgumentType]
    return None


def _add_unique(target: list[str], items: Iterable[str]) -> None:
    seen = set(target)
    for item in items:
        if item not in seen:
            target.append(item)
            seen.add(item)


@attrs.define
class _Call:
    tool: str
    command: str | None
    is_read: bool


@attrs.define
class StructuralDigest:
    """Deterministic offline summarizer (usable as ``summarizer=``).

    It is also :class:`~harness_summarizing.SummarizingCompaction`'s fallback when a
    model summarizer fails, and its default when no model is available.

    Attributes:
        max_request_chars: Characters kept of each user request (head, then an omission note).
        max_requests: User requests kept (the first one and the newest ones).
        max_files: Paths kept per list (the newest ones).
        max_commands: Commands kept (the newest ones).
        max_errors: Errors kept (the newest ones).
        max_output_chars: Characters kept of a command's first output line and of an error.
        max_command_chars: Characters kept of each command line.
        max_state_chars: Characters kept of the last assistant text.
    """

    max_request_chars: int = 2000
    max_requests: int = 30
    max_files: int = 50
    max_commands: int = 30
    max_errors: int = 20
    max_output_chars: int = 160
    max_command_chars: int = 200
    max_state_chars: int = 1500

    def __attrs_post_init__(self) -> None:
        for field in attrs.fields(StructuralDigest):
            value = getattr(self, field.name)
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"StructuralDigest.{field.name} must be a positive integer, got {value!r}.")

    def digest(
        self,
        messages: Sequence[CanonicalMessage],
        previous: Digest | None = None,
        *,
        kept_verbatim: Iterable[object] = (),
    ) -> Digest:
        """Digest ``messages``, continuing ``previous`` when given.

        Args:
            messages: The messages to digest (summary and request-scoped parts are skipped;
                parts other capabilities marked, e.g. cleared results, are digested).
            previous: The digest to extend (not modified).
            kept_verbatim: Parts kept word for word beside the summary; user requests among
                them are recorded by their head only, as a reference, not repeated in full.

        Returns:
            A new digest covering ``previous`` plus ``messages``.
        """
        base = Digest() if previous is None else Digest.from_json(previous.to_json())
        base.messages += len(messages)
        kept = {id(part) for part in kept_verbatim}
        calls: dict[str, _Call] = {}
        current_file: list[str] = []
        new_requests: list[str] = []
        reads: list[str] = []
        writes: list[str] = []
        for message in messages:
            for part in message.parts:
                if getattr(part, "metadata", None) is not None:
                    mark = harness_mark(part)
                    if mark is not None and (mark.get("kind") == "summary" or mark.get("request_scoped")):
                        continue
                if isinstance(part, UserPromptPart):
                    text = part.text.strip()
                    if text and id(part) in kept:
                        new_requests.append(f"(kept verbatim above) {bound_text(text, _KEPT_HEAD_CHARS)}")
                    elif text:
                        new_requests.append(bound_text(text, self.max_request_chars))
                elif isinstance(part, TextPart):
                    if part.content.strip():
                        base.last_state = bound_text(part.content.strip(), self.max_state_chars)
                elif isinstance(part, ToolCallPart):
                    base.tool_calls += 1
                    calls[part.tool_call_id] = self._call(part, current_file, reads, writes, base)
                elif isinstance(part, ToolReturnPart):
                    self._tool_return(part, calls.get(part.tool_call_id), base)
                elif isinstance(part, RetryPromptPart):
                    where = part.tool_name or "model"
                    first = _first_line(_content_text(part.content), self.max_output_chars)
                    self._error(base, f"retry [{where}]: {first}")
        self._merge_requests(base, new_requests)
        _add_unique(base.files_read, reads)
        _add_unique(base.files_written, writes)
        base.files_read = base.files_read[-self.max_files :]
        base.files_written = base.files_written[-self.max_files :]
        return base

    def _call(
        self,
        part: ToolCallPart,
        current_file: list[str],
        reads: list[str],
        writes: list[str],
        digest: Digest,
    ) -> _Call:
        try:
            args = part.args_as_dict()
        except ValueError:
            args = {}
        name = part.tool_name.lower()
        command = _command_of(args)
        if name in _EDITOR_TOOLS:
            sub = str(args.get("command", "")).lower()
            paths = _tool_paths(args)
            (reads if sub == "view" else writes).extend(paths)
            digest.tools[part.tool_name] = digest.tools.get(part.tool_name, 0) + 1
            return _Call(part.tool_name, None, sub == "view")
        if name in _READ_TOOLS and not command:
            reads.extend(_tool_paths(args))
            digest.tools[part.tool_name] = digest.tools.get(part.tool_name, 0) + 1
            return _Call(part.tool_name, None, True)
        if name in _WRITE_TOOLS and not command:
            writes.extend(_tool_paths(args))
            digest.tools[part.tool_name] = digest.tools.get(part.tool_name, 0) + 1
            return _Call(part.tool_name, None, False)
        if command is not None:
            cmd_reads, cmd_writes = extract_file_paths(command, current=current_file)
            reads.extend(cmd_reads)
            writes.extend(cmd_writes)
            return _Call(part.tool_name, command, bool(cmd_reads) and not cmd_writes)
        digest.tools[part.tool_name] = digest.tools.get(part.tool_name, 0) + 1
        return _Call(part.tool_name, None, False)

    def _tool_return(self, part: ToolReturnPart, call: _Call | None, digest: Digest) -> None:
        if call is not None and call.is_read and call.command is None:
            return  # file contents: error-like lines are data, not errors
        code, output = _outcome(part.content)
        error = _error_line(output) if code is None or code != 0 else None
        if code is not None and code == 0:
            error = None
        if call is not None and call.command is not None:
            command = bound_text(" ".join(call.command.split()), self.max_command_chars)
            outcome = f"exit {code}" if code is not None else "error" if error else "ok"
            digest.commands.append(
                {"command": command, "outcome": outcome, "output": _first_line(output, self.max_output_chars)}
            )
            if len(digest.commands) > self.max_commands:
                digest.commands_omitted += len(digest.commands) - self.max_commands
                digest.commands = digest.commands[-self.max_commands :]
            if code not in (None, 0) or error:
                detail = error or _first_line(output, self.max_output_chars) or "no output"
                short = bound_text(command, 80)
                self._error(digest, f"`{short}` ({outcome}): {bound_text(detail, self.max_output_chars)}")
            return
        if call is not None and call.is_read:
            return  # file contents: error-like lines are data, not errors
        if error:
            tool = part.tool_name or (call.tool if call else "tool")
            self._error(digest, f"{tool}: {bound_text(error, self.max_output_chars)}")

    def _error(self, digest: Digest, text: str) -> None:
        if digest.errors and digest.errors[-1] == text:
            return
        digest.errors.append(text)
        if len(digest.errors) > self.max_errors:
            digest.errors_omitted += len(digest.errors) - self.max_errors
            digest.errors = digest.errors[-self.max_errors :]

    def _merge_requests(self, digest: Digest, new_requests: list[str]) -> None:
        digest.requests.extend(new_requests)
        excess = len(digest.requests) - self.max_requests
        if excess > 0:
            digest.requests = digest.requests[:1] + digest.requests[1 + excess :]
            digest.requests_omitted += excess

    def render(self, digest: Digest) -> str:
        """Render ``digest`` as markdown for the model."""
        out = [
            f"Structural digest of {digest.messages} earlier messages ({digest.tool_calls} tool calls), "
            "made without a model."
        ]
        if digest.earlier_summary:
            out += ["", "## Earlier summary", digest.earlier_summary]
        if digest.requests:
            out += ["", "## User requests (verbatim)"]
            for index, request in enumerate(digest.requests, 1):
                out.append(f"{index}. " + request.replace("\n", "\n   "))
                if index == 1 and digest.requests_omitted:
                    out.append(f"   …[{digest.requests_omitted} later requests omitted]")
        out += _section("Files read", digest.files_read)
        out += _section("Files written", digest.files_written)
        if digest.commands:
            title = "## Commands run"
            if digest.commands_omitted:
                title += f" ({digest.commands_omitted} older commands omitted)"
            out += ["", title]
            for command in digest.commands:
                line = f"- `{command.get('command', '')}` → {command.get('outcome', '?')}"
                if command.get("output"):
                    line += f": {command['output']}"
                out.append(line)
        if digest.tools:
            out += ["", "## Other tool calls"]
            out.append(", ".join(f"{name} x{count}" for name, count in sorted(digest.tools.items())))
        if digest.errors:
            title = "## Errors seen"
            if digest.errors_omitted:
                title += f" ({digest.errors_omitted} older errors omitted)"
            out += ["", title, *(f"- {error}" for error in digest.errors)]
        if digest.last_state:
            out += ["", "## Last state", digest.last_state]
        return "\n".join(out)

    async def __call__(self, request: SummaryRequest) -> Summary:
        """Summarize ``request`` (continuing its previous digest or summary)."""
        return self.summarize(request)

    def summarize(self, request: SummaryRequest) -> Summary:
        """Synchronous form of :meth:`__call__`."""
        previous: Digest | None = None
        if request.previous_digest is not None:
            previous = Digest.from_json(request.previous_digest)
        elif request.previous_summary:
            previous = Digest(earlier_summary=request.previous_summary)
        digest = self.digest(request.messages, previous, kept_verbatim=request.kept_verbatim)
        return Summary(text=self.render(digest), digest=digest.to_json())


def _section(title: str, items: Sequence[str]) -> list[str]:
    if not items:
        return []
    return ["", f"## {title}", *(f"- {item}" for item in items)]
