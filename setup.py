"""The build's one dynamic part: whether the wheel carries the native core.

Everything else about the package (metadata, extras, packages) is declared in
pyproject.toml. The native core (``native/``, Rust + PyO3) is compiled by setuptools-rust into
``streamwire._native._core`` for the interpreter that runs the build. ``STREAMWIRE_NATIVE_BUILD``
chooses:

- ``auto`` (the default, what ``pip install`` does): build it when cargo is on PATH; when it
  is not, build the pure-Python package (a ``py3-none-any`` wheel) and say so in one line; when
  cargo is there but the build fails, carry on in pure Python too. An install never fails for
  want of a compiler.
- ``require``: the build fails unless the native core is built (release wheels).
- ``skip``: the pure-Python package, whatever is installed (the ``py3-none-any`` wheel).

docs/development.md, "Native core", says how to check which core an install selected.
"""

from __future__ import annotations

import os
import shutil
import sys

from setuptools import setup
from setuptools_rust import Binding, RustExtension

MODES = ("auto", "require", "skip")


def native_extensions() -> list[RustExtension]:
    mode = os.environ.get("STREAMWIRE_NATIVE_BUILD", "auto").strip().lower() or "auto"
    if mode not in MODES:
        raise SystemExit(f"STREAMWIRE_NATIVE_BUILD must be one of {', '.join(MODES)}, not {mode!r}")
    if mode == "skip":
        print("streamwire: building the pure-Python package (STREAMWIRE_NATIVE_BUILD=skip)")
        return []
    cargo = os.environ.get("CARGO", "cargo")
    if mode == "auto" and shutil.which(cargo) is None:
        print(
            "streamwire: cargo not found, installing the pure-Python package; install a Rust "
            "toolchain and reinstall for the native core (4-17x less CPU in the codec loops)",
            file=sys.stderr,
        )
        return []
    return [
        RustExtension(
            "streamwire._native._core",
            path="native/Cargo.toml",
            binding=Binding.PyO3,
            cargo_manifest_args=["--locked"],
            debug=False,  # an editable install too: setuptools-rust builds those unoptimised
            py_limited_api=False,  # it writes Message's slots directly: one build per CPython
            optional=mode == "auto",
        )
    ]


setup(rust_extensions=native_extensions(), zip_safe=False)
