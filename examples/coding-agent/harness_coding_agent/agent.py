"""``build_agent``: the coding agent, assembled from the public harness API.

Example::

    from harness import Session
    from harness_coding_agent import build_agent, scripted_model

    agent = build_agent(scripted_model(), root=".")
    session = Session()
    print(agent.run_sync("What does this project do?", session).output)
"""

from __future__ import annotations

__all__ = ["SYSTEM_PROMPT", "build_agent"]

import os
from collections.abc import Sequence

from harness.core import Model
from harness.hooks import PluginManager
from harness.run import Agent
from harness_coding_agent.tools import CodingTools

SYSTEM_PROMPT = """\
You are a careful coding assistant exploring a software project. You can only read: \
list_dir shows a folder, read_file shows a file with line numbers (use offset and limit \
for long files), search_text finds a regular expression in files, and run_shell runs one \
read-only command (ls, cat, head, tail, wc, grep, find, git log/status/diff/show) without \
a shell, so no pipes or redirections. Every path is relative to the project folder; you \
cannot leave it.

Work like this: look around before answering, read the files that matter rather than \
guessing, and prefer search_text over reading many files. When a tool refuses a call, \
read why and adjust. Older tool results may be shortened or summarized to keep the \
conversation within the context window; read a file again if you need its exact text.

Answer concisely: name the files and the line numbers your answer rests on, and say \
what you did not check."""
"""The default system prompt (sent with every request, never stored in the session)."""


def build_agent(
    model: Model,
    *,
    root: str | os.PathLike[str] = ".",
    stack: Sequence[object] = (),
    system_prompt: str | None = None,
    plugin_manager: PluginManager | None = None,
    max_iterations: int = 40,
    tools: CodingTools | None = None,
) -> Agent:
    """The coding agent: ``model`` with the four read-only tools confined to ``root``.

    Sessions are not part of the agent: pass one to ``agent.run(prompt, session)`` to
    continue or save a conversation.

    Args:
        model: Any :class:`harness.core.model.Model` (the scripted model, a provider model...).
        root: The folder the tools may read.
        stack: Capabilities run before every model request (compaction, warnings).
        system_prompt: Replaces :data:`SYSTEM_PROMPT`.
        plugin_manager: A prepared plugin manager (observers such as a progress printer).
        max_iterations: Model requests allowed per run.
        tools: Preconfigured tools (other caps or timeouts); built from ``root`` when omitted.

    Raises:
        ValueError: ``root`` is not a folder.
    """
    toolset = tools if tools is not None else CodingTools(root)
    return Agent(
        model,
        tools=toolset.tools(),
        capabilities=stack,
        system_prompt=system_prompt if system_prompt is not None else SYSTEM_PROMPT,
        plugin_manager=plugin_manager,
        max_iterations=max_iterations,
        fallback_tool_calls=False,
    )
