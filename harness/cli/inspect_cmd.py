"""``harness inspect``: what a history or session file holds and whether a provider would accept it."""

from __future__ import annotations

__all__ = ["dedupe_check", "describe_file_read", "inspect", "inspect_report"]

import json
import sys
import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
from rich.table import Table

from harness.capabilities._stack_grammar import parse_stack
from harness.cli._app import (
    EXIT_PROBLEM,
    HISTORY_PATH,
    HistoryFile,
    cli,
    console,
    escaped,
    history_format_option,
    read_history_file,
)
from harness.cli._json import echo_json
from harness.core.messages import CanonicalMessage, ToolCallPart, ToolReturnPart
from harness.errors import HarnessError, MessageError, PluginLoadError
from harness.history import check_invariants
from harness.hooks.stacks import build_entries, installed_capability_classes
from harness.run.compaction import compact_sync
from harness.tokens import TokenCounter

if TYPE_CHECKING:
    from harness.wire import FormatChoice

_READ_TOOLS = frozenset({"read_file", "read", "view", "open", "cat", "cat_file", "view_file", "open_file"})
_EDITOR_TOOLS = frozenset({"str_replace_editor", "str_replace_based_edit_tool"})
_PATH_KEYS = ("path", "file_path", "filename", "file")


def _heuristic_read(call: ToolCallPart) -> tuple[str, str] | None:
    """(key, path) of a read-tool call, for when the dedupe plugin is not installed."""
    name = call.tool_name.lower()
    if name not in _READ_TOOLS and name not in _EDITOR_TOOLS:
        return None
    try:
        args = call.args_as_dict()
    except MessageError:
        return None
    if name in _EDITOR_TOOLS and args.get("command") != "view":
        return None
    paths = [args[key] for key in _PATH_KEYS if isinstance(args.get(key), str)]
    if len(paths) != 1:
        return None
    return f"{call.tool_name}:{json.dumps(args, sort_keys=True, default=str)}", paths[0]


