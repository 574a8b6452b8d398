"""What DBOS writes into its system tables for a harness run: our JSON texts, verbatim.

DBOS serializes every step output, workflow input and result with the configured
:class:`dbos.Serializer` (by default pickle, base64-encoded). The harness steps return
``str``: the unit's output in the project's wire JSON. :class:`JournalSerializer` writes
such a string as ``=`` followed by the text itself, so ``operation_outputs.output`` holds
our compact JSON, readable with any SQL client and measured byte for byte. Anything else
(the workflow's input tuple, exceptions, DBOS's own values) is pickled as DBOS does by
default; a base64 text never starts with ``=``, so the two cannot be confused.
"""

from __future__ import annotations

__all__ = ["SERIALIZER_NAME", "JournalSerializer"]

import base64
import pickle
from typing import Any, Final

from dbos import Serializer

SERIALIZER_NAME: Final = "harness_json"
"""The name DBOS records in the ``serialization`` column of every row it wrote with it."""

_TEXT: Final = "="


class JournalSerializer(Serializer):
    """Strings verbatim (``=`` + text), everything else pickled (base64), as DBOS does by default."""

    def serialize(self, data: Any) -> str:
        """``=`` + ``data`` for a ``str``; base64 of its pickle otherwise."""
        if type(data) is str:
            return _TEXT + data
        return base64.b64encode(pickle.dumps(data)).decode("ascii")

    def deserialize(self, serialized_data: str) -> Any:
        """The value :meth:`serialize` wrote."""
        if serialized_data.startswith(_TEXT):
            return serialized_data[len(_TEXT) :]
        return pickle.loads(base64.b64decode(serialized_data))

    def name(self) -> str:
        """:data:`SERIALIZER_NAME`."""
        return SERIALIZER_NAME
