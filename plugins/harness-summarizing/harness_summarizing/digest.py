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
from collections.abc import Callable, Iterable, Mapping, Sequence
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
from harness_summarizing.salient import NameTally, extract_names, failure_lines
from harness_summarizing.shell import extract_file_paths
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
_RETURNCODE_TAG = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
_RETURNCODE_TEXT = re.compile(
    r"(?i)\b(?:exit(?:ed)?(?:\s+with)?(?:\s+code|\s+status)|return\s*code|returncode|exit_code)"
    r"\s*[:=]?\s*(-?\d+)"
)
_OUTPUT_TAG = re.compile(r"<output>(.*?)</output>", re.DOTALL)


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
        names: Identifiers seen (paths, dotted, snake/camel case), most salient first.
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
    names: list[str] = attrs.field(factory=list[str])
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
            names=_str_list(data.get("names")),
            earlier_summary=_opt_str("earlier_summary"),
        )


def _content_text(content: object) -> str:
    if isinstance(content, str):
        return content
    return _ENCODER.encode(content)


def _error_key(entry: str) -> str:
    """What identifies an error entry: its failure lines, not the command that printed them."""
    detail = entry.split("): ", 1)[-1] if entry.startswith("`") else entry
    return detail if len(detail) >= 16 else entry  # "no output" and the like say nothing alone


def _args_text(part: ToolCallPart) -> str:
    """The string values of a call's arguments (commands, scripts, paths), one per line."""
    args = part.args
    if isinstance(args, str):
        return args
    if isinstance(args, Mapping):
        values: list[str] = []
        for value in args.values():  # pyright: ignore[reportUnknownVariableType]
            values.append(value if isinstance(value, str) else _ENCODER.encode(value))
        return "\n".join(values)
    return ""


def _first_line(text: str, limit: int) -> str:
    for line in text.splitlines():
        stripped = line.strip()
        if stripped:
            return bound_text(stripped, limit)
    return ""


