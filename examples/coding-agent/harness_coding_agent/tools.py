"""The coding agent's tools: read a file, list a folder, search text, run a read-only command.

Every tool is confined to one root folder. A path that leads outside it (``..``, an
absolute path elsewhere, a symbolic link pointing out) is refused with
:class:`~harness.errors.ToolRetry`, so the model learns why and can try again. Outputs are
capped so one call cannot flood the context window.

Example::

    from harness_coding_agent.tools import CodingTools

    tools = CodingTools("src").tools()  # [read_file, list_dir, search_text, run_shell]
"""

from __future__ import annotations

__all__ = [
    "ALLOWED_COMMANDS",
    "ALLOWED_GIT_SUBCOMMANDS",
    "SKIPPED_DIRECTORIES",
    "CodingTools",
]

import fnmatch
import os
import re
import shlex
import subprocess
from pathlib import Path

from harness.errors import ToolRetry
from harness.tools import Tool

ALLOWED_COMMANDS: frozenset[str] = frozenset({"ls", "cat", "head", "tail", "wc", "grep", "find", "git"})
"""Programs ``run_shell`` may start."""

ALLOWED_GIT_SUBCOMMANDS: frozenset[str] = frozenset({"log", "status", "diff", "show"})
"""``git`` subcommands ``run_shell`` may run (none of them writes)."""

SKIPPED_DIRECTORIES: frozenset[str] = frozenset(
    {".git", ".hg", ".svn", ".venv", "venv", "node_modules", "__pycache__", ".mypy_cache", ".ruff_cache"}
)
"""Folders ``search_text`` never descends into."""

# Shell syntax that would need a shell: the command runs without one, so refuse it
# instead of passing it through as a literal argument the model did not mean.
_SHELL_TOKENS = frozenset({"|", "||", "&", "&&", ";", ";;", ">", ">>", "<", "<<", "<<<", "2>", "2>&1", "&>"})
_SHELL_CHARACTERS = ("`", "$(", "${")
# Options that make an allowed program write, run another program or read outside paths.
_FIND_REFUSED = frozenset(
    {"-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"}
)
_GIT_REFUSED_PREFIXES = ("--output", "--ext-diff", "--textconv", "--exec")
_MAX_SEARCH_FILE_BYTES = 1_000_000


def _is_binary(sample: bytes) -> bool:
    return b"\0" in sample