def _plugin_describer() -> Callable[[ToolCallPart], tuple[str, str] | None] | None:
    """The ``dedupe_file_reads`` capability's rule, found through its entry point (never imported by name)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            capability = installed_capability_classes().get("dedupe_file_reads")
    except PluginLoadError:
        return None
    describe_read: object = getattr(capability, "describe_read", None)
    if not callable(describe_read):
        return None

    def describe(call: ToolCallPart) -> tuple[str, str] | None:
        read: Any = describe_read(call)
        return None if read is None else (str(read.key), str(read.path))

    return describe


def describe_file_read(call: ToolCallPart) -> tuple[str, str] | None:
    """Recognise a tool call that reads a file: ``(key, path)``, or ``None``.

    Two calls with the same key show the same view of the same file. With the
    ``harness-dedupe-file-reads`` plugin installed this is its ``describe_read`` (read
    tools, the Anthropic text editor's ``view`` and plain shell ``cat``/``head``/``sed -n``
    commands). Without it, a simpler rule: a tool named ``read_file``, ``read``, ``view``,
    ``open``, ``cat``, ``cat_file``, ``view_file`` or ``open_file`` (or a text-editor tool
    with ``command == "view"``) with exactly one of the arguments ``path``, ``file_path``,
    ``filename``, ``file``; the key is the tool name and all its arguments.
    """
    describer = _plugin_describer()
    return describer(call) if describer is not None else _heuristic_read(call)


_FRESH_SHELL = "dedupe_file_reads:shell_keeps_directory=false"


def dedupe_check(messages: Sequence[CanonicalMessage]) -> dict[str, int] | None:
    """How many reads ``dedupe_file_reads`` supersedes: as configured by default, and for fresh shells.

    By default the capability treats a ``cd`` in a shell call as changing what later relative
    paths mean (a persistent shell), so reads after one are not superseded. Agents that run
    every command in a fresh shell (mini-swe-agent, SWE-agent's ``bash``) need
    ``shell_keeps_directory=false``; comparing both tells ``inspect`` when to say so.

    Returns:
        ``{"superseded": N, "superseded_with_fresh_shells": M}``, or ``None`` when the
        plugin is not installed or cannot be built.
    """
    classes = installed_capability_classes()
    if "dedupe_file_reads" not in classes:
        return None
    counts: list[int] = []
    try:
        for spec in ("dedupe_file_reads", _FRESH_SHELL):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                capabilities = build_entries(parse_stack(spec), classes)
                result = compact_sync(messages, capabilities, force=True)
            counts.append(sum(len(event.cleared_tool_call_ids) for event in result.events))
    except HarnessError:
        return None
    return {"superseded": counts[0], "superseded_with_fresh_shells": counts[1]}


def inspect_report(history: HistoryFile, counter: TokenCounter, *, top: int = 5) -> dict[str, Any]:
    """The figures ``harness inspect`` prints, as a JSON-ready mapping.

    Args:
        history: The file read by :func:`harness.cli._app.read_history_file`.
        counter: Counts tokens.
        top: How many of the largest tool returns to list.
    """
    messages = history.messages
    describer = _plugin_describer() or _heuristic_read
    parts: Counter[str] = Counter()
    tokens: Counter[str] = Counter()
    returns: list[dict[str, Any]] = []
    reads: dict[str, list[tuple[int, ToolCallPart, str]]] = {}
    for index, message in enumerate(messages):
        for part in message.parts:
            size = counter.count_part(part)
            parts[part.part_kind] += 1
            tokens[part.part_kind] += size
            if isinstance(part, ToolReturnPart):
                returns.append(
                    {
                        "tool_name": part.tool_name,
                        "tool_call_id": part.tool_call_id,
                        "tokens": size,
                        "message_index": index,
                    }
                )
            elif isinstance(part, ToolCallPart):
                read = describer(part)
                if read is not None:
                    key, path = read
                    reads.setdefault(key, []).append((index, part, path))
    returns.sort(key=lambda item: (-item["tokens"], item["message_index"]))
    repeated: list[dict[str, Any]] = [
        {
            "path": seen[0][2],
            "tool_name": seen[0][1].tool_name,
            "count": len(seen),
            "tool_call_ids": [call.tool_call_id for _, call, _ in seen],
            "message_indices": [index for index, _, _ in seen],
        }
        for seen in sorted(reads.values(), key=lambda seen: (-len(seen), seen[0][0]))
        if len(seen) > 1
    ]
    violations = check_invariants(messages, persisted=history.kind == "session")
    return {
        "file": str(history.path),
        "format": history.kind,
        "message_format": history.format,
        "json_lines": history.json_lines,
        "compression": history.compression,
        "skipped_records": dict(history.skipped),
        "messages": len(messages),
        "requests": sum(1 for m in messages if m.is_request),
        "responses": sum(1 for m in messages if not m.is_request),
        "tokenizer": {"encoding": counter.encoding_name, "exact": counter.exact},
        "tokens": {"total": counter.count_messages(messages), "by_kind": dict(tokens)},
        "parts": dict(parts),
        "largest_tool_returns": returns[: max(top, 0)],
        "repeated_file_reads": repeated,
        "dedupe_file_reads": dedupe_check(messages) if repeated else None,
        "invariants": {
            "clean": not violations,
            "violations": [
                {
                    "kind": v.kind,
                    "message_index": v.message_index,
                    "part_index": v.part_index,
                    "tool_call_id": v.tool_call_id,
                    "detail": v.detail,
                }
                for v in violations
            ],
        },
    }


def _print(report: Mapping[str, Any]) -> None:
    out = console()
    total = report["tokens"]["total"]
    tokenizer = report["tokenizer"]
    details = ["session" if report["format"] == "session" else f"{report['message_format']} messages"]
    details += ["JSON Lines"] if report["json_lines"] else []
    details += [report["compression"]] if report["compression"] else []
    out.print(
        f"[bold]{escaped(report['file'])}[/bold] ({', '.join(details)}): {report['messages']} messages "
        f"({report['requests']} requests, {report['responses']} responses), {total:,} tokens "
        f"({tokenizer['encoding']}, {'exact' if tokenizer['exact'] else 'estimate'})"
    )
    skipped: Mapping[str, int] = report["skipped_records"]
    if skipped:
        counts = ", ".join(f"{escaped(kind)} {count}" for kind, count in sorted(skipped.items()))
        out.print(f"skipped {sum(skipped.values())} records without a message ({counts})")
    table = Table("part kind", "parts", "tokens", "share", title="parts by kind")
    by_kind: Mapping[str, int] = report["tokens"]["by_kind"]
    for kind, count in sorted(report["parts"].items(), key=lambda item: -by_kind[item[0]]):
        share = by_kind[kind] / total if total else 0.0
        table.add_row(escaped(kind), str(count), f"{by_kind[kind]:,}", f"{share:.0%}")
    out.print(table)
    if report["largest_tool_returns"]:
        table = Table("tool", "call id", "message", "tokens", title="largest tool returns")
        for item in report["largest_tool_returns"]:
            table.add_row(
                escaped(item["tool_name"] or "-"),
                escaped(item["tool_call_id"]),
                str(item["message_index"]),
                f"{item['tokens']:,}",
            )
        out.print(table)
    if report["repeated_file_reads"]:
        table = Table("path", "tool", "reads", "messages", title="repeated file reads")
        for item in report["repeated_file_reads"]:
            table.add_row(
                escaped(item["path"]),
                escaped(item["tool_name"]),
                str(item["count"]),
                ", ".join(map(str, item["message_indices"])),
            )
        out.print(table)
        dedupe = report["dedupe_file_reads"]
        if dedupe is not None and dedupe["superseded_with_fresh_shells"] > dedupe["superseded"]:
            out.print(
                f"note: dedupe_file_reads supersedes {dedupe['superseded']} of these reads as configured by "
                "default, which treats a `cd` in a shell call as lasting; with "
                f"shell_keeps_directory=false it supersedes {dedupe['superseded_with_fresh_shells']}. "
                "Agents that run each command in a fresh shell (mini-swe-agent, SWE-agent) need: "
                f"--stack {_FRESH_SHELL}"
            )
    else:
        out.print("repeated file reads: none")
    violations = report["invariants"]["violations"]
    if not violations:
        out.print("invariants: [green]clean[/green]")
        return
    table = Table("kind", "message", "part", "tool call", "detail", title="invariant violations")
    for v in violations:
        table.add_row(
            v["kind"],
            str(v["message_index"]),
            "-" if v["part_index"] is None else str(v["part_index"]),
            escaped(v["tool_call_id"] or "-"),
            escaped(v["detail"]),
        )
    out.print(table)
    out.print(f"invariants: [red]{len(violations)} violation(s)[/red]: a provider would reject this history")


@cli.command(
    "inspect",
    epilog="""\b
Examples:
  harness inspect history.json
  harness inspect ~/.local/share/harness/sessions/abc_123.json --top 10
  harness inspect history.json --json | jq .invariants.clean
  harness inspect history.json || echo "a provider would reject it"
""",
)
@click.argument("path", type=HISTORY_PATH)
@history_format_option
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@click.option("--model", default=None, help="Model name that picks the tokenizer (default cl100k_base).")
@click.option(
    "--top",
    type=click.IntRange(min=0),
    default=5,
    show_default=True,
    help="How many of the largest tool returns.",
)
def inspect(path: Path, history_format: FormatChoice, as_json: bool, model: str | None, top: int) -> None:
    """Show what a history or session file holds.

    PATH is a message history (harness's wire format, which is pydantic-ai's message
    JSON; OpenAI Chat Completions or Anthropic Messages API messages; a Claude Code
    transcript) or a harness session file, as JSON or JSON Lines, optionally gzipped, or
    - for standard input; the format is detected unless --format says. Prints the messages,
    parts and tokens by part kind, the largest tool returns, repeated reads of the
    same file, and the invariant report. Exits with 1 when the history breaks an
    invariant (a provider would reject it), 2 when the file cannot be read.
    """
    history = read_history_file(path, format=history_format)
    report = inspect_report(history, TokenCounter(model), top=top)
    if as_json:
        echo_json(report)
    else:
        _print(report)
    if not report["invariants"]["clean"]:
        sys.exit(EXIT_PROBLEM)
