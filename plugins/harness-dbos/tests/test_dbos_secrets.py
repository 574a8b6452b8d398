"""No password reaches DBOS's journal: the run names its store, the engine's process knows the URL."""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path

import pytest
from harness_dbos import DBOSEngine, JournalSerializer
from harness_dbos.scenarios import AGENT, PROMPT, without_blocking

from harness.errors import StoreCredentialsError
from harness.testing.durable import SCENARIO_ENV, Scenario


def journal_text(path: Path) -> str:
    """Every value of every table of a DBOS system database, decoded where it is serialized."""
    serializer = JournalSerializer()
    texts: list[str] = []
    with sqlite3.connect(path) as db:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        for table in tables:
            for row in db.execute(f'SELECT * FROM "{table}"'):
                for value in row:
                    if isinstance(value, bytes):
                        value = value.decode("utf-8", "replace")
                    if not isinstance(value, str):
                        continue
                    texts.append(value)
                    try:
                        texts.append(repr(serializer.deserialize(value)))
                    except Exception:  # not a serialized value
                        continue
    return "\n".join(texts)


async def test_a_named_store_keeps_the_password_out_of_the_system_database(
    sqlite_system_db: str,
    pg_store_url: str,
    record_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The test server trusts loopback connections: any password is accepted, it only has to be
    # somewhere it could leak from.
    secret, ssl_secret = "TopSecret-5d1e", "SslSecret-0b7c"
    url = pg_store_url.replace("://root@", f"://root:{secret}@", 1) + f"&sslpassword={ssl_secret}"
    with pytest.raises(StoreCredentialsError, match="name the store instead"):
        DBOSEngine(sqlite_system_db, store_url=url, agent=AGENT)
    scenario = Scenario(record_dir=str(record_dir), steps=3, compaction=False)
    monkeypatch.setenv(SCENARIO_ENV, scenario.to_json())
    without_blocking(record_dir)
    caplog.set_level(logging.DEBUG)
    engine = DBOSEngine(
        sqlite_system_db,
        store_url="@app",
        agent=AGENT,
        stores=[f"app={url}"],
        listen=False,
        polling_interval=0.1,
    )
    engine.launch()
    try:
        summary = await (await engine.start(PROMPT)).result()
    finally:
        engine.shutdown()
    assert summary.output is not None
    assert summary.output.startswith("Done after 3 steps")
    journal = journal_text(Path(sqlite_system_db.removeprefix("sqlite:///")))
    assert '"store":{"name":"app"}' in journal
    logs = "\n".join(record.getMessage() for record in caplog.records)
    for text in (journal, logs, repr(engine.stores), str(summary)):
        assert secret not in text
        assert ssl_secret not in text