_KEPT_HEAD_CHARS = 120
_ENCODER = json.JSONEncoder(ensure_ascii=False, default=str)


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
        max_names: Identifiers kept (the most salient: frequent, recent, written by the
            agent rather than only read).
        max_error_lines: Failure lines kept verbatim per failing tool output.
        max_error_chars: Characters kept of each failure line.
    """

    max_request_chars: int = 2000
    max_requests: int = 30
    max_files: int = 50
    max_commands: int = 30
    max_errors: int = 40
    max_output_chars: int = 160
    max_command_chars: int = 200
    max_state_chars: int = 1500
    max_names: int = 200
    max_error_lines: int = 3
    max_error_chars: int = 300

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
        tally = NameTally()
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
                    if mark is not None and mark.get("kind") and isinstance(part, UserPromptPart):
                        continue  # a note another capability wrote (a receipt), not a request
                if isinstance(part, UserPromptPart):
                    text = part.text.strip()
                    if id(part) not in kept:  # a request kept verbatim shows its names itself
                        tally.add(extract_names(text), 2.0)
                    if text and id(part) in kept:
                        new_requests.append(f"(kept verbatim above) {bound_text(text, _KEPT_HEAD_CHARS)}")
                    elif text:
                        new_requests.append(bound_text(text, self.max_request_chars))
                elif isinstance(part, TextPart):
                    if part.content.strip():
                        base.last_state = bound_text(part.content.strip(), self.max_state_chars)
                        tally.add(extract_names(part.content), 2.0)
                elif isinstance(part, ToolCallPart):
                    base.tool_calls += 1
                    calls[part.tool_call_id] = self._call(part, current_file, reads, writes, base)
                    tally.add(extract_names(_args_text(part)), 3.0)
                elif isinstance(part, ToolReturnPart):
                    self._tool_return(part, calls.get(part.tool_call_id), base)
                    tally.add(extract_names(_content_text(part.content)), 1.0)
                elif isinstance(part, RetryPromptPart):
                    where = part.tool_name or "model"
                    text = _content_text(part.content)
                    lines = failure_lines(text, limit=self.max_error_lines, max_chars=self.max_error_chars)
                    first = " | ".join(lines) or _first_line(text, self.max_error_chars)
                    self._error(base, f"retry [{where}]: {first}")
                    tally.add(extract_names(text), 1.0)
        self._merge_requests(base, new_requests)
        _add_unique(base.files_read, reads)
        _add_unique(base.files_written, writes)
        base.files_read = base.files_read[-self.max_files :]
        base.files_written = base.files_written[-self.max_files :]
        fresh = tally.top(self.max_names)
        seen = set(fresh)
        base.names = [*fresh, *(n for n in base.names if n not in seen)][: self.max_names]
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
        # A failure is a non-zero exit or lines that read as one (a script can print an
        # error and exit 0); the output of a successful read is data, not a failure.
        data = code == 0 and call is not None and call.is_read
        lines = (
            [] if data else failure_lines(output, limit=self.max_error_lines, max_chars=self.max_error_chars)
        )
        error = " | ".join(lines) or None
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
                detail = error or _first_line(output, self.max_error_chars) or "no output"
                short = bound_text(command, 80)
                self._error(digest, f"`{short}` ({outcome}): {detail}")
            return
        if call is not None and call.is_read:
            return  # file contents: error-like lines are data, not errors
        if error:
            tool = part.tool_name or (call.tool if call else "tool")
            self._error(digest, f"{tool}: {error}")

    def _error(self, digest: Digest, text: str) -> None:
        # The same failure seen again (another run of a failing command) moves to the end
        # instead of taking a second place: the lines the agent needs are kept once.
        key = _error_key(text)
        digest.errors = [e for e in digest.errors if _error_key(e) != key]
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
        shown = set(digest.files_read) | set(digest.files_written)
        names = [name for name in digest.names if name not in shown]
        if names:
            out += ["", "## Names seen", " ".join(names)]
        if digest.last_state:
            out += ["", "## Last state", digest.last_state]
        return "\n".join(out)

    def render_within(self, digest: Digest, max_tokens: int, count: Callable[[str], int]) -> str:
        """Render ``digest`` in at most ``max_tokens`` (by ``count``), leaving out the least useful first.

        Older commands and files read go first, then the last state is shortened, then
        the least salient names and older errors; the newest errors, the most salient
        names and the user's requests go last. The payload
        itself is not changed (a later digest still merges everything).
        """
        text = self.render(digest)
        if count(text) <= max_tokens:
            return text
        shrunk = Digest.from_json(digest.to_json())
        state = digest.last_state or ""
        for field, floor in _TRIM_STEPS:
            while True:
                if field == "last_state":
                    if len(state) <= floor:
                        break
                    state = state[: max(floor, len(state) // 2)]
                    shrunk.last_state = bound_text(digest.last_state or "", len(state))
                elif field == "requests":
                    if all(len(r) <= floor + 1 for r in shrunk.requests):
                        break
                    shrunk.requests = [r[:floor] + "…" if len(r) > floor else r for r in shrunk.requests]
                else:
                    items: list[Any] = getattr(shrunk, field)
                    if len(items) <= floor:
                        break
                    keep = max(floor, len(items) // 2)
                    setattr(shrunk, field, items[:keep] if field == "names" else items[len(items) - keep :])
                text = self.render(shrunk)
                if count(text) <= max_tokens:
                    return text
        return text

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
        context = request.context
        if request.max_tokens is None or context is None:
            return Summary(text=self.render(digest), digest=digest.to_json())
        text = self.render_within(digest, request.max_tokens, context.token_counter.count_text)
        return Summary(text=text, digest=digest.to_json())


_TRIM_STEPS: tuple[tuple[str, int], ...] = (
    ("commands", 8),
    ("files_read", 20),
    ("last_state", 600),
    ("names", 60),
    ("commands", 2),
    ("errors", 10),
    ("files_read", 5),
    ("names", 25),
    ("last_state", 200),
    ("files_written", 10),
    ("errors", 4),
    ("commands", 0),
    ("names", 0),
    ("files_read", 0),
    ("requests", 300),
)
"""``(field, floor)`` steps :meth:`StructuralDigest.render_within` takes, in order."""


def _section(title: str, items: Sequence[str]) -> list[str]:
    if not items:
        return []
    return ["", f"## {title}", *(f"- {item}" for item in items)]
