"""Crash safety: SIGKILL a process while it saves a session, many times.

A helper subprocess imports harness once and then, for every round the test asks for,
forks a child that saves the session in a tight loop (each save one generation bigger)
and SIGKILLs it after a random delay. After every kill the test loads the file: it must
always load, and its generation must never go backwards (old or new, never torn).
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.session import Session

ZYGOTE = textwrap.dedent(
    """
    import os, random, signal, sys, time
    from pathlib import Path
    from harness.core import CanonicalMessage, TextPart, ToolCallPart, ToolReturnPart
    from harness.session import Session
    from harness.errors import SessionLoadError
    import harness.wire  # imported once here, not in every forked saver

    path = Path(sys.argv[1])

    def saver():
        try:
            session = Session.load(path)
        except SessionLoadError:
            session = Session(session_id="crash", project_id="p" * 16)
        gen = int(session.current_model or "0")
        while True:
            gen += 1
            n = len(session.messages)
            session.messages.append(CanonicalMessage.user(f"prompt {gen} " + "x" * 2000))
            call = ToolCallPart(tool_call_id=f"c{n}", tool_name="t", args={"i": gen})
            session.messages.append(CanonicalMessage.response(TextPart("y" * 1500), call))
            result = ToolReturnPart(tool_call_id=f"c{n}", tool_name="t", content="z" * 1000)
            session.messages.append(CanonicalMessage.request(result))
            session.messages.append(CanonicalMessage.response(TextPart(f"answer {gen}")))
            if len(session.messages) > 400:
                del session.messages[:200]
            session.current_model = str(gen)
            session.total_tokens = gen
            session.save(path)

    print("ready", flush=True)
    for line in sys.stdin:
        delay = float(line)
        pid = os.fork()
        if pid == 0:
            try:
                saver()
            finally:
                os._exit(1)
        time.sleep(delay)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        print("killed", flush=True)
    """
)

ROUNDS = 40


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_sigkill_during_save_never_leaves_a_torn_file(tmp_path: Path) -> None:
    path = tmp_path / "pp_crash.json"
    rng = random.Random(1234)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    with subprocess.Popen(
        [sys.executable, "-c", ZYGOTE, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    ) as proc:
        assert proc.stdin is not None
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        last_generation = 0
        loads = 0
        for round_index in range(ROUNDS):
            # the first rounds give the saver time to write a first file
            delay = 0.2 if round_index == 0 else rng.uniform(0.0, 0.04)
            proc.stdin.write(f"{delay}\n")
            proc.stdin.flush()
            assert proc.stdout.readline().strip() == "killed"
            if not path.exists():
                continue
            session = Session.load(path)  # must never raise
            loads += 1
            generation = int(session.current_model or "0")
            assert generation >= last_generation
            assert session.total_tokens == generation
            assert f"answer {generation}" in str(session.messages[-1].parts[0])
            last_generation = generation
            backup = path.with_name(path.name + ".bak")
            if backup.exists():
                assert int(Session.load(backup).current_model or "0") <= generation
        proc.stdin.close()
        proc.wait(timeout=10)
    assert loads >= ROUNDS - 1
    assert last_generation >= ROUNDS // 4  # the savers made progress across kills
    leftovers = [p for p in tmp_path.iterdir() if p.suffix == ".tmp"]
    assert all(p.name.startswith(".") for p in leftovers)  # stray temp files are hidden dotfiles
