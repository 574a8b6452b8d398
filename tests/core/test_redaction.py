"""MaskedURL: credentials masked in what shows, stripped in what is journaled, kept for the driver."""

from __future__ import annotations

import pickle
import string

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from harness import MaskedURL
from harness.errors import SessionConflictError, SessionStoreError, StoreResolutionError
from harness.redaction import mask_url, redact
from harness.stores import open_store


@pytest.mark.parametrize(
    ("raw", "masked", "stripped"),
    [
        (
            "postgresql://app:TopSecret@db/agents",
            "postgresql://app:***@db/agents",
            "postgresql://app@db/agents",
        ),
        (
            "postgresql://app@db/agents?sslpassword=S3&sslmode=require",
            "postgresql://app@db/agents?sslpassword=***&sslmode=require",
            "postgresql://app@db/agents?sslmode=require",
        ),
        ("postgres://u@h/d?PassWord=x", "postgres://u@h/d?PassWord=***", "postgres://u@h/d"),
        ("redis://:tok@h:6379/0", "redis://:***@h:6379/0", "redis://h:6379/0"),
        ("https://h/api?api_key=K&q=1", "https://h/api?api_key=***&q=1", "https://h/api?q=1"),
        ("host=db password=pw user=u", "host=db password=*** user=u", "host=db user=u"),
        ("host=db sslpassword = 'a b' user=u", "host=db sslpassword = *** user=u", "host=db user=u"),
        (
            "sqlite:////var/lib/sessions.db",
            "sqlite:////var/lib/sessions.db",
            "sqlite:////var/lib/sessions.db",
        ),
    ],
)
def test_credentials_are_masked_and_stripped(raw: str, masked: str, stripped: str) -> None:
    url = MaskedURL(raw)
    assert str(url) == masked == url.masked == mask_url(raw)
    assert url.stripped() == stripped
    assert url.reveal() == raw
    assert repr(url) == f"MaskedURL({masked!r})"
    assert f"{url}" == masked
    assert url.has_credentials == (masked != raw)


def test_a_percent_encoded_password_is_found_in_both_forms() -> None:
    url = MaskedURL("postgresql://u:p%40ss@h/db")
    assert set(url.secrets) == {"p%40ss", "p@ss"}
    assert url.redact("failed for p@ss and p%40ss") == "failed for *** and ***"


def test_pickling_keeps_only_the_masked_text() -> None:
    url = MaskedURL("postgresql://app:TopSecret@db/agents")
    data = pickle.dumps(url)
    assert b"TopSecret" not in data
    assert pickle.loads(data).reveal() == "postgresql://app:***@db/agents"


def test_redact_masks_urls_and_conninfo_secrets_quoted_in_any_text() -> None:
    text = "could not connect to postgresql://a:b@h/x (password=zz sslpassword='q r')"
    assert redact(text) == "could not connect to postgresql://a:***@h/x (password=*** sslpassword=***)"


def test_errors_never_show_the_password_of_the_url_they_name() -> None:
    url = "postgresql://app:TopSecret@db/agents?sslpassword=Other"
    for error in (
        SessionStoreError(url, "cannot connect: password=TopSecret"),
        SessionConflictError(url, "s1", 1, 2),
        StoreResolutionError(url, "no plugin"),
    ):
        shown = f"{error} {error!r} {error.args}"
        assert "TopSecret" not in shown
        assert "Other" not in shown


def test_open_store_without_a_plugin_never_echoes_the_password() -> None:
    with pytest.raises(StoreResolutionError) as caught:
        open_store("postgresql://app:TopSecret@db/agents?sslpassword=Other")
    assert "TopSecret" not in str(caught.value)
    assert "Other" not in str(caught.value)
    assert "TopSecret" not in caught.value.url
    assert caught.value.url == "postgresql://app:***@db/agents?sslpassword=***"


_SECRET = st.text(alphabet=string.ascii_letters + string.digits + "!$%()*+,-.~_", min_size=6, max_size=24)
_WORD = st.text(alphabet=string.ascii_lowercase, min_size=1, max_size=8)


@settings(max_examples=200, deadline=None)
@given(
    secret=_SECRET,
    user=_WORD,
    host=_WORD,
    scheme=st.sampled_from(["postgresql", "postgres", "mysql", "redis", "amqp", "https"]),
    where=st.sampled_from(["userinfo", "password", "sslpassword", "PASSWORD", "token", "conninfo"]),
)
def test_a_secret_never_shows_wherever_it_is_given(
    secret: str, user: str, host: str, scheme: str, where: str
) -> None:
    if where == "userinfo":
        template = f"{scheme}://{user}:{{}}@{host}/db"
    elif where == "conninfo":
        template = f"host={host} user={user} password='{{}}' dbname=db"
    else:
        template = f"{scheme}://{user}@{host}/db?{where}={{}}&x=1"
    assume(secret not in template and secret not in "***")  # the secret is not also the host...
    raw = template.format(secret)
    url = MaskedURL(raw)
    assert url.has_credentials
    for shown in (
        str(url),
        repr(url),
        url.stripped(),
        mask_url(raw),
        redact(f"oops: {raw}"),
        url.redact(secret),
    ):
        assert secret not in shown
    assert url.reveal() == raw
