"""The plugin's own error pickles and crosses as JSON as itself, like every harness error."""

from __future__ import annotations

import json
import pickle

from harness_temporal.errors import TemporalRunError

from harness.durable import failure_from_json, failure_to_json


def test_a_temporal_run_error_round_trips_through_pickle_and_json() -> None:
    error = TemporalRunError("model request 3 failed: boom", kind="ApplicationError", run_id="wf-1")
    for back in (
        pickle.loads(pickle.dumps(error)),
        failure_from_json(json.loads(json.dumps(failure_to_json(error)))),
    ):
        assert type(back) is TemporalRunError
        assert str(back) == str(error)
        assert (back.kind, back.run_id) == ("ApplicationError", "wf-1")
