"""No ``Any`` in the public signatures of ``streamwire`` and the three protocol packages:
every exported function, and every public method, property and field of every exported
class, is typed without ``Any`` (docs/api.md, "Options")."""

from __future__ import annotations

import importlib
import inspect
import re
from collections.abc import Callable, Iterator

import pytest

PUBLIC = ("streamwire", "streamwire.rabbitmq", "streamwire.liftbridge", "streamwire.iggy")
_ANY = re.compile(r"\bAny\b")
_DUNDERS = ("__init__", "__call__", "__aenter__", "__aexit__", "__aiter__", "__anext__")


def _annotated(obj: object) -> Iterator[tuple[str, Callable[..., object] | type]]:
    if inspect.isclass(obj):
        if not obj.__module__.startswith("streamwire"):
            return
        yield obj.__qualname__, obj  # fields
        for name in dir(obj):
            if name.startswith("_") and name not in _DUNDERS:
                continue
            member = inspect.getattr_static(obj, name)
            if isinstance(member, property) and member.fget is not None:
                member = member.fget
            if isinstance(member, staticmethod | classmethod):
                member = member.__func__
            if inspect.isfunction(member) and member.__module__.startswith("streamwire"):
                yield f"{obj.__qualname__}.{name}", member
    elif inspect.isfunction(obj):
        yield obj.__qualname__, obj


def offenders(module_name: str) -> list[str]:
    module = importlib.import_module(module_name)
    found = []
    for export in module.__all__:
        for label, target in _annotated(getattr(module, export)):
            for param, annotation in inspect.get_annotations(target).items():
                text = annotation if isinstance(annotation, str) else repr(annotation)
                if _ANY.search(text):
                    found.append(f"{module_name}: {label} {param}: {text}")
    return found


@pytest.mark.parametrize("module_name", PUBLIC)
def test_no_any_in_public_signatures(module_name: str) -> None:
    assert offenders(module_name) == []


def test_the_walk_sees_annotations() -> None:
    # the walk reads the annotations it must: the unified producer's options are typed
    import streamwire

    hints = inspect.get_annotations(streamwire.Client.producer)
    assert "Unpack[ProducerKwargs]" in str(hints["options"])
