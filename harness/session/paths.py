"""Where sessions live on disk, and the project a working directory belongs to."""

from __future__ import annotations

__all__ = ["SESSION_DIR_ENV", "default_session_dir", "project_id_for"]

import contextlib
import functools
import hashlib
import os
import subprocess
from pathlib import Path

SESSION_DIR_ENV = "HARNESS_SESSION_DIR"
"""Environment variable naming the session folder; it wins over the XDG default."""


def default_session_dir() -> Path:
    """Where sessions live: ``$HARNESS_SESSION_DIR``, else ``$XDG_DATA_HOME/harness/sessions``.

    Without either variable: ``~/.local/share/harness/sessions``. Every reader and writer
    (``Session.save``, ``list_sessions``, the ``harness run`` and ``harness sessions``
    commands) uses this, so they always agree.
    """
    configured = os.environ.get(SESSION_DIR_ENV)
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "harness" / "sessions"


def project_id_for(directory: str | os.PathLike[str] | None = None) -> str:
    """First 16 hex digits of the sha256 of the git top-level folder (or of ``directory``)."""
    start = Path(directory) if directory is not None else Path.cwd()
    try:
        root = str(start.resolve())
    except (OSError, ValueError, RuntimeError):  # not a path the OS can take (a NUL, a lone high surrogate)
        root = os.path.abspath(start)
    return _project_id(root)


@functools.lru_cache(maxsize=64)
def _project_id(root: str) -> str:
    with contextlib.suppress(OSError, ValueError, subprocess.SubprocessError):
        completed = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
        if completed.returncode == 0 and completed.stdout.strip():
            root = completed.stdout.strip()
    try:
        raw = os.fsencode(root)  # a non-UTF-8 folder name hashes as its bytes on disk
    except UnicodeEncodeError:
        raw = root.encode("utf-8", "surrogatepass")
    return hashlib.sha256(raw).hexdigest()[:16]
