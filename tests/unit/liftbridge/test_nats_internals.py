"""The nats-py internals behind the NATS fast paths (``streamwire.liftbridge._nats_internals``):
the installed nats-py has every one of them (else this fails naming what moved), a nats-py
without one is reported by name and falls back to the public API, and
``STREAMWIRE_NATS_FAST=0`` switches both fast paths off."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from nats.aio.client import Client as NatsClient

from streamwire.liftbridge import _nats, _nats_internals
from streamwire.liftbridge._nats_internals import FAST_ENV, Report, check
from tests.unit.liftbridge.test_nats_direct import FakeNc, FakeSub, link_of

ROOT = Path(__file__).resolve().parents[3]


def test_the_installed_nats_py_has_every_internal_the_fast_paths_use() -> None:
    """Fails naming each attribute that moved, after a nats-py upgrade: update the guard
    (and the bound in pyproject.toml) or drop the fast path."""
    report = check(environ={})
    assert report.bulk_missing == (), report.describe()
    assert report.direct_missing == (), report.describe()
    assert (report.bulk, report.direct) == (True, True)
    assert "as expected" in report.describe()


class Parser:
    def __init__(self) -> None:
        self.buf = bytearray()
        self.state = 0

    async def parse(self, data: bytes = b"") -> None:
        return None


class Moved:
    """A nats-py whose internals moved: each case deletes or reshapes one of them."""

    def __init__(self) -> None:
        self.stats: dict[str, int] = {}
        self._flush_queue = None
        self.is_draining_pubs = False
        self._ps: Any = Parser()

    async def _send_command(self, cmd: bytes, priority: bool = False) -> None:
        return None

    async def _flush_pending(self, force_flush: bool = False) -> None:
        return None

    async def _process_msg(
        self, sid: int, subject: bytes, reply: bytes, data: bytes, headers: bytes
    ) -> None:
        return None


def _check(nc: Any, sub_id: object = 1, module: Any = None) -> Report:
    parser_module = module if module is not None else SimpleNamespace(AWAITING_CONTROL_LINE=0)
    return check(lambda: nc, lambda _: SimpleNamespace(_id=sub_id), parser_module, environ={})


def test_a_stand_in_with_the_same_shape_passes() -> None:
    report = _check(Moved())
    assert (report.bulk, report.direct) == (True, True)


def _without(name: str) -> Moved:
    nc = Moved()
    setattr(nc, name, None)
    return nc


async def _renamed_command(cmd: bytes, prio: bool = False) -> None:
    return None


def _sync_flush(force_flush: bool = False) -> None:
    return None


@pytest.mark.parametrize(
    ("nc", "sub_id", "bulk", "direct", "named"),
    [
        (_without("_send_command"), 1, False, True, "Client._send_command(cmd, priority)"),
        (_without("_flush_pending"), 1, False, True, "Client._flush_pending(force_flush)"),
        (_without("_process_msg"), 1, True, False, "Client._process_msg(sid, subject, reply"),
        (_without("_ps"), 1, True, False, "Client._ps"),
        (_without("stats"), 1, False, False, "Client.stats as dict"),
        (Moved(), "1", True, False, "Subscription._id as int"),
    ],
)
def test_each_internal_that_moved_is_named_and_its_path_turned_off(
    nc: Moved, sub_id: object, bulk: bool, direct: bool, named: str
) -> None:
    report = _check(nc, sub_id)
    assert (report.bulk, report.direct) == (bulk, direct)
    assert named in report.describe()
    assert "public API used instead" in report.describe()


def test_another_shape_of_a_call_is_named() -> None:
    renamed = Moved()
    renamed._send_command = _renamed_command  # type: ignore[method-assign, assignment]
    assert "Client._send_command(cmd, priority) as a coroutine" in _check(renamed).describe()
    synchronous = Moved()
    synchronous._flush_pending = _sync_flush  # type: ignore[method-assign, assignment]
    assert not _check(synchronous).bulk
    parser_gone = Moved()
    parser_gone._ps.buf = b""
    assert "Parser.buf as bytearray" in _check(parser_gone).describe()
    assert "parser.AWAITING_CONTROL_LINE" in _check(Moved(), module=object()).describe()


def test_the_environment_switches_both_off() -> None:
    report = check(environ={FAST_ENV: "0"})
    assert (report.bulk, report.direct, report.switched_off) == (False, False, True)
    assert f"{FAST_ENV}=0" in report.describe()
    assert check(environ={FAST_ENV: "1"}).bulk


def test_a_real_client_is_left_as_it_was() -> None:
    """The check only reads: a client it built has nats-py's own parser call afterwards."""
    nc = NatsClient()
    check(lambda: nc, environ={})
    assert nc._process_msg.__func__ is NatsClient._process_msg  # type: ignore[attr-defined]


async def test_with_the_fast_paths_off_the_link_uses_the_public_api(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(_nats, "_FAST", check(environ={FAST_ENV: "0"}))
    nc = FakeNc()
    link = link_of(nc)
    assert not link.bulk
    assert not link.deliver_directly(FakeSub(7), lambda s, d: True)  # type: ignore[arg-type]
    monkeypatch.setattr(_nats, "_FAST", check(environ={}))
    assert link_of(nc).deliver_directly(FakeSub(7), lambda s, d: True)  # type: ignore[arg-type]


@pytest.mark.parametrize("fast", ["0", ""])
def test_the_choice_is_made_once_at_import(fast: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != FAST_ENV}
    if fast:
        env[FAST_ENV] = fast
    env["PYTHONPATH"] = os.pathsep.join([str(Path(_nats_internals.__file__).parents[2]), str(ROOT)])
    code = (
        "import json\n"
        "from streamwire.liftbridge import _nats\n"
        "print(json.dumps([_nats._FAST.bulk, _nats._FAST.direct]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert json.loads(done.stdout) == ([False, False] if fast == "0" else [True, True])
