"""The stacks ``harness eval`` compares: short preset names or any short-form stack string.

Presets:

* ``tiered``: the default tiered stack (:func:`harness.config.stacks.tiered_stack_entries`:
  dedupe, clear, summarize with the offline structural digest, slide; no limit warner);
* ``clear+window``: that stack's clearing and sliding tiers as two plain capabilities;
* ``none``: no capability (the uncompacted replay).

Anything else is a short-form stack string, as ``--stack`` takes everywhere. Each stack is
built for every budget with ``context_window`` set to the budget, so fractions such as
``max_fraction=0.8`` are fractions of the budget.
"""

from __future__ import annotations

__all__ = ["CLEAR_WINDOW_SPEC", "DEFAULT_STACKS", "PRESETS", "EvalStack", "build_eval_stack", "eval_stack"]

from typing import Final

import attrs

from harness.capabilities.base import Capability
from harness.config import build_stack, format_stack, parse_stack
from harness.config.stacks import TIERED_NAMES, require_installed, tiered_stack_entries

CLEAR_WINDOW_SPEC: Final = (
    "clear_tool_results:keep_pairs=3,max_fraction=0.8 sliding_window:keep_messages=6,max_fraction=0.8"
)
"""The ``clear+window`` preset: the default tiered stack's clearing and sliding tiers, untiered."""

PRESETS: Final = ("tiered", "clear+window", "none")
"""The preset names, in report order."""

DEFAULT_STACKS: Final = PRESETS
"""The stacks evaluated when none is given."""


@attrs.frozen
class EvalStack:
    """A stack to evaluate.

    Attributes:
        label: How reports name it (the preset name, or the stack string).
        spec: The short-form stack string (``""``: no capability).
    """

    label: str
    spec: str


def eval_stack(name_or_spec: str) -> EvalStack:
    """A preset by name, or a short-form stack string as given.

    Raises:
        StackConfigError: The string is not a valid stack, or names a capability that is not
            installed (naming the distribution to install).
    """
    text = name_or_spec.strip()
    if text == "tiered":
        # a preset is never evaluated with tiers missing: its figures would be another stack's
        require_installed(TIERED_NAMES, what="the 'tiered' preset", source="--stack tiered")
        return EvalStack("tiered", format_stack(tiered_stack_entries()))
    if text == "clear+window":
        require_installed(
            parse_stack(CLEAR_WINDOW_SPEC), what="the 'clear+window' preset", source="--stack clear+window"
        )
        return EvalStack("clear+window", CLEAR_WINDOW_SPEC)
    if text in ("none", ""):
        return EvalStack("none", "")
    require_installed(parse_stack(text, source="--stack"), what="this stack", source="--stack")  # fail early
    return EvalStack(text, text)


def build_eval_stack(stack: EvalStack, budget: int) -> list[Capability]:
    """Build ``stack`` for a context window of ``budget`` tokens.

    Raises:
        StackConfigError: An entry cannot be built.
    """
    return build_stack(parse_stack(stack.spec, source="--stack"), context_window=budget)
