"""``harness sessions``: list, show, search, fork, rm, prune, export and import stored sessions.

One module per concern: :mod:`~harness.cli.sessions.options` (``--store`` and opening the
store, shared with ``run`` and ``demo``), :mod:`~harness.cli.sessions.group` (the group and
``list``), :mod:`~harness.cli.sessions.show` (``show``, ``search``),
:mod:`~harness.cli.sessions.manage` (``fork``, ``rm``, ``prune``) and
:mod:`~harness.cli.sessions.transfer_cmd` (``export``, ``import``). Importing the package
registers every command.
"""

from __future__ import annotations

__all__ = ["sessions"]

from harness.cli.sessions import manage, show, transfer_cmd
from harness.cli.sessions.group import sessions

del manage, show, transfer_cmd
