"""``harness eval`` with bad files among good ones: one line per bad file, the good ones measured.

The pool's worker raises the file's ``HistoryFileError``; it must reach the parent as itself
(it once could not be unpickled, and the pool died with ``BrokenProcessPool``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from harness.core import CanonicalMessage
from harness.errors import HistoryFileError
from harness.eval import evaluate
from harness.wire import dump_messages

HARNESS = str(Path(sys.executable).with_name("harness"))


@pytest.fixture
def files(tmp_path: Path, bug_fix: list[CanonicalMessage]) -> list[Path]:
    good = tmp_path / "good.json"
    good.write_bytes(dump_messages(bug_fix))
    bad = tmp_path / "bad.json"
    bad.write_text('{"hello": 1}')
    worse = tmp_path / "worse.json"
    worse.write_text("[1, 2")
    return [good, bad, worse]


@pytest.mark.parametrize("processes", ["1", "2"])
def test_each_bad_file_gets_one_line_and_the_good_one_is_measured(files: list[Path], processes: str) -> None:
    done = subprocess.run(
        [
            HARNESS,
            "eval",
            *map(str, files),
            "--stack",
            "none",
            "--stack",
            "tiered",
            "--budget",
            "8000",
            "--processes",
            processes,
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 2, done.stderr
    assert all(line.startswith("error: HistoryFileError: ") for line in lines)
    assert {line.split(": ")[2] for line in lines} == {str(files[1]), str(files[2])}
    assert "Traceback" not in done.stderr
    assert "BrokenProcessPool" not in done.stderr
    assert '"stack": "tiered"' in done.stdout


def test_evaluate_passes_each_bad_file_once_to_on_error(files: list[Path]) -> None:
    seen: list[BaseException] = []
    report = evaluate(files, ["none", "tiered"], [8000], processes=2, on_error=seen.append)
    assert sorted(str(e.path) for e in seen if isinstance(e, HistoryFileError)) == sorted(map(str, files[1:]))
    assert len(seen) == 2
    assert {r.file for r in report.runs} == {str(files[0])}
    with pytest.raises(HistoryFileError):
        evaluate(files, ["none"], [8000], processes=2)