class CodingTools:
    """The four tools of the coding agent, confined to ``root``.

    Args:
        root: The folder the agent may look at.
        max_output_chars: Cap on the characters one tool call returns.
        max_matches: Cap on the lines ``search_text`` returns.
        shell_timeout: Seconds a ``run_shell`` command may take.

    Raises:
        ValueError: ``root`` is not a folder, or a cap is below 1.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        max_output_chars: int = 12_000,
        max_matches: int = 100,
        shell_timeout: float = 10.0,
    ) -> None:
        folder = Path(root).expanduser().resolve()
        if not folder.is_dir():
            raise ValueError(f"root must be an existing folder, got {str(root)!r}")
        if max_output_chars < 1 or max_matches < 1:
            raise ValueError("max_output_chars and max_matches must be at least 1")
        if shell_timeout <= 0:
            raise ValueError(f"shell_timeout must be positive, got {shell_timeout}")
        self.root = folder
        self.max_output_chars = max_output_chars
        self.max_matches = max_matches
        self.shell_timeout = shell_timeout

    # ------------------------------------------------------------------ helpers

    def resolve(self, path: str) -> Path:
        """Resolve ``path`` (relative to the root, or absolute inside it).

        Raises:
            ToolRetry: The path leads outside the root.
        """
        candidate = Path(path).expanduser()
        target = (candidate if candidate.is_absolute() else self.root / candidate).resolve()
        if not target.is_relative_to(self.root):
            raise ToolRetry(
                f"{path!r} is outside the folder this agent may read ({self.root}); "
                "use a path relative to it, such as '.' or 'src/app.py'",
                hint=False,
            )
        return target

    def relative(self, path: Path) -> str:
        """``path`` relative to the root, with ``/`` separators (``.`` for the root)."""
        return path.relative_to(self.root).as_posix() or "."

    def cap(self, text: str) -> str:
        """Cut ``text`` to ``max_output_chars``, saying how much was left out."""
        if len(text) <= self.max_output_chars:
            return text
        cut = text[: self.max_output_chars]
        return f"{cut}\n[output truncated: {len(text) - len(cut):,} more characters]"

    # ------------------------------------------------------------------ the tools

    def read_file(self, path: str, offset: int = 1, limit: int = 200) -> str:
        """Read a text file, with line numbers.

        Args:
            path: File to read, relative to the project folder.
            offset: First line to show (1-based).
            limit: Maximum number of lines to show.
        """
        if offset < 1 or limit < 1:
            raise ToolRetry(f"offset and limit must be at least 1 (got offset={offset}, limit={limit})")
        target = self.resolve(path)
        if not target.exists():
            raise ToolRetry(f"no such file: {path!r}; call list_dir to see what exists", hint=False)
        if target.is_dir():
            raise ToolRetry(f"{path!r} is a folder; call list_dir({path!r}) instead", hint=False)
        data = target.read_bytes()
        if _is_binary(data[:8192]):
            raise ToolRetry(f"{path!r} is a binary file ({len(data):,} bytes); it has no lines to show")
        lines = data.decode("utf-8", errors="replace").splitlines()
        if lines and offset > len(lines):
            raise ToolRetry(f"{path!r} has {len(lines)} lines; offset {offset} is past its end")
        shown = lines[offset - 1 : offset - 1 + limit]
        last = offset - 1 + len(shown)
        width = len(str(max(last, 1)))
        body = "\n".join(f"{number:>{width}}\t{line}" for number, line in enumerate(shown, start=offset))
        header = f"{self.relative(target)}: lines {offset}-{last} of {len(lines)}"
        if last < len(lines):
            header += f" (call again with offset={last + 1} for more)"
        return self.cap(f"{header}\n{body}" if body else f"{header}\n(empty file)")

    def list_dir(self, path: str = ".") -> str:
        """List a folder: sub-folders first (ending in '/'), then files with their sizes in bytes.

        Args:
            path: Folder to list, relative to the project folder.
        """
        target = self.resolve(path)
        if not target.exists():
            raise ToolRetry(f"no such folder: {path!r}", hint=False)
        if not target.is_dir():
            raise ToolRetry(f"{path!r} is a file; call read_file({path!r}) instead", hint=False)
        folders: list[str] = []
        files: list[str] = []
        for entry in sorted(target.iterdir(), key=lambda p: p.name):
            if entry.is_dir():
                folders.append(f"{entry.name}/")
            else:
                try:
                    size = entry.stat().st_size
                except OSError:
                    size = 0
                files.append(f"{entry.name}  {size:,}")
        entries = folders + files
        header = f"{self.relative(target)}: {len(folders)} folders, {len(files)} files"
        shown = entries[: self.max_matches * 2]
        if len(shown) < len(entries):
            shown.append(f"[{len(entries) - len(shown)} more entries not shown]")
        return self.cap("\n".join([header, *shown]))

    def search_text(self, pattern: str, path: str = ".", glob: str = "*") -> str:
        """Search files for a regular expression; returns 'file:line: text' for each match.

        Args:
            pattern: Python regular expression, searched on every line.
            path: Folder (or file) to search, relative to the project folder.
            glob: Only search files whose name matches this pattern, e.g. '*.py'.
        """
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise ToolRetry(f"invalid regular expression {pattern!r}: {exc}") from exc
        target = self.resolve(path)
        if not target.exists():
            raise ToolRetry(f"no such file or folder: {path!r}", hint=False)
        matches: list[str] = []
        searched = 0
        truncated = False
        for file in self._walk(target, glob):
            try:
                data = file.read_bytes() if file.stat().st_size <= _MAX_SEARCH_FILE_BYTES else b""
            except OSError:
                continue
            if not data or _is_binary(data[:8192]):
                continue
            searched += 1
            for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), start=1):
                if regex.search(line):
                    if len(matches) == self.max_matches:
                        truncated = True
                        break
                    matches.append(f"{self.relative(file)}:{number}: {line.strip()[:200]}")
            if truncated:
                break
        header = f"{len(matches)} matches for {pattern!r} in {searched} files"
        if truncated:
            header += f" (stopped at {self.max_matches}; narrow the pattern, path or glob)"
        return self.cap("\n".join([header, *matches]))

    def _walk(self, target: Path, glob: str) -> list[Path]:
        if target.is_file():
            return [target]
        found: list[Path] = []
        for folder, subfolders, names in os.walk(target):
            subfolders[:] = sorted(d for d in subfolders if d not in SKIPPED_DIRECTORIES)
            base = Path(folder)
            for name in sorted(names):
                if fnmatch.fnmatch(name, glob):
                    file = base / name
                    # A link pointing out of the root is not followed.
                    if file.resolve().is_relative_to(self.root):
                        found.append(file)
        return found

    def run_shell(self, command: str) -> str:
        """Run one read-only command in the project folder, without a shell.

        Allowed: ls, cat, head, tail, wc, grep, find (no -exec/-delete) and git log/status/diff/show.
        Pipes, redirections, ';', '&&' and substitutions are refused.

        Args:
            command: The command line, e.g. 'wc -l agent.py' or 'git log -n 3 --oneline'.
        """
        argv = self.check_command(command)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "LC_ALL": "C",
            "GIT_PAGER": "cat",
            "PAGER": "cat",
            "GIT_CONFIG_NOSYSTEM": "1",
            "GIT_TERMINAL_PROMPT": "0",
        }
        try:
            completed = subprocess.run(
                argv,
                cwd=self.root,
                env=env,
                capture_output=True,
                timeout=self.shell_timeout,
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            raise ToolRetry(
                f"{command!r} did not finish within {self.shell_timeout:g} s; narrow it down", hint=False
            ) from None
        except OSError as exc:
            raise ToolRetry(f"cannot run {argv[0]!r}: {exc}", hint=False) from exc
        stdout = completed.stdout.decode("utf-8", errors="replace")
        stderr = completed.stderr.decode("utf-8", errors="replace")
        text = f"$ {command}\n{stdout}"
        if completed.returncode != 0:
            text += f"[exit status {completed.returncode}]\n{stderr}"
        return self.cap(text.rstrip("\n"))

    def check_command(self, command: str) -> list[str]:
        """Parse ``command`` and check it against the read-only rules.

        Returns:
            The argument vector to run (``git`` gets ``--no-pager`` and safe diff options).

        Raises:
            ToolRetry: The command is empty, not allowed, uses shell syntax or names a path
                outside the root.
        """
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            raise ToolRetry(f"cannot parse {command!r}: {exc}") from exc
        if not argv:
            raise ToolRetry("empty command; try 'ls' or 'git log -n 3 --oneline'")
        program = argv[0]
        if program not in ALLOWED_COMMANDS:
            allowed = ", ".join(sorted(ALLOWED_COMMANDS))
            raise ToolRetry(f"{program!r} is not allowed; read-only commands only: {allowed}", hint=False)
        for token in argv[1:]:
            if token in _SHELL_TOKENS or any(mark in token for mark in _SHELL_CHARACTERS):
                raise ToolRetry(
                    f"{token!r}: pipes, redirections, command lists and substitutions are not "
                    "supported (the command runs without a shell); run one command at a time",
                    hint=False,
                )
        if program == "find":
            refused = [token for token in argv[1:] if token in _FIND_REFUSED]
            if refused:
                raise ToolRetry(f"find {refused[0]} is not allowed: this tool is read-only", hint=False)
        if program == "git":
            argv = self._check_git(argv)
        for token in argv[1:]:
            self._check_path_argument(token)
        return argv

    def _check_git(self, argv: list[str]) -> list[str]:
        subcommand = argv[1] if len(argv) > 1 else ""
        if subcommand not in ALLOWED_GIT_SUBCOMMANDS:
            allowed = ", ".join(sorted(ALLOWED_GIT_SUBCOMMANDS))
            raise ToolRetry(
                f"git {subcommand or '(nothing)'} is not allowed; allowed: git {allowed} "
                "(global options such as -C or -c are not accepted)",
                hint=False,
            )
        for token in argv[2:]:
            if token.startswith(_GIT_REFUSED_PREFIXES):
                raise ToolRetry(f"git option {token!r} is not allowed: this tool is read-only", hint=False)
        safe = ["--no-ext-diff", "--no-textconv"] if subcommand in {"diff", "show", "log"} else []
        return ["git", "--no-pager", subcommand, *safe, *argv[2:]]

    def _check_path_argument(self, token: str) -> None:
        # Options such as --file=/etc/passwd carry a path after '='.
        value = token.split("=", 1)[1] if token.startswith("-") and "=" in token else token
        if token.startswith("-") and value is token:
            return
        if value.startswith(("/", "~")) or ".." in Path(value).parts:
            self.resolve(value)

    def tools(self) -> list[Tool]:
        """The four tools, ready for :class:`harness.Agent`."""
        return [
            Tool.from_function(self.read_file),
            Tool.from_function(self.list_dir),
            Tool.from_function(self.search_text),
            Tool.from_function(self.run_shell),
        ]
