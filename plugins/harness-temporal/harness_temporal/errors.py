"""The plugin's errors.

A workflow or activity fails with a non-retryable
:class:`temporalio.exceptions.ApplicationError` whose ``type`` names the harness error;
the client's handle turns it back into a typed exception.
"""

from __future__ import annotations

__all__ = ["TemporalRunError"]

from harness.errors import HarnessError


class TemporalRunError(HarnessError):
    """A Temporal run (or one of its units) failed: ``kind`` names the error it stopped with.

    Attributes:
        kind: The harness error's class name (``"MaxIterationsExceeded"``...), or the
            Temporal failure's type.
        run_id: The workflow id, when known.
    """

    def __init__(self, message: str, *, kind: str, run_id: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.run_id = run_id
