"""Ready-made ``file_key`` functions: which tool calls read which file.

A key function takes a :class:`~harness.core.messages.ToolCallPart` and returns a string
key, or ``None`` when the call is not (recognisably) a file read. Two reads with the
same key show the same view of the same file: same path, same tool or shell form, same
line range and same presentation (line numbers or not). So a later read of a key can
stand in for an earlier one, and a partial read never supersedes a different range.

The rules are conservative: anything the parser is not sure about gets ``None`` and is
left alone. A wrong ``None`` costs a missed saving; a wrong key would hide live data.

* ``read_tool``: tools named ``read_file``, ``Read``, ``read``, ``view``, ``open``,
  ``cat_file`` (case-insensitive, plus ``view_file``/``open_file``/``readfile``) with
  exactly one path argument (``path``, ``file_path``, ``filename`` or ``file``); the
  Anthropic text-editor tools (``str_replace_editor``, ``str_replace_based_edit_tool``)
  with ``command == "view"``. Every other argument (``offset``, ``limit``,
  ``view_range``, ``start_line``...) is part of the key, as is the tool name.
* ``shell_cat``: shell tools (``bash``, ``shell``, ``sh``, ``execute``,
  ``execute_command``, ``run_command``, ``run_shell_command``, ``terminal``; argument
  ``command`` or ``cmd``) whose command is exactly one of::

      cat [-n] PATH
      nl [-OPTS] PATH
      head [-n N | -N | --lines=N] PATH        -> lines 1-N
      tail [-n N | -N | --lines=N] PATH        -> last N lines
      tail -n +N PATH                          -> lines N-$
      sed -n 'A,Bp' PATH  /  sed -n 'Ap' PATH  -> lines A-B
      (cat [-n] PATH | nl [-OPTS] PATH) | (sed -n 'A,Bp' | head ... | tail ...)

  optionally preceded by ``cd DIR &&`` (relative paths are then resolved against
  ``DIR``). Quoting is parsed like a POSIX shell; any other shell syntax (more pipes,
  ``;``, ``||``, redirections, here-documents, variables, command substitution, globs,
  several files) makes the command "not a read".
* ``auto``: ``read_tool``, else ``shell_cat``.
"""

from __future__ import annotations

__all__ = [
    "DESCRIBERS",
    "FILE_KEYS",
    "FileKey",
    "FileRead",
    "auto_file_key",
    "changes_directory",
    "describe_read",
    "describe_shell_read",
    "describe_tool_read",
    "normalize_path",
    "parse_shell_read",
    "read_tool_key",
    "selection_covers",
    "shell_cat_key",
    "tokenize",
]

import json
import re
from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

import attrs

from harness.core import ToolCallPart
from harness.errors import MessageError

FileKey: TypeAlias = Callable[[ToolCallPart], "str | None"]
"""A key function: ``file_key(call) -> str | None`` (``None``: not a file read)."""

READ_TOOL_NAMES = frozenset(
    {"read_file", "read", "view", "open", "cat_file", "view_file", "open_file", "readfile"}
)
EDITOR_TOOL_NAMES = frozenset({"str_replace_editor", "str_replace_based_edit_tool"})
PATH_ARGS = ("path", "file_path", "filename", "file")
SHELL_TOOL_NAMES = frozenset(
    {"bash", "shell", "sh", "execute", "execute_command", "run_command", "run_shell_command", "terminal"}
)
COMMAND_ARGS = ("command", "cmd")

_READ_WORDS = ("cat", "nl", "head", "tail", "sed", "cd")
_SED_SCRIPT = re.compile(r"^([1-9][0-9]*)(?:,([1-9][0-9]*|\$))?p$")
_COUNT = re.compile(r"^[0-9]+$")
_NL_OPTION = re.compile(r"^-[bhfvilnswdp][^\s]+$")


@attrs.frozen
class FileRead:
    """What a recognised read shows.

    Attributes:
        key: The deduplication key (same key = same view of the same file).
        path: The file path as the call names it (``cd DIR &&`` applied), for messages.
        view: For shell reads, the key without the line selection (same file, same
            presentation); ``None`` for read tools, whose range arguments are opaque.
        selection: For shell reads, which lines are shown: ``"all"``, ``"lines A-B"``
            (``B`` may be ``$``) or ``"last N"``; ``None`` for read tools.
    """

    key: str
    path: str
    view: str | None = None
    selection: str | None = None


def _args(call: ToolCallPart) -> dict[str, Any] | None:
    try:
        return call.args_as_dict()
    except MessageError:
        return None


