"""Which files a shell command reads and writes: a heuristic over common tools.

``cat``/``head``/``tail``/``nl``/``less``/``sed -n`` (and SWE-agent's ``open``) read;
``sed -i``/``tee``/``touch``/``cp``/``mv``/``install``/``>`` redirects (and SWE-agent's
``create``/``edit``) write. Here-document bodies are skipped (they are data).
"""

from __future__ import annotations

__all__ = ["extract_file_paths"]

import re
import shlex
from collections.abc import Iterable

_SHELL_READERS = frozenset({"cat", "head", "tail", "nl", "less", "more", "bat", "open"})
_SHELL_WRITERS = frozenset({"tee", "touch", "create"})
_SEPARATORS = frozenset({"|", "||", "&&", ";", "&", "(", ")", ";;", "|&"})
_HEREDOC = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")


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
