"""Which codec core an install runs, and that a user is told: ``streamwire._native.reason``
(which ``streamwire --version`` prints: tests/unit/test_cli.py), and one WARNING when a core is
installed but unusable.

Each case imports ``streamwire._native`` afresh in a subprocess of this interpreter, with a
stand-in for the extension module put in ``sys.modules`` first where the case needs one (an
ABI from another build, a self-check that fails, a module that fails to import), so they run
the same whether or not the real core is built.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from streamwire import _native

ROOT = Path(__file__).resolve().parents[2]

PRELUDE = r"""
import importlib.machinery, json, logging, sys, types

records = []


class Keep(logging.Handler):
    def emit(self, record):
        records.append((record.levelname, record.name, record.getMessage()))


logging.getLogger().addHandler(Keep())
NAME = "streamwire._native._core"


def stand_in(**attrs):
    module = types.ModuleType(NAME)
    module.__spec__ = importlib.machinery.ModuleSpec(NAME, None)
    module.__dict__.update(attrs)
    sys.modules[NAME] = module
"""

REPORT = r"""
from streamwire import _native

print(json.dumps({"core": _native.core is not None, "reason": _native.reason,
                  "records": records}))
"""


def _select(setup: str, *, pure: bool = False) -> dict[str, object]:
    env = {k: v for k, v in os.environ.items() if k not in _native.PURE_ENV}
    if pure:
        env["STREAMWIRE_PURE"] = "1"
    # the streamwire this test imports (the checkout's src/, or an installed wheel's)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(_native.__file__).parents[2]), str(ROOT)])
    done = subprocess.run(
        [sys.executable, "-c", PRELUDE + setup + REPORT],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _warnings(result: dict[str, object]) -> list[list[str]]:
    records = result["records"]
    assert isinstance(records, list)
    return [r for r in records if r[0] == "WARNING"]


def test_another_abi_is_pure_python_with_one_warning() -> None:
    result = _select(f"stand_in(ABI={_native.ABI + 1}, __version__='9.9.9')")
    assert result["core"] is False
    why = (
        f"native core ABI {_native.ABI + 1}, this package needs {_native.ABI}: "
        "reinstall streamwire (in a checkout: make native)"
    )
    assert result["reason"] == f"pure Python: {why}"
    ((level, logger, text),) = _warnings(result)
    assert (level, logger) == ("WARNING", "streamwire")
    assert why in text
    assert "pure Python" in text
    assert "4-17x the CPU" in text


def test_a_failed_self_check_is_pure_python_with_one_warning() -> None:
    setup = (
        "def init(*args):\n"
        "    raise RuntimeError('layout moved')\n"
        f"stand_in(ABI={_native.ABI}, __version__='0.1.0', init=init)\n"
    )
    result = _select(setup)
    assert result["core"] is False
    assert result["reason"] == "pure Python: native core failed its self-check: " + repr(
        RuntimeError("layout moved")
    )
    ((_, _, text),) = _warnings(result)
    assert "layout moved" in text


def test_a_core_that_fails_to_import_warns() -> None:
    """A library that is there but does not load (built for another interpreter, a missing
    symbol) is found by its spec and reported, never passed over in silence."""
    setup = (
        "import importlib.abc\n"
        "class Broken(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path, target=None):\n"
        "        if name != NAME:\n"
        "            return None\n"
        "        return importlib.machinery.ModuleSpec(name, self)\n"
        "    def create_module(self, spec):\n"
        "        raise ImportError('undefined symbol: PyFoo')\n"
        "    def exec_module(self, module):\n"
        "        pass\n"
        "sys.meta_path.insert(0, Broken())\n"
    )
    result = _select(setup)
    assert result["core"] is False
    assert result["reason"] == (
        "pure Python: native core not loadable: undefined symbol: PyFoo (reinstall streamwire)"
    )
    ((_, _, text),) = _warnings(result)
    assert "undefined symbol: PyFoo" in text


def test_no_core_installed_is_pure_python_without_a_warning() -> None:
    result = _select("sys.modules[NAME] = None\n")
    assert result["core"] is False
    # what an install without cargo gets: no import error that reads like a broken install
    assert str(result["reason"]).startswith(
        "pure Python: native core not built (no Rust toolchain when streamwire was installed, or"
    )
    assert "pip install --force-reinstall --no-deps" in str(result["reason"])
    assert _warnings(result) == []


def test_forcing_pure_python_never_warns() -> None:
    result = _select(f"stand_in(ABI={_native.ABI + 1})", pure=True)
    assert result == {
        "core": False,
        "reason": "pure Python: forced by STREAMWIRE_PURE",
        "records": [],
    }


@pytest.mark.skipif(_native.built()[0] is None, reason=_native.built()[1])
def test_a_built_core_is_selected_silently() -> None:
    result = _select("")
    assert result["core"] is True
    assert result["reason"] == f"native core {_native.built()[0].__version__}"  # type: ignore[union-attr]
    assert _warnings(result) == []
