"""Run every example script as a user would and check what it prints and writes."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from harness.core import CanonicalMessage, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart
from harness.history import check_invariants
from harness.tokens import TokenCounter
from harness.wire import dump_messages, load_messages

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
MAINTENANCE = {"make_demo_transcript.py"}  # writes into the package: not run here
SCRIPTS = sorted(p.name for p in EXAMPLES.glob("*.py") if p.name not in MAINTENANCE)


class Run:
    """One finished run of an example."""

    def __init__(self, name: str, cwd: Path, returncode: int, stdout: str, stderr: str) -> None:
        self.name = name
        self.cwd = cwd
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr

    def check(self, expect_rc: int = 0) -> Run:
        assert self.returncode == expect_rc, (
            f"{self.name} exited {self.returncode}\nstdout:\n{self.stdout}\nstderr:\n{self.stderr}"
        )
        return self


def start_example(name: str, cwd: Path, *args: str) -> subprocess.Popen[str]:
    """Start ``examples/<name>`` in a fresh interpreter with ``cwd`` as the current folder."""
    env = {**os.environ, "XDG_DATA_HOME": str(cwd / "xdg"), "PYTHONWARNINGS": "always"}
    env.pop("HARNESS_LOAD_PLUGINS", None)
    env.pop("HARNESS_DISABLE_PLUGINS", None)
    return subprocess.Popen(
        [sys.executable, str(EXAMPLES / name), *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(name: str, cwd: Path, process: subprocess.Popen[str], timeout: float = 120) -> Run:
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        stdout, stderr = process.communicate()
        pytest.fail(f"{name} did not finish in {timeout} s\n{stdout}\n{stderr}")
    return Run(name, cwd, process.returncode, stdout, stderr)


def run_example(name: str, cwd: Path, *args: str, expect_rc: int = 0) -> Run:
    return finish(name, cwd, start_example(name, cwd, *args)).check(expect_rc)


@pytest.fixture(scope="module")
def default_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    """Every example run once without arguments, all at the same time, each in its own folder."""
    started: dict[str, tuple[Path, subprocess.Popen[str]]] = {}
    for name in SCRIPTS:
        cwd = tmp_path_factory.mktemp(name.removesuffix(".py"))
        started[name] = (cwd, start_example(name, cwd))
    return {name: finish(name, cwd, process) for name, (cwd, process) in started.items()}


def default_run(runs: dict[str, Run], name: str) -> Run:
    return runs[name].check()


def lines_of(completed: Run) -> list[str]:
    return completed.stdout.splitlines()


def line_starting(lines: list[str], prefix: str) -> str:
    found = [line for line in lines if line.startswith(prefix)]
    assert found, f"no line starts with {prefix!r} in:\n" + "\n".join(lines)
    return found[0]


def number(text: str) -> int:
    return int(text.replace(",", ""))


# ------------------------------------------------------------------------------ the set


def test_every_example_is_documented_and_listed() -> None:
    readme = (EXAMPLES / "README.md").read_text()
    assert len(SCRIPTS) >= 5
    for name in [*SCRIPTS, *MAINTENANCE]:
        module = ast.parse((EXAMPLES / name).read_text())
        docstring = ast.get_docstring(module)
        assert docstring, f"{name} has no module docstring"
        assert f"uv run python examples/{name}" in " ".join(docstring.split()), f"{name}: how to run it"
        assert f"[`{name}`]({name})" in readme, f"examples/README.md does not list {name}"
    listed = set(re.findall(r"\[`([\w.]+\.py)`\]", readme))
    assert listed == {*SCRIPTS, *MAINTENANCE}, "examples/README.md lists a script that does not exist"


@pytest.mark.parametrize("name", SCRIPTS)
def test_example_leaves_no_files_and_no_warnings(name: str, default_runs: dict[str, Run]) -> None:
    completed = default_run(default_runs, name)
    tmp_path = completed.cwd
    assert len(lines_of(completed)) >= 4, completed.stdout
    # Only HarnessExperimentalWarning is expected, and every example silences it.
    assert completed.stderr == "", completed.stderr
    expected = {"compacted.json"} if name == "compact_transcript.py" else set()
    assert {p.name for p in tmp_path.iterdir()} == expected
    assert not (tmp_path / "xdg").exists(), "sessions leaked into the user's data folder"


# ------------------------------------------------------------------------------ basic_agent


def test_basic_agent(default_runs: dict[str, Run]) -> None:
    lines = lines_of(default_run(default_runs, "basic_agent.py"))
    assert lines[0] == "turn 1: notes.txt says: apples: 12, pears: 30"
    assert lines[1] == "turn 2: The total is 42."
    retry = line_starting(lines, "turn 2 retry prompts:")
    assert retry.startswith("turn 2 retry prompts: 1 (cannot evaluate '12 + 30 +'")
    assert line_starting(lines, "saved ").startswith("saved 10 messages to sessions/")
    assert "system prompt stored in the file: False" in lines
    assert "turn 3 (resumed): Earlier I read 1 file(s) and computed 42." in lines
    assert "history: 12 messages, invariant violations: 0" in lines
    usage = re.fullmatch(r"usage of turn 3: (\d+) request \+ (\d+) response tokens", lines[-1])
    assert usage is not None, lines[-1]
    # The resumed run sent the whole earlier conversation again: far more than its own prompt.
    assert int(usage[1]) > 100
    assert int(usage[2]) > 0


# ------------------------------------------------------------------------------ capability_stack

EVENT = re.compile(
    r"\s+request\s+(\d+) (\w+)\s+(\d+)->\s*(\d+) messages\s+([\d,]+)->\s*([\d,]+) tokens "
    r"\(cleared (\d+), removed (\d+)\)"
)


def test_capability_stack(default_runs: dict[str, Run]) -> None:
    lines = lines_of(default_run(default_runs, "capability_stack.py"))
    assert (
        lines[0]
        == "resolved order: dedupe_file_reads -> clear_tool_results -> sliding_window -> limit_warner"
    )
    events = [m for m in (EVENT.fullmatch(line) for line in lines) if m is not None]
    by_strategy: dict[str, list[re.Match[str]]] = {}
    for event in events:
        by_strategy.setdefault(event[2], []).append(event)
    assert set(by_strategy) == {"dedupe_file_reads", "clear_tool_results", "sliding_window"}
    for event in events:
        assert number(event[6]) < number(event[5]), f"an event that saved nothing: {event[0]}"
    for event in by_strategy["dedupe_file_reads"] + by_strategy["clear_tool_results"]:
        assert event[3] == event[4], "dedupe and clear never remove a message"
        assert int(event[7]) > 0
    for event in by_strategy["sliding_window"]:
        assert int(event[4]) < int(event[3])
        assert int(event[8]) > 0
    summary = line_starting(lines, "events by strategy:")
    for strategy, found in by_strategy.items():
        assert f"'{strategy}': {len(found)}" in summary

    assert "output: Done after 48 tool calls: parser_step_7 needs the off-by-one fix." in lines
    assert line_starting(lines, "requests: 49, tool events: ").endswith(
        "{'completed': 48, 'registered': 48, 'started': 48}"
    )
    sizes = re.fullmatch(
        r"tool output: ([\d,]+) tokens in total; largest request sent: ([\d,]+) tokens",
        line_starting(lines, "tool output:"),
    )
    assert sizes is not None
    assert number(sizes[2]) <= 3_000 < 5 * 3_000 < number(sizes[1])
    assert "every request at most 3,000 tokens: True" in lines
    warned = re.fullmatch(
        r"limit warnings sent \(request-scoped\): (\d+), stored: (\d+)",
        line_starting(lines, "limit warnings sent"),
    )
    assert warned is not None
    assert int(warned[1]) >= 1
    assert int(warned[2]) == 0
    assert re.fullmatch(r"final history: \d+ messages, invariant violations: 0", lines[-1])


# ------------------------------------------------------------------------------ custom_capability


def test_custom_capability(default_runs: dict[str, Run]) -> None:
    lines = lines_of(default_run(default_runs, "custom_capability.py"))
    assert lines[0] == "compact_sync: truncate_long_tool_returns truncated ['c1', 'c2']"
    tokens = re.fullmatch(r"  tokens (\d+) -> (\d+), input untouched: True", lines[1])
    assert tokens is not None
    assert int(tokens[2]) < int(tokens[1]) / 2
    assert "'truncated_by': 'truncate_long_tool_returns'" in lines[2]
    assert "  second pass: 0 events (recognised by its mark)" in lines
    assert "agent: resolved order ['truncate_long_tool_returns', 'clear_tool_results']" in lines
    seen = re.fullmatch(
        r"  output: I saw the old result as (\d+) characters and the newest in full, (\d+) characters\.",
        line_starting(lines, "  output:"),
    )
    assert seen is not None
    assert int(seen[1]) < 200 < 1_000 < int(seen[2])
    assert "  violations: []" in lines
    assert "guard (compact_sync): CapabilityError from 'drop_oldest_tool_return'" in lines
    assert "dangling_call" in line_starting(lines, "  compact left a history the provider would reject:")
    assert lines[-1] == "guard (in place): history restored: True, events kept: 0"


# ------------------------------------------------------------------------------ compact_transcript


def test_compact_transcript_default_demo(default_runs: dict[str, Run]) -> None:
    completed = default_run(default_runs, "compact_transcript.py")
    tmp_path = completed.cwd
    lines = lines_of(completed)
    loaded = re.fullmatch(
        r"loaded harness\.cli\.demo/transcript\.json \(embedded\): (\d+) messages",
        lines[0],
    )
    assert loaded is not None, lines[0]
    strategies = [line.split()[0] for line in lines if line.startswith("  ")]
    assert strategies == ["dedupe_file_reads", "clear_tool_results", "summarizing", "tiered"]
    totals = re.fullmatch(
        r"tokens: ([\d,]+) -> ([\d,]+) \(target 1,600, window 8,000\)", line_starting(lines, "tokens:")
    )
    assert totals is not None
    assert "fits the target: True" in lines
    assert line_starting(lines, "summary (").endswith("made without a model.")

    written = load_messages((tmp_path / "compacted.json").read_bytes())
    assert check_invariants(written) == []
    assert TokenCounter().count_messages(written) == number(totals[2]) <= 1_600
    assert len(written) < int(loaded[1])
    assert f"messages: {loaded[1]} -> {len(written)}, invariant violations: 0" in lines
    assert lines[-1] == f"wrote compacted.json ({len(written)} messages)"
    # The task survives at the front of the compacted history.
    first = written[0]
    assert any(isinstance(p, UserPromptPart) and "parser_step_7" in p.text for p in first.parts)


def reading_session(reads: int) -> list[CanonicalMessage]:
    messages = [CanonicalMessage.user("Find the bug in app.py.")]
    for i in range(reads):
        call_id = f"r{i}"
        messages.append(
            CanonicalMessage.response(
                TextPart(f"Reading again ({i})."),
                ToolCallPart(tool_call_id=call_id, tool_name="read_file", args={"path": "app.py"}),
            )
        )
        body = "\n".join(f"def f{j}(x: int) -> int:\n    return x + {j + i}" for j in range(40))
        messages.append(
            CanonicalMessage.request(
                ToolReturnPart(tool_call_id=call_id, tool_name="read_file", content=body)
            )
        )
    messages.append(CanonicalMessage.response(TextPart("Found it.")))
    return messages


def test_compact_transcript_file_argument_and_options(tmp_path: Path) -> None:
    source = tmp_path / "session.json"
    history = reading_session(8)
    source.write_bytes(dump_messages(history))
    before = source.read_bytes()
    size = TokenCounter().count_messages(history)
    window = size  # target 0.5 of the history's own size
    lines = lines_of(
        run_example(
            "compact_transcript.py",
            tmp_path,
            str(source),
            "--output",
            "out.json",
            "--window",
            str(window),
            "--target",
            "0.5",
        )
    )
    assert lines[0] == f"loaded {source}: {len(history)} messages"
    assert lines[1].split()[0] == "dedupe_file_reads"  # the cheapest tier was enough
    assert "fits the target: True" in lines
    assert source.read_bytes() == before, "the input must never be modified"
    written = load_messages((tmp_path / "out.json").read_bytes())
    assert check_invariants(written) == []
    assert len(written) == len(history)  # dedupe replaces contents, never messages
    assert TokenCounter().count_messages(written) <= window // 2


def test_compact_transcript_rejects_a_file_that_is_not_a_history(tmp_path: Path) -> None:
    bad = tmp_path / "manifest.json"
    bad.write_text('{"files": []}')
    completed = run_example("compact_transcript.py", tmp_path, str(bad), expect_rc=2)
    assert completed.stdout == ""
    assert completed.stderr.startswith(f"error: cannot load {bad}: ")
    assert "JSON array" in completed.stderr
    assert not (tmp_path / "compacted.json").exists()


# ------------------------------------------------------------------------------ resume_session


def test_resume_session(default_runs: dict[str, Run]) -> None:
    lines = lines_of(default_run(default_runs, "resume_session.py"))
    assert lines[0] == "saved: 2 session files, 1 backup (the planning session was saved twice)"
    # Newest first: the review session was saved last.
    assert lines[1] == "listed: review: 2 messages, model prompt-counter"
    assert lines[2] == "listed: planning: 4 messages, model prompt-counter"
    assert lines[3] == "resumed: This is prompt 3 of our conversation: 'And when do we ship?'."
    usage = re.fullmatch(r"resumed: 4 -> 6 messages, usage (\d+) -> (\d+) tokens", lines[4])
    assert usage is not None
    assert 0 < int(usage[1]) < int(usage[2])
    assert lines[5].startswith("corrupt: SessionLoadError: not valid JSON")
    assert "corrupt: file untouched: True" in lines
    assert "corrupt: list_sessions reports 1 problem(s): ['0000000000000000_broken.json']" in lines
    assert "corrupt: saving over it is refused (pass force=True to replace it)" in lines
    assert lines[-1] == "corrupt: file still untouched: True"
