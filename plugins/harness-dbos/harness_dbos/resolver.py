"""The ``resolve_engine`` hook: ``harness worker dbos ...`` runs :func:`harness_dbos.cli.worker`.

The ``harness`` entry point ``dbos`` names this module, so an installed harness-dbos
answers ``harness worker dbos --system-db ... --queue ...`` with no setup.
"""

from __future__ import annotations

__all__ = ["resolve_engine"]

import click

from harness.hooks import hookimpl


@hookimpl
def resolve_engine(name: str) -> click.Command | None:
    """The worker command for ``"dbos"``; ``None`` for any other engine."""
    if name.strip().lower() != "dbos":
        return None
    from harness_dbos.cli import worker

    return worker
