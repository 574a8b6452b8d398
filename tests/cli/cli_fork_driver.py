"""Run many ``harness`` command lines, each in a forked process of one that imported the CLI once.

Usage: ``python cli_fork_driver.py`` with a JSON list of argument lists on standard input;
prints a JSON list of ``{"args", "returncode", "stdout", "stderr"}``. Each command runs in
a child forked after ``import harness.cli`` (so the import is paid once), with its own
standard output and error files, exactly as the console script runs it (``main()``, its
return value or ``SystemExit`` is the exit status). At most ``HARNESS_FORKS`` (default 4)
run at once; ``HARNESS_PREIMPORT`` names modules (comma-separated) imported before the forks.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import tempfile
import traceback

from harness.cli import main


def _child(args: list[str], out: str, err: str) -> None:
    code = 1
    try:
        with open(out, "w") as stdout, open(err, "w") as stderr:
            os.dup2(stdout.fileno(), 1)
            os.dup2(stderr.fileno(), 2)
            sys.stdout = os.fdopen(1, "w", closefd=False)
            sys.stderr = os.fdopen(2, "w", closefd=False)
            try:
                result = main(args)
                code = result if isinstance(result, int) else 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
            except BaseException:
                traceback.print_exc()
                code = 1
            sys.stdout.flush()
            sys.stderr.flush()
    finally:
        os._exit(code)


def run(cases: list[list[str]], width: int) -> list[dict[str, object]]:
    """Run ``cases``, ``width`` at a time; their results in order."""
    folder = tempfile.mkdtemp(prefix="harness-forks-")
    results: list[dict[str, object]] = [{} for _ in cases]
    running: dict[int, int] = {}
    pending = list(enumerate(cases))

    def files(index: int) -> tuple[str, str]:
        return os.path.join(folder, f"{index}.out"), os.path.join(folder, f"{index}.err")

    while pending or running:
        while pending and len(running) < width:
            index, args = pending.pop(0)
            pid = os.fork()
            if pid == 0:
                _child(args, *files(index))
            running[pid] = index
        pid, status = os.wait()
        index = running.pop(pid)
        out, err = files(index)
        with open(out) as stdout, open(err) as stderr:
            results[index] = {
                "args": cases[index],
                "returncode": os.waitstatus_to_exitcode(status),
                "stdout": stdout.read(),
                "stderr": stderr.read(),
            }
    return results


if __name__ == "__main__":
    for module in filter(None, os.environ.get("HARNESS_PREIMPORT", "").split(",")):
        importlib.import_module(module)  # paid once, before the forks
    print(json.dumps(run(json.load(sys.stdin), int(os.environ.get("HARNESS_FORKS", "4")))))
