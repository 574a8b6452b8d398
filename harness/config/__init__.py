r"""Capability stacks from configuration: a TOML file or a one-line ``--stack`` string.

A *stack* is an ordered list of capabilities, each named by its entry-point name in the
``harness`` group (``sliding_window``, ``clear_tool_results``, ``dedupe_file_reads``,
``limit_warner``, ``summarizing``, ``tiered``, or any third-party plugin) and configured
with keyword arguments of its class's constructor. Configuration goes through two steps:

1. :func:`parse_stack` (short form) or :func:`load_stack_file` (TOML) turn text into
   :class:`StackEntry` objects: a name, typed parameters, and where the entry came from.
2. :func:`build_stack` looks every name up among the installed capabilities, checks each
   parameter against the class's constructor signature *before* constructing it,
   converts values by the parameter's annotation, and instantiates the classes.

The grammar, the values' conversion and the builder live below this package
(:mod:`harness.capabilities` and :mod:`harness.hooks.stacks`), because
``Agent(capabilities=["sliding_window:max_messages=80"])`` and
:meth:`PluginManager.add_capabilities <harness.hooks.manager.PluginManager.add_capabilities>`
build strings the same way; this package adds the files, their discovery and the defaults.

:func:`resolve_stack` does both with the usual precedence: an explicit ``--stack``
string, else an explicit configuration file, else a ``harness.toml`` (or a
``pyproject.toml`` with a ``[tool.harness]`` table) found in the current folder or one of
its parents, else a default short-form string.

Every problem raises :class:`~harness.errors.StackConfigError` naming the entry (``--stack entry 2``,
``harness.toml [[stack]] 3``), the capability, the parameter and the accepted values,
with a "did you mean" suggestion when a name is close to a known one.

Short form
----------

Grammar (whitespace is any Unicode whitespace)::

    stack    := ws* ( entry ( ws+ entry )* )? ws*
    entry    := NAME ( "[" stack "]" )? ( ":" params )?
    params   := param ( "," ws* param )*
    param    := KEY "=" value
    value    := item ( "|" item )*
    item     := QUOTED | BARE | (nothing)
    NAME     := [A-Za-z0-9_.-]+           an entry-point name
    KEY      := [A-Za-z_][A-Za-z0-9_]*    a constructor parameter
    QUOTED   := a JSON string literal: "..." with JSON escapes (\" \\ \n \u00e9 ...)
    BARE     := one or more characters other than whitespace and , = [ ] " |

* Entries are separated by whitespace, parameters by commas, list items by ``|``.
* ``NAME[...]`` gives the entry's ``tiers`` parameter: the stack inside the brackets, for
  :class:`TieredCompaction <harness_tiered.TieredCompaction>`. Brackets nest.
* A bare item is typed literally: ``true`` / ``false`` (any case) are booleans,
  ``none`` / ``null`` (any case) are ``None``, ``3`` / ``-2`` / ``20_000`` are integers,
  ``0.5`` / ``1e-3`` are floats, anything else is a string. A quoted item is always a
  string (``"3"`` is the text 3; ``"a b, c"`` may hold any character).
* A value containing ``|`` is a list: ``exclude_tools=bash|grep``. Empty unquoted items
  are dropped, so ``bash|`` is a one-item list and ``|`` an empty list. ``key=`` (nothing)
  is the empty string.

Example::

    dedupe_file_reads clear_tool_results:keep_pairs=3,exclude_tools=bash|grep
    tiered[dedupe_file_reads clear_tool_results:keep_pairs=3 sliding_window]:target_fraction=0.5
    clear_tool_results:placeholder="[cleared, see log]"

:func:`format_stack` writes entries back in this form; ``parse_stack(format_stack(e))``
equals ``e`` for every stack of scalars (finite floats), lists of scalars and nested
``tiers`` stacks.

TOML
----

In ``harness.toml`` the stack is the top-level ``stack`` key; in ``pyproject.toml`` it is
``stack`` in the ``[tool.harness]`` table. It is an array of tables (one per capability:
``name`` plus its parameters), a short-form string, or an array mixing both::

    [[stack]]
    name = "dedupe_file_reads"

    [[stack]]
    name = "clear_tool_results"
    keep_pairs = 3
    exclude_tools = ["bash"]

    [[stack]]
    name = "tiered"
    target_fraction = 0.5
    tiers = [{name = "dedupe_file_reads"}, {name = "sliding_window", keep_messages = 6}]

``tiers`` may also be written as sub-tables (``[[stack.tiers]]`` after the ``[[stack]]``
it belongs to) or as a short-form string (``tiers = "dedupe_file_reads sliding_window"``).
Named stacks live under ``stacks``: ``[[stacks.small]]`` tables or
``stacks.small = "..."``, selected with ``load_stack_file(path, name="small")`` (the
``--stack-name`` option of the command line).

Values are converted by the constructor's annotation: an integer is accepted for a
``float`` parameter, a single value for a list parameter, the strings ``"3"`` /
``"true"`` for ``int`` / ``bool`` parameters, a number for a ``str`` parameter, and a list
becomes a tuple for a ``tuple`` parameter. Parameters whose annotation is not one of
``int``, ``float``, ``bool``, ``str``, ``None``, ``Literal[...]`` or a sequence of those
receive the value unchanged.

Default triggers
----------------

An entry that sets none of ``max_messages``, ``max_tokens`` and ``max_fraction`` gets the
capability class's ``default_trigger`` (see :attr:`harness.capabilities.base.Capability.default_trigger`),
so ``clear_tool_results:keep_pairs=3`` is a complete entry. A ``max_fraction`` trigger
needs the context window: the model's, or the ``context_window`` given to
:func:`build_stack` (the command line's ``--window`` / ``--budget``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__all__ = [
    "CONFIG_FILE_NAME",
    "PYPROJECT_FILE_NAME",
    "StackEntry",
    "TRIGGER_PARAMETERS",
    "build_stack",
    "default_stack_entries",
    "default_stack_spec",
    "find_stack_file",
    "load_agent",
    "format_stack",
    "installed_capability_classes",
    "load_stack_file",
    "parse_stack",
    "resolve_stack",
    "tiered_stack_entries",
]

from harness.capabilities._stack_entries import StackEntry
from harness.capabilities._stack_grammar import format_stack, parse_stack
from harness.config._build import TRIGGER_PARAMETERS, build_stack, installed_capability_classes, resolve_stack
from harness.config._files import CONFIG_FILE_NAME, PYPROJECT_FILE_NAME, find_stack_file, load_stack_file
from harness.config.stacks import default_stack_entries, default_stack_spec, tiered_stack_entries

if TYPE_CHECKING:
    from harness.config.agents import load_agent


def __getattr__(name: str) -> Any:
    """``load_agent`` on first use: it imports the agent loop, which stack parsing never needs."""
    if name == "load_agent":
        from harness.config.agents import load_agent

        return load_agent
    raise AttributeError(f"module 'harness.config' has no attribute {name!r}")
