"""Fast constructors for the frozen message classes.

Loading a history and the first pass of a capability build thousands of parts, so the
constructor's cost is the cost of those operations. ``attrs`` generates an ``__init__``
that sets each field through a bound ``object.__setattr__`` and calls each converter,
even for a default value. :func:`install` compiles, once per class, an ``__init__`` that
does the same work with less of it: it writes each slot through its descriptor, and for
the converters it knows (:func:`~harness.core.frozen.freeze_mapping`, the ``metadata``
converter, ``tuple``) it tests inline whether there is anything to convert, so a value
that is already frozen (a default, or a field carried over by ``replace``) costs one type
check. Validators run after every field is set, as with ``attrs``; unlike ``attrs``,
``attrs.validators.disabled()`` does not switch them off (nothing in harness uses it).
"""

from __future__ import annotations

__all__ = ["install"]

from typing import Any, Final, cast

import attrs

from harness.core.frozen import FrozenDict, freeze, freeze_mapping

_FACTORY: Final = cast("type", type(attrs.Factory(tuple)))

_INLINE: Final[dict[object, str]] = {
    freeze_mapping: "{v} if type({v}) is FrozenDict else freeze_mapping({v})",
    freeze: "{v} if {v} is None else freeze({v})",
    tuple: "{v} if type({v}) is tuple else tuple({v})",
}
"""Inline forms of known converters (``{v}`` is the argument's name)."""


def install(cls: type) -> None:
    """Replace the ``attrs`` ``__init__`` of the slotted class ``cls`` by a compiled one.

    Args:
        cls: An ``attrs`` class with slots; every field must be an init field with a
            plain default or none.

    Raises:
        TypeError: A field is not an init field or has a factory default.
    """
    namespace: dict[str, Any] = {"FrozenDict": FrozenDict, "freeze": freeze, "freeze_mapping": freeze_mapping}
    params: list[str] = []
    body: list[str] = []
    checks: list[str] = []
    for index, field in enumerate(attrs.fields(cls)):
        if not field.init or isinstance(field.default, _FACTORY):
            raise TypeError(f"{cls.__name__}.{field.name}: only plain init fields are supported")
        arg = field.alias or field.name
        if field.default is attrs.NOTHING:
            params.append(arg)
        else:
            namespace[f"_d{index}"] = field.default
            params.append(f"{arg}=_d{index}")
        value = arg
        if field.converter is not None:
            template = _INLINE.get(field.converter)
            if template is None:
                namespace[f"_c{index}"] = field.converter
                value = f"_c{index}({arg})"
            else:
                value = template.format(v=arg)
        namespace[f"_s{index}"] = cls.__dict__[field.name].__set__
        body.append(f"    _s{index}(self, {value})")
        if field.validator is not None:
            namespace[f"_v{index}"] = field.validator
            namespace[f"_a{index}"] = field
            checks.append(f"    _v{index}(self, _a{index}, self.{field.name})")
    source = f"def __init__(self, {', '.join(params)}):\n" + "\n".join(body + checks) + "\n"
    exec(source, namespace)  # field names are identifiers, as attrs itself generates code
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__doc__ = cls.__init__.__doc__
    cls.__init__ = init  # type: ignore[misc]  # pyright: ignore[reportAttributeAccessIssue]