def normalize_path(path: str) -> str:
    """Drop ``.`` segments and repeated slashes; ``..`` is kept (symlinks make it unsafe to fold)."""
    absolute = path.startswith("/")
    segments = [s for s in path.split("/") if s not in ("", ".")]
    joined = "/".join(segments)
    if absolute:
        return "/" + joined
    return joined or "."


def _read_tool(call: ToolCallPart) -> FileRead | None:
    name = call.tool_name.lower()
    editor = name in EDITOR_TOOL_NAMES
    if not editor and name not in READ_TOOL_NAMES:
        return None
    args = _args(call)
    if args is None:
        return None
    if editor:
        if args.get("command") != "view":
            return None
        args = {k: v for k, v in args.items() if k != "command"}
    present = [k for k in PATH_ARGS if k in args]
    if len(present) != 1:
        return None
    raw = args[present[0]]
    if not isinstance(raw, str) or not raw.strip():
        return None
    path = normalize_path(raw.strip())
    extras = {k: v for k, v in args.items() if k != present[0]}
    try:
        key = json.dumps(["read", call.tool_name, path, extras], sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return None
    return FileRead(key, path)


# -- shell ---------------------------------------------------------------------------------

_PIPE = "|"
_AND = "&&"
_UNQUOTED_SPECIAL = frozenset("$`*?[]{}~!#;<>()\n\r")


class _Word(str):
    """A shell word (so that a quoted ``"|"`` is never mistaken for an operator)."""

    __slots__ = ()


def tokenize(command: str) -> list[str] | None:
    """Split a shell command into words and the operators ``|`` and ``&&``.

    Returns ``None`` for anything beyond plain words, quotes, backslash escapes, ``|`` and
    ``&&``: expansions, globs, redirections, separators, comments, unterminated quotes.
    Words are :class:`_Word` instances; operators are plain strings.
    """
    tokens: list[str] = []
    buf: list[str] = []
    in_word = False
    i = 0
    n = len(command)
    while i < n:
        c = command[i]
        if c == "'":
            end = command.find("'", i + 1)
            if end < 0:
                return None
            buf.append(command[i + 1 : end])
            in_word = True
            i = end + 1
        elif c == '"':
            i += 1
            while True:
                if i >= n:
                    return None
                d = command[i]
                if d == '"':
                    break
                if d in "$`":
                    return None
                if d == "\\" and i + 1 < n and command[i + 1] in '"\\$`':
                    buf.append(command[i + 1])
                    i += 2
                    continue
                buf.append(d)
                i += 1
            in_word = True
            i += 1
        elif c == "\\":
            if i + 1 >= n or command[i + 1] in "\n\r":
                return None
            buf.append(command[i + 1])
            in_word = True
            i += 2
        elif c in " \t":
            if in_word:
                tokens.append(_Word("".join(buf)))
                buf.clear()
                in_word = False
            i += 1
        elif c == "|":
            if command.startswith("||", i):
                return None
            if in_word:
                tokens.append(_Word("".join(buf)))
                buf.clear()
                in_word = False
            tokens.append(_PIPE)
            i += 1
        elif c == "&":
            if not command.startswith("&&", i):
                return None
            if in_word:
                tokens.append(_Word("".join(buf)))
                buf.clear()
                in_word = False
            tokens.append(_AND)
            i += 2
        elif c in _UNQUOTED_SPECIAL:
            return None
        else:
            buf.append(c)
            in_word = True
            i += 1
    if in_word:
        tokens.append(_Word("".join(buf)))
    return tokens


def _split(tokens: list[str], operator: str) -> list[list[str]]:
    groups: list[list[str]] = [[]]
    for token in tokens:
        if token == operator and not isinstance(token, _Word):
            groups.append([])
        else:
            groups[-1].append(token)
    return groups


def _is_operator(token: str) -> bool:
    return not isinstance(token, _Word)


def _path_word(word: str) -> bool:
    return bool(word) and word != "-" and not word.startswith("-")


def _producer(words: list[str]) -> tuple[str, str] | None:
    """``cat [-n] PATH`` or ``nl [-OPTS] PATH`` -> (mode, path)."""
    command, rest = words[0], words[1:]
    options: list[str] = []
    paths: list[str] = []
    only_paths = False
    for word in rest:
        if only_paths:
            paths.append(word)
        elif word == "--":
            only_paths = True
        elif word.startswith("-") and word != "-":
            options.append(word)
        else:
            paths.append(word)
    if len(paths) != 1 or paths[0] in ("", "-"):
        return None
    if command == "cat":
        if not options:
            return "cat", paths[0]
        if all(o in ("-n", "--number") for o in options):
            return "cat -n", paths[0]
        return None
    if command == "nl":
        if all(_NL_OPTION.match(o) for o in options):
            return " ".join(["nl", *options]), paths[0]
        return None
    return None


def _count_option(words: list[str], allow_plus: bool) -> tuple[str, list[str]] | None:
    """Parse head/tail line-count options -> (count text, remaining words)."""
    count = "10"
    rest: list[str] = []
    i = 0
    seen = False
    while i < len(words):
        word = words[i]
        value: str | None = None
        if word == "-n" or word == "--lines":
            if i + 1 >= len(words):
                return None
            value = words[i + 1]
            i += 2
        elif word.startswith("--lines="):
            value = word[len("--lines=") :]
            i += 1
        elif word.startswith("-n") and len(word) > 2:
            value = word[2:]
            i += 1
        elif word.startswith("-") and word[1:].isdigit():
            value = word[1:]
            i += 1
        elif word == "--":
            rest.extend(words[i + 1 :])
            break
        elif word.startswith("-") and word != "-":
            return None
        else:
            rest.append(word)
            i += 1
            continue
        if seen:
            return None
        seen = True
        if allow_plus and value.startswith("+") and _COUNT.match(value[1:]):
            count = value
        elif _COUNT.match(value):
            count = value
        else:
            return None
    return count, rest


def _lines(first: int, end: str) -> str:
    return "all" if first == 1 and end == "$" else f"lines {first}-{end}"


def _selection(words: list[str]) -> tuple[str, list[str]] | None:
    """A line selector (sed -n / head / tail) -> (selection, file words)."""
    command = words[0]
    if command == "sed":
        if len(words) < 3 or words[1] != "-n":
            return None
        match = _SED_SCRIPT.match(words[2])
        if match is None:
            return None
        first = int(match.group(1))
        last = match.group(2)
        if last is None:
            end = str(first)
        elif last == "$":
            end = "$"
        else:
            end = str(max(int(last), first))
        return _lines(first, end), words[3:]
    if command in ("head", "tail"):
        parsed = _count_option(words[1:], allow_plus=command == "tail")
        if parsed is None:
            return None
        count, rest = parsed
        if count.startswith("+"):
            return _lines(int(count[1:]) or 1, "$"), rest
        if int(count) == 0:
            return None
        if command == "head":
            return f"lines 1-{int(count)}", rest
        return f"last {int(count)}", rest
    return None


def _join(directory: str | None, path: str) -> str:
    if directory is None or path.startswith("/"):
        return normalize_path(path)
    return normalize_path(f"{directory}/{path}")


def parse_shell_read(command: str) -> tuple[str, str, str] | None:
    """Recognise a shell command that prints (part of) one file.

    Args:
        command: The shell command.

    Returns:
        ``(mode, selection, path)`` -- e.g. ``("cat", "lines 10-20", "src/a.py")`` -- or
        ``None`` when the command is not a recognised read.
    """
    stripped = command.strip()
    if not stripped.startswith(_READ_WORDS):
        return None
    tokens = tokenize(stripped)
    if not tokens:
        return None
    stages = _split(tokens, _AND)
    directory: str | None = None
    if len(stages) == 2:
        cd = stages[0]
        if len(cd) != 2 or cd[0] != "cd" or not _path_word(cd[1]):
            return None
        directory = cd[1]
        stages = stages[1:]
    if len(stages) != 1:
        return None
    commands = _split(stages[0], _PIPE)
    if any(not c or any(_is_operator(w) for w in c) for c in commands):
        return None
    if len(commands) == 1:
        words = commands[0]
        if words[0] in ("cat", "nl"):
            produced = _producer(words)
            if produced is None:
                return None
            return produced[0], "all", _join(directory, produced[1])
        selected = _selection(words)
        if selected is None:
            return None
        selection, files = selected
        if len(files) != 1 or not _path_word(files[0]):
            return None
        return "cat", selection, _join(directory, files[0])
    if len(commands) == 2:
        first, second = commands
        if first[0] not in ("cat", "nl"):
            return None
        produced = _producer(first)
        selected = _selection(second)
        if produced is None or selected is None or selected[1]:
            return None
        return produced[0], selected[0], _join(directory, produced[1])
    return None


def _shell_cat(call: ToolCallPart) -> FileRead | None:
    if call.tool_name.lower() not in SHELL_TOOL_NAMES:
        return None
    args = _args(call)
    if args is None:
        return None
    present = [k for k in COMMAND_ARGS if k in args]
    if len(present) != 1:
        return None
    command = args[present[0]]
    if not isinstance(command, str):
        return None
    parsed = parse_shell_read(command)
    if parsed is None:
        return None
    mode, selection, path = parsed
    return FileRead(
        json.dumps(["shell", mode, selection, path], separators=(",", ":")),
        path,
        view=json.dumps(["shell", mode, path], separators=(",", ":")),
        selection=selection,
    )


_CHANGES_DIRECTORY = re.compile(r"(?:^|[;&|(`{\n]|\$\()\s*(?:cd|pushd|popd)(?:\s|$|;|&|\|)")


def changes_directory(call: ToolCallPart) -> bool:
    """Whether ``call`` is a shell command that may change a persistent shell's directory.

    True for any shell tool call whose command runs ``cd``, ``pushd`` or ``popd`` as a command
    (``cd src``, ``cd /x && make``, ``ls; cd ..``). In an agent whose shell keeps its state
    between calls, a relative path means another file after such a call, so
    :class:`~harness_dedupe_file_reads.DeduplicateFileReads` never lets a relative-path
    shell read supersede one from before it.
    """
    if call.tool_name.lower() not in SHELL_TOOL_NAMES:
        return False
    args = _args(call)
    if args is None:
        return False
    command = next((args[k] for k in COMMAND_ARGS if isinstance(args.get(k), str)), None)
    return command is not None and _CHANGES_DIRECTORY.search(command) is not None


def describe_tool_read(call: ToolCallPart) -> FileRead | None:
    """Recognise ``call`` with the ``read_tool`` rules (see the module docs)."""
    return _read_tool(call)


def describe_shell_read(call: ToolCallPart) -> FileRead | None:
    """Recognise ``call`` with the ``shell_cat`` rules (see the module docs)."""
    return _shell_cat(call)


def describe_read(call: ToolCallPart) -> FileRead | None:
    """Recognise ``call`` with the built-in rules (``read_tool``, then ``shell_cat``).

    Args:
        call: A tool call.

    Returns:
        The read's key and path, or ``None`` when the call is not a recognised file read.
    """
    return _read_tool(call) or _shell_cat(call)


def _bounds(selection: str) -> tuple[int, float] | None:
    if selection == "all":
        return 1, float("inf")
    if selection.startswith("lines "):
        first, _, last = selection[len("lines ") :].partition("-")
        return int(first), float("inf") if last == "$" else int(last)
    return None


def selection_covers(later: str, earlier: str) -> bool:
    """Whether the selection ``later`` shows every line ``earlier`` shows.

    ``"all"`` covers everything; ``"lines A-B"`` covers ``"lines C-D"`` when
    ``A <= C`` and ``D <= B``; ``"last N"`` covers ``"last M"`` when ``M <= N``.
    ``"last N"`` and line ranges never cover each other (the file length is unknown).
    """
    if later == earlier or later == "all":
        return True
    if later.startswith("last ") and earlier.startswith("last "):
        return int(earlier[5:]) <= int(later[5:])
    outer, inner = _bounds(later), _bounds(earlier)
    if outer is None or inner is None:
        return False
    return outer[0] <= inner[0] and inner[1] <= outer[1]


def read_tool_key(call: ToolCallPart) -> str | None:
    """Key of a ``read_file``/``Read``-style tool call (see the module docs), else ``None``."""
    read = _read_tool(call)
    return None if read is None else read.key


def shell_cat_key(call: ToolCallPart) -> str | None:
    """Key of a shell command that prints (part of) one file (see the module docs), else ``None``."""
    read = _shell_cat(call)
    return None if read is None else read.key


def auto_file_key(call: ToolCallPart) -> str | None:
    """``read_tool_key``, else ``shell_cat_key`` (the default ``file_key``)."""
    read = describe_read(call)
    return None if read is None else read.key


FILE_KEYS: Mapping[str, FileKey] = {
    "auto": auto_file_key,
    "read_tool": read_tool_key,
    "shell_cat": shell_cat_key,
}
"""The built-in key functions, by the name ``DeduplicateFileReads(file_key=...)`` accepts."""

DESCRIBERS: Mapping[str, Callable[[ToolCallPart], FileRead | None]] = {
    "auto": describe_read,
    "read_tool": describe_tool_read,
    "shell_cat": describe_shell_read,
}
"""The built-in recognisers behind :data:`FILE_KEYS` (same names), giving the whole :class:`FileRead`."""
