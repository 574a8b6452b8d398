"""A deterministic scripted model that explores a folder with the coding agent's tools.

:class:`ScriptedExplorer` plays the part of a model, offline and without an API key. It
decides each step from the tool results it has just received (the newest request, which
no capability ever edits), keeps notes of what it learned, like a model reasoning over
its context, and ends with an answer written from those notes, so the answer describes
the folder it was really given:

1. list the folder, then read its README and list two sub-folders;
2. read the largest Python files seen in those listings (the folder's own and the two
   sub-folders'), one request each, reading the first two of them a
   second time a little later (an agent checking its facts: the repeated reads give
   ``dedupe_file_reads`` something to do);
3. search the text for class definitions, count lines with ``wc -l`` and ask
   ``git log -n 3 --oneline`` for the recent history;
4. answer.

A prompt naming files (``"what is in agent.py?"``) reads those files and describes them
instead. Every new user prompt starts a new task, so the model also works in an
interactive session.

Example::

    from harness_coding_agent import build_agent, scripted_model

    agent = build_agent(scripted_model(), root="src")
    print(agent.run_sync("Explore this project.").output)
"""

from __future__ import annotations

__all__ = ["SCRIPTED_MODEL_NAME", "ScriptedExplorer", "scripted_model"]

import re
from collections.abc import Sequence
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
from harness.models.function import FunctionInfo, FunctionModel

SCRIPTED_MODEL_NAME = "scripted"
"""The scripted model's name (``harness run --model scripted``)."""

_LIST_ENTRY = re.compile(r"^(?P<name>.+?)  (?P<size>[\d,]+)$")
_READ_HEADER = re.compile(r"^(?P<path>.+): lines (?P<first>\d+)-(?P<last>\d+) of (?P<total>\d+)")
_DEFINITION = re.compile(r"^\s*\d+\t(?:async\s+def|def|class)\s+(?P<name>\w+)")
_SEARCH_HEADER = re.compile(r"^(?P<count>\d+) matches for .* in (?P<files>\d+) files")
_SEARCH_CLASS = re.compile(r"^(?P<path>[^:]+):\d+: class (?P<name>\w+)")
_WC_TOTAL = re.compile(r"^\s*(?P<count>\d+)\s+(?P<name>\S+)\s*$")
_FILE_MENTION = re.compile(
    r"(?<![\w/.-])(?:[\w.-]+/)*[\w.-]+\.(?:py|pyi|md|rst|txt|toml|cfg|ini|json|ya?ml|rs|go|js|ts|c|h|cpp|sh)\b"
)


@attrs.define
class _Notes:
    """What the explorer learned so far in the current task."""

    folders: list[str] = attrs.field(factory=list[str])
    files: dict[str, int] = attrs.field(factory=dict[str, int])
    subfolders: dict[str, list[str]] = attrs.field(factory=dict[str, list[str]])
    nested_files: dict[str, int] = attrs.field(factory=dict[str, int])
    reads: dict[str, tuple[int, list[str]]] = attrs.field(factory=dict[str, tuple[int, list[str]]])
    failures: list[str] = attrs.field(factory=list[str])
    classes: list[tuple[str, str]] = attrs.field(factory=list[tuple[str, str]])
    class_files: int = 0
    line_counts: dict[str, int] = attrs.field(factory=dict[str, int])
    commits: list[str] = attrs.field(factory=list[str])
    git_error: str | None = None
    rereads: list[str] = attrs.field(factory=list[str])


