"""PluginManager: registration, validation and the ``count_tokens`` facade."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from harness.capabilities import RequestContext
from harness.core import UserPromptPart
from harness.errors import CapabilityError, CapabilityOrderError, PluginLoadError
from harness.hooks import PluginManager, hookimpl
from harness.tokens import TokenCounter

# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------


def tag_last_request(ctx: RequestContext, tag: str) -> None:
    """Append a user-prompt part to the request being sent (keeps every invariant)."""
    last = ctx.messages[-1]
    ctx.messages[-1] = last.replace(parts=(*last.parts, UserPromptPart(tag)))


class StepBase:
    """Name, log and ordering declarations of the test capabilities."""

    def __init__(
        self,
        name: str,
        log: list[str] | None = None,
        *,
        runs_before: tuple[str, ...] | str = (),
        runs_after: tuple[str, ...] | str = (),
    ) -> None:
        self.name = name
        self.log = [] if log is None else log
        self.runs_before = runs_before
        self.runs_after = runs_after

    def __repr__(self) -> str:
        return f"Step({self.name!r})"


class Step(StepBase):
    """A capability that tags the request being sent and logs its name."""

    @hookimpl
    def before_model_request(self, ctx: RequestContext) -> None:
        self.log.append(self.name)
        tag_last_request(ctx, self.name)


class Idle:
    def __init__(self, name: str) -> None:
        self.name = name

    @hookimpl
    def before_model_request(self, ctx: RequestContext) -> None:
        del ctx


# --------------------------------------------------------------------------------------
# registration
# --------------------------------------------------------------------------------------


def test_add_capabilities_resolves_and_appends() -> None:
    pm = PluginManager()
    a, b = Step("a"), Step("b", runs_before=("a",))
    pm.add_capabilities([a, b])
    assert pm.capabilities == (b, a)
    c = Step("c", runs_before=("b",))
    pm.add_capabilities([c])
    assert pm.capabilities == (c, b, a)
    pm.unregister("b")
    assert pm.capabilities == (a, c)  # no constraint left: back to the user's order
    pm.unregister(a)
    assert pm.capabilities == (c,)
    with pytest.raises(PluginLoadError, match="not registered"):
        pm.unregister("b")


def test_duplicate_capability_names_across_calls_and_with_plugins() -> None:
    pm = PluginManager()
    pm.add_capabilities([Step("a")])
    with pytest.raises(CapabilityOrderError, match="'a'") as info:
        pm.add_capabilities([Step("a")])
    assert str(info.value).count("Step('a')") == 2
    pm.register(Idle("logger"))
    with pytest.raises(CapabilityOrderError, match="already registered"):
        pm.add_capabilities([Step("logger")])


def test_failed_add_registers_nothing() -> None:
    pm = PluginManager()
    with pytest.raises(CapabilityOrderError):
        pm.add_capabilities([Step("x", runs_before="y"), Step("y", runs_before="x")])
    assert pm.capabilities == ()
    assert pm.list_plugins() == []


def test_unknown_hook_is_rejected_with_a_suggestion() -> None:
    class Typo:
        @hookimpl
        def before_model_requests(self, ctx: RequestContext) -> None:
            del ctx

    pm = PluginManager()
    with pytest.raises(PluginLoadError, match="did you mean 'before_model_request'"):
        pm.register(Typo())
    assert pm.list_plugins() == []


def test_optional_unknown_hook_is_allowed() -> None:
    class Future:
        @hookimpl(optionalhook=True)
        def some_future_hook(self) -> None:
            pass

    PluginManager().register(Future())


def test_wrapper_on_awaited_hook_is_rejected() -> None:
    class Wrapping:
        @hookimpl(wrapper=True)
        def before_model_request(self, ctx: RequestContext) -> Iterator[None]:
            del ctx
            return (yield)

    with pytest.raises(PluginLoadError, match="cannot be a wrapper"):
        PluginManager().register(Wrapping())


def test_async_count_tokens_is_rejected() -> None:
    class AsyncCounter:
        @hookimpl
        async def count_tokens(self, text: str, model_name: str | None) -> int | None:
            return len(text)

    with pytest.raises(PluginLoadError, match="count_tokens must be synchronous"):
        PluginManager().register(AsyncCounter())


def test_argument_not_in_spec_is_rejected() -> None:
    class Wrong:
        @hookimpl
        def before_model_request(self, ctx: RequestContext, request: object) -> None:
            del ctx, request

    with pytest.raises(PluginLoadError, match="'Wrong' is invalid"):
        PluginManager().register(Wrong(), name="Wrong")


def test_registering_twice_is_a_load_error() -> None:
    pm = PluginManager()
    plugin = Idle("p")
    pm.register(plugin)
    with pytest.raises(PluginLoadError, match="already registered"):
        pm.register(plugin, name="other")


# --------------------------------------------------------------------------------------
# tokens
# --------------------------------------------------------------------------------------


class CharCounter:
    @hookimpl
    def count_tokens(self, text: str, model_name: str | None) -> int | None:
        return None if text.startswith("tiktoken:") else len(text)


def test_token_counter_without_plugins_is_owned_by_the_manager() -> None:
    pm = PluginManager()
    counter = pm.token_counter(None)
    assert isinstance(counter, TokenCounter)
    assert counter.model_name is None
    assert pm.token_counter(None) is counter  # kept: its caches survive between requests
    assert pm.token_counter("gpt-4o") is not counter
    assert pm.token_counter("gpt-4o").model_name == "gpt-4o"
    assert PluginManager().token_counter(None) is not counter  # managers share no counter
    for i in range(40):
        pm.token_counter(f"model-{i}")
    assert len(pm._counters) <= 16  # bounded: one counter per recent model name
    assert pm.token_counter("model-39") is pm.token_counter("model-39")


def test_count_tokens_hook_overrides_the_tokenizer() -> None:
    pm = PluginManager()
    pm.register(CharCounter())
    counter = pm.token_counter("claude-sonnet-4")
    assert isinstance(counter, TokenCounter)
    assert counter.count_text("abcdefghij") == 10
    # None falls back to tiktoken
    text = "tiktoken: hello world"
    assert counter.count_text(text) == TokenCounter("claude-sonnet-4").count_text(text)
    # the counter is kept (its caches survive) until the plugins change
    assert pm.token_counter("claude-sonnet-4") is counter
    pm.register(Idle("other"))
    assert pm.token_counter("claude-sonnet-4") is not counter


def test_count_tokens_bad_answer_is_rejected() -> None:
    class Bad:
        @hookimpl
        def count_tokens(self, text: str) -> int | None:
            return -1

    pm = PluginManager()
    pm.register(Bad())
    with pytest.raises(CapabilityError, match="non-negative int"):
        pm.count_tokens("x", None)


def test_count_tokens_model_name_is_passed() -> None:
    seen: list[str | None] = []

    class Spy:
        @hookimpl
        def count_tokens(self, text: str, model_name: str | None) -> int | None:
            seen.append(model_name)
            return 1

    pm = PluginManager()
    pm.register(Spy())
    assert pm.token_counter("my-model").count_text("some text") == 1
    assert seen == ["my-model"]


# --------------------------------------------------------------------------------------
# structured attributes of PluginLoadError
# --------------------------------------------------------------------------------------


def test_unknown_hook_error_names_the_plugin() -> None:
    class Typo:
        @hookimpl
        def before_model_requests(self, ctx: RequestContext) -> None:
            del ctx

    with pytest.raises(PluginLoadError) as info:
        PluginManager().register(Typo(), name="typo")
    exc = info.value
    assert exc.plugin_name == "typo"
    assert (
        exc.reason == "implements unknown hook 'before_model_requests'; did you mean 'before_model_request'?"
    )
    assert exc.distribution is None
    assert exc.version is None
    assert exc.entry_point is None


def test_invalid_signature_error_names_the_plugin() -> None:
    class Wrong:
        @hookimpl
        def before_model_request(self, ctx: RequestContext, request: object) -> None:
            del ctx, request

    with pytest.raises(PluginLoadError) as info:
        PluginManager().register(Wrong())
    assert info.value.plugin_name == "Wrong"
    assert info.value.reason is not None
    assert info.value.reason.startswith("invalid: ")


def test_capability_with_an_invalid_hook_error_names_it() -> None:
    class Wrapping(StepBase):
        @hookimpl(wrapper=True)
        def before_model_request(self, ctx: RequestContext) -> Iterator[None]:
            del ctx
            return (yield)

    pm = PluginManager()
    with pytest.raises(PluginLoadError, match="cannot be a wrapper") as info:
        pm.add_capabilities([Step("fine"), Wrapping("wrapping")])
    assert info.value.plugin_name == "wrapping"
    assert pm.capabilities == ()
    assert pm.list_plugins() == []


def test_registration_conflict_error_names_the_plugin() -> None:
    pm = PluginManager()
    plugin = Idle("p")
    pm.register(plugin)
    with pytest.raises(PluginLoadError) as info:
        pm.register(Idle("p2"), name="p")
    assert info.value.plugin_name == "p"
    assert info.value.reason is not None
    assert info.value.reason.endswith("(the name or the object is already registered)")


@pytest.mark.parametrize(
    ("target", "expected"),
    [("missing", "missing"), (Idle("lonely"), "lonely"), (Idle, "Idle")],
)
def test_unregister_error_names_the_plugin(target: object, expected: str) -> None:
    with pytest.raises(PluginLoadError, match="it is not registered") as info:
        PluginManager().unregister(target)
    assert info.value.plugin_name == expected
    assert info.value.reason == "it is not registered"
