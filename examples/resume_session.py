"""Sessions: save conversations, list them, load one and continue it, and survive a corrupt file.

What it shows:

* ``Session.create(folder)`` gives a session a file name (``<project>_<session>.json``);
  ``Agent.run`` saves it after every run (atomically, keeping the previous version as
  ``<name>.bak``).
* ``list_sessions(folder)`` lists saved sessions newest first and *reports* files it
  cannot read instead of skipping them.
* ``find_session(id, folder)`` + ``Session.load(path)``: resume a conversation; the model
  sees the earlier turns and the usage keeps adding up.
* A corrupt (truncated) session file: ``Session.load`` raises ``SessionLoadError``
  naming the file and the problem, the file is left byte-for-byte untouched, and saving
  over it is refused unless ``force=True``.

Everything happens in a temporary folder. Run it with
``uv run python examples/resume_session.py``.
"""

from __future__ import annotations

import hashlib
import tempfile
from pathlib import Path

from harness import CanonicalMessage, UserPromptPart
from harness.errors import SessionLoadError, SessionSaveError
from harness.models.function import FunctionInfo, FunctionModel
from harness.run import Agent
from harness.session import Session, find_session, list_sessions


def count_prompts(messages: list[CanonicalMessage], info: FunctionInfo) -> str:
    """A model that says how many user prompts it has seen in the conversation."""
    prompts = [p.text for m in messages for p in m.parts if isinstance(p, UserPromptPart)]
    return f"This is prompt {len(prompts)} of our conversation: {prompts[-1]!r}."


def digest(path: Path) -> str:
    """Short sha256 of a file, to show it was not touched."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:12]


def main() -> None:
    """Save two sessions, list them, resume one, then meet a corrupt file."""
    agent = Agent(FunctionModel(count_prompts, model_name="prompt-counter"))
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)

        # 1. Two conversations, saved by the agent after each run.
        planning = Session.create(folder)
        agent.run_sync("Plan the release.", planning)
        agent.run_sync("Who reviews it?", planning)
        review = Session.create(folder)
        agent.run_sync("Review the diff.", review)
        files, backups = len(list(folder.glob("*.json"))), len(list(folder.glob("*.json.bak")))
        print(f"saved: {files} session files, {backups} backup (the planning session was saved twice)")

        # 2. List them, newest first.
        listing = list_sessions(folder)
        for info in listing.sessions:
            which = "planning" if info.session_id == planning.session_id else "review"
            print(f"listed: {which}: {info.message_count} messages, model {info.current_model}")

        # 3. Resume the planning session from its file.
        path = find_session(planning.session_id, folder)
        assert path is not None
        resumed = Session.load(path)
        loaded = (len(resumed.messages), resumed.usage.total_tokens)
        result = agent.run_sync("And when do we ship?", resumed)
        print(f"resumed: {result.output}")
        print(
            f"resumed: {loaded[0]} -> {len(resumed.messages)} messages, "
            f"usage {loaded[1]} -> {resumed.usage.total_tokens} tokens"
        )

        # 4. A corrupt file: truncated in the middle of a write by some other program.
        broken = folder / "0000000000000000_broken.json"
        broken.write_bytes(path.read_bytes()[:150])
        before = digest(broken)
        try:
            Session.load(broken)
        except SessionLoadError as exc:
            print(f"corrupt: SessionLoadError: {exc.reason.split(':')[0]}")
        print(f"corrupt: file untouched: {digest(broken) == before}")
        problems = list_sessions(folder).problems
        print(f"corrupt: list_sessions reports {len(problems)} problem(s): {[p.path.name for p in problems]}")
        try:
            Session(messages=resumed.messages).save(broken)
        except SessionSaveError:
            print("corrupt: saving over it is refused (pass force=True to replace it)")
        print(f"corrupt: file still untouched: {digest(broken) == before}")


if __name__ == "__main__":
    main()