class ScriptedExplorer:
    """The function behind :func:`scripted_model` (``fn(messages, info)`` of a ``FunctionModel``).

    Args:
        files_to_read: How many of the largest Python files to read.
        lines_per_read: The ``limit`` passed to ``read_file``.
        rereads: How many of the files read are read a second time.
    """

    def __init__(self, *, files_to_read: int = 4, lines_per_read: int = 150, rereads: int = 2) -> None:
        if files_to_read < 0 or lines_per_read < 1 or rereads < 0:
            raise ValueError("files_to_read and rereads must be >= 0 and lines_per_read >= 1")
        self.files_to_read = files_to_read
        self.lines_per_read = lines_per_read
        self.rereads = rereads
        self.notes = _Notes()
        self.pending: dict[str, tuple[str, dict[str, Any]]] = {}
        self.plan: list[list[tuple[str, dict[str, Any]]]] = []
        self.stage = "idle"
        self.task = ""
        self.calls = 0

    # ------------------------------------------------------------------ entry point

    def __call__(self, messages: list[CanonicalMessage], info: FunctionInfo) -> CanonicalMessage | str:
        """Decide the next response from the newest request."""
        last = messages[-1] if messages else CanonicalMessage.user("")
        prompt = _user_prompt(last)
        if prompt is not None:
            self._start(prompt)
        self._adopt_ids(messages)
        self._observe(last)
        return self._next()

    # ------------------------------------------------------------------ planning

    def _start(self, prompt: str) -> None:
        self.task = prompt
        self.notes = _Notes()
        self.pending = {}
        mentioned = list(dict.fromkeys(m.removeprefix("./") for m in _FILE_MENTION.findall(prompt)))
        if mentioned:
            self.stage = "files"
            self.plan = [[("read_file", {"path": path, "limit": self.lines_per_read}) for path in mentioned]]
        else:
            self.stage = "explore"
            self.plan = [[("list_dir", {"path": "."})]]

    def _next(self) -> CanonicalMessage | str:
        if not self.plan and self.stage == "explore-listed":
            self._plan_survey()
        if not self.plan and self.stage == "explore-surveyed":
            self._plan_exploration()
        if not self.plan:
            self.stage = "idle"
            return self._answer()
        step = self.plan.pop(0)
        parts: list[ToolCallPart] = []
        for name, args in step:
            self.calls += 1
            call_id = f"scripted_{self.calls}"
            self.pending[call_id] = (name, args)
            parts.append(ToolCallPart(tool_call_id=call_id, tool_name=name, args=args))
        return CanonicalMessage.response(TextPart(self._narrate(step)), *parts)

    def _plan_survey(self) -> None:
        """Read the README and list the first two sub-folders."""
        notes = self.notes
        first: list[tuple[str, dict[str, Any]]] = []
        readme = next((f for f in notes.files if f.lower().startswith("readme")), None)
        if readme is not None:
            first.append(("read_file", {"path": readme, "limit": 60}))
        first += [("list_dir", {"path": folder}) for folder in notes.folders[:2]]
        self.plan = [first] if first else []
        self.stage = "explore-surveyed"

    def _plan_exploration(self) -> None:
        notes = self.notes
        sizes = {**notes.files, **notes.nested_files}
        python = sorted((f for f in sizes if f.endswith(".py")), key=lambda f: (-sizes[f], f))
        chosen = python[: self.files_to_read]
        plan: list[list[tuple[str, dict[str, Any]]]] = []
        reads: list[list[tuple[str, dict[str, Any]]]] = [
            [("read_file", {"path": path, "limit": self.lines_per_read})] for path in chosen
        ]
        # Each re-read follows two reads later: the earlier copy is usually still in the
        # context then, which is what dedupe_file_reads removes.
        for number, path in enumerate(chosen[: self.rereads]):
            reads.insert(
                min(len(reads), 3 * number + 3), [("read_file", {"path": path, "limit": self.lines_per_read})]
            )
        plan += reads
        plan.append([("search_text", {"pattern": r"^class \w+", "path": ".", "glob": "*.py"})])
        if chosen:
            plan.append([("run_shell", {"command": "wc -l " + " ".join(chosen)})])
        plan.append([("run_shell", {"command": "git log -n 3 --oneline"})])
        self.plan = plan
        self.stage = "exploring"

    @staticmethod
    def _narrate(step: Sequence[tuple[str, dict[str, Any]]]) -> str:
        described = ", ".join(f"{name}({', '.join(f'{v!r}' for v in args.values())})" for name, args in step)
        return f"Next: {described}."

    # ------------------------------------------------------------------ observing

    def _adopt_ids(self, messages: list[CanonicalMessage]) -> None:
        """Follow the loop when it renamed the ids of our calls (ids already in a resumed session)."""
        previous = messages[-2] if len(messages) >= 2 and messages[-2].kind == "response" else None
        if previous is None or not self.pending:
            return
        calls = previous.tool_calls
        planned = list(self.pending.items())
        if len(calls) == len(planned) and all(
            c.tool_name == p[1][0] for c, p in zip(calls, planned, strict=True)
        ):
            self.pending = {call.tool_call_id: step for call, (_, step) in zip(calls, planned, strict=True)}

    def _observe(self, request: CanonicalMessage) -> None:
        for part in request.parts:
            if isinstance(part, ToolReturnPart | RetryPromptPart) and part.tool_call_id in self.pending:
                name, args = self.pending.pop(part.tool_call_id)
                if isinstance(part, RetryPromptPart):
                    self.notes.failures.append(
                        f"{name}({args.get('path') or args.get('command', '')}): {_first_line(part.content)}"
                    )
                    continue
                self._record(name, args, part.content)
        if self.stage == "explore" and not self.pending:
            self.stage = "explore-listed"

    def _record(self, name: str, args: dict[str, Any], content: Any) -> None:
        text = content if isinstance(content, str) else str(content)
        lines = text.splitlines()
        notes = self.notes
        if name == "list_dir":
            folders = [line[:-1] for line in lines[1:] if line.endswith("/")]
            files = {
                m["name"]: int(m["size"].replace(",", "")) for m in map(_LIST_ENTRY.match, lines[1:]) if m
            }
            if args.get("path", ".") == ".":
                notes.folders = [f for f in folders if not f.startswith((".", "__"))]
                notes.files = files
            else:
                folder = str(args["path"]).rstrip("/")
                notes.subfolders[folder] = [*[f"{f}/" for f in folders], *files]
                notes.nested_files.update({f"{folder}/{name}": size for name, size in files.items()})
        elif name == "read_file":
            header = _READ_HEADER.match(lines[0]) if lines else None
            total = int(header["total"]) if header else len(lines) - 1
            definitions = [m["name"] for m in map(_DEFINITION.match, lines[1:]) if m]
            path = str(args["path"])
            if path in notes.reads:
                notes.rereads.append(path)
            notes.reads[path] = (total, definitions)
        elif name == "search_text":
            header = _SEARCH_HEADER.match(lines[0]) if lines else None
            notes.class_files = len({m["path"] for m in map(_SEARCH_CLASS.match, lines[1:]) if m})
            notes.classes = [(m["path"], m["name"]) for m in map(_SEARCH_CLASS.match, lines[1:]) if m]
            if header is None:
                notes.failures.append(f"search_text: unexpected output {_first_line(text)!r}")
        elif name == "run_shell":
            command = str(args.get("command", ""))
            if command.startswith("wc"):
                for match in map(_WC_TOTAL.match, lines[1:]):
                    if match:
                        notes.line_counts[match["name"]] = int(match["count"])
            elif command.startswith("git"):
                if any(line.startswith("[exit status") for line in lines):
                    notes.git_error = _first_line("\n".join(lines[2:]) or "git failed")
                else:
                    notes.commits = [line for line in lines[1:] if line.strip()]

    # ------------------------------------------------------------------ answering

    def _answer(self) -> str:
        notes = self.notes
        if self.stage == "idle" and not (notes.reads or notes.files or notes.failures):
            return "I have nothing to report yet: ask me to explore the folder or to read a file."
        out: list[str] = []
        if notes.files or notes.folders:
            folders = ", ".join(f"{f}/" for f in notes.folders) or "none"
            out.append(
                f"The folder holds {len(notes.folders)} sub-folders ({folders}) "
                f"and {len(notes.files)} files at the top level."
            )
        for folder, entries in notes.subfolders.items():
            shown = ", ".join(entries[:6]) + (" and more" if len(entries) > 6 else "")
            out.append(f"{folder}/ contains {len(entries)} entries: {shown}.")
        for path, (total, definitions) in notes.reads.items():
            shown = ", ".join(definitions[:5]) + (" and more" if len(definitions) > 5 else "")
            defined = f"; the part I read defines {shown}" if definitions else ""
            out.append(f"{path}: {total:,} lines{defined}.")
        if notes.classes:
            names = ", ".join(name for _, name in notes.classes[:8])
            out.append(
                f"A search for class definitions found {len(notes.classes)} classes in "
                f"{notes.class_files} files, among them {names}."
            )
        counted = {k: v for k, v in notes.line_counts.items() if k != "total"}
        if counted:
            largest = max(counted, key=lambda k: counted[k])
            total = notes.line_counts.get("total", sum(counted.values()))
            out.append(
                f"wc -l: the {len(counted)} files I read hold {total:,} lines; "
                f"the largest is {largest} ({counted[largest]:,})."
            )
        if notes.commits:
            out.append(f"Latest commit: {notes.commits[0]} ({len(notes.commits)} shown by git log).")
        elif notes.git_error:
            out.append(f"git log failed: {notes.git_error}.")
        if notes.rereads:
            out.append(f"I read {', '.join(notes.rereads)} a second time to check my notes.")
        if notes.failures:
            out.append("Problems: " + "; ".join(notes.failures) + ".")
        return "\n".join(out)


def _user_prompt(message: CanonicalMessage) -> str | None:
    """The text of the user prompts in ``message`` (harness's own marked parts excluded)."""
    if message.kind != "request":
        return None
    texts = [p.text for p in message.parts if isinstance(p, UserPromptPart) and harness_mark(p) is None]
    return "\n".join(texts) if texts else None


def _first_line(content: Any) -> str:
    text = content if isinstance(content, str) else str(content)
    return text.strip().splitlines()[0] if text.strip() else ""


def scripted_model(
    *,
    context_window: int | None = None,
    files_to_read: int = 4,
    lines_per_read: int = 150,
    rereads: int = 2,
) -> FunctionModel:
    """A :class:`~harness.models.function.FunctionModel` driven by a :class:`ScriptedExplorer`.

    Args:
        context_window: The context window the model reports (what ratio-based
            capabilities compare against).
        files_to_read: How many of the largest Python files to read.
        lines_per_read: The ``limit`` passed to ``read_file``.
        rereads: How many of those files are read a second time.
    """
    explorer = ScriptedExplorer(files_to_read=files_to_read, lines_per_read=lines_per_read, rereads=rereads)
    return FunctionModel(explorer, model_name=SCRIPTED_MODEL_NAME, context_window=context_window)
