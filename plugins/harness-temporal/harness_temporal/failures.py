"""Harness errors across Temporal's boundaries: activity → workflow → client, as the same type.

An activity or the workflow fails with a non-retryable :class:`ApplicationError` whose
``type`` is the error's class name and whose first detail carries the error as JSON
(:func:`harness.durable.failure_to_json`). The other side rebuilds it
(:func:`rebuild`): the workflow raises a model's ``ModelRateLimitError`` as itself, so a
fallback wrapper in the workflow catches it by kind, and the client waiting on a run gets
the ``ModelAuthenticationError`` the model raised, not a generic error. An error that
cannot travel as JSON becomes :class:`~harness_temporal.errors.TemporalRunError` naming
its type.
"""

from __future__ import annotations

__all__ = ["FAILURE_KEY", "application_error", "rebuild"]

from collections.abc import Mapping
from typing import Any, Final, cast

from temporalio.exceptions import ApplicationError

from harness.durable import failure_from_json, failure_to_json
from harness.errors import WorkflowIncompatibleError
from harness_temporal.errors import TemporalRunError

FAILURE_KEY: Final = "harness_failure"
"""The key of the detail object that carries the error as JSON."""


def application_error(exc: BaseException, *, non_retryable: bool = True) -> ApplicationError:
    """The ``ApplicationError`` that carries ``exc`` (its message, class name and JSON form)."""
    if isinstance(exc, TemporalRunError):
        return ApplicationError(str(exc), type=exc.kind, non_retryable=non_retryable)
    details: list[Any] = []
    if isinstance(exc, WorkflowIncompatibleError):
        details.append(list(exc.changed))  # what RunHandle and older clients read first
    payload = failure_to_json(exc)
    if payload is not None:
        details.append({FAILURE_KEY: payload})
    message = str(exc) if isinstance(exc, WorkflowIncompatibleError) else f"{type(exc).__name__}: {exc}"
    return ApplicationError(message, *details, type=type(exc).__name__, non_retryable=non_retryable)


def rebuild(cause: ApplicationError, *, what: str | None = None, run_id: str | None = None) -> BaseException:
    """The harness error ``cause`` carries, or a :class:`TemporalRunError` naming its type.

    Args:
        cause: The failure (an activity's, or the workflow's).
        what: What failed, for a :class:`TemporalRunError`'s message (``"model request 3"``).
        run_id: The workflow id.
    """
    for detail in cause.details:
        if isinstance(detail, Mapping) and FAILURE_KEY in detail:
            error = failure_from_json(cast(Mapping[str, Any], detail)[FAILURE_KEY])
            if error is not None:
                if (
                    isinstance(error, WorkflowIncompatibleError)
                    and run_id is not None
                    and error.run_id is None
                ):
                    error.run_id = run_id
                return error
    if cause.type == "WorkflowIncompatibleError":
        changed: tuple[str, ...] = ()
        if cause.details and isinstance(cause.details[0], list):
            changed = tuple(str(c) for c in cast(list[Any], cause.details[0]))
        return WorkflowIncompatibleError(cause.message, run_id=run_id, changed=changed)
    message = f"{what} failed: {cause.message}" if what else cause.message
    return TemporalRunError(message, kind=cause.type or "ApplicationError", run_id=run_id)
