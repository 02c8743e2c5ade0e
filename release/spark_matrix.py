"""The Spark suite on pyspark versions other than the pinned one:
``python -m release.spark_matrix [--pyspark 4.0.5 ...] [-- PYTEST_ARGS]``.

The ``spark`` extra accepts ``pyspark>=4.0,<5``; ``make test`` runs the Spark suite with the
version ``dev`` pins (the newest 4.x). For each version named here: a venv of this
interpreter under ``.venv-spark/<version>`` with ``pyspark[connect]`` at that version and
the project's runtime, ``liftbridge``, ``spark`` and test dependencies (read from
``pyproject.toml``), then ``tests/spark`` from this checkout (``src/`` on ``PYTHONPATH``,
so the in-place native core of the main venv's interpreter is used), less the jobs of their
own (``test_kill.py``, ``test_cluster.py``, ``test_connect.py``: the harness's Spark is the
pinned one). The brokers must be up (``make brokers``). Not part of ``make test`` (about 4
minutes per version); docs/spark.md has the last run.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tomllib
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_VERSIONS = ("4.0.5",)
#: Test tools of the ``dev`` extra the Spark suite needs.
TEST_TOOLS = ("pytest", "pytest-asyncio", "pytest-timeout", "hypothesis", "trustme")
#: The jobs that run in processes and servers of their own, on the harness's pyspark.
OWN_JOBS = (
    "tests/spark/test_kill.py",
    "tests/spark/test_cluster.py",
    "tests/spark/test_connect.py",
)


def requirements(pyspark: str) -> list[str]:
    """What the venv for ``pyspark`` installs: the project's dependencies and those of its
    ``liftbridge`` and ``spark`` extras (pyspark pinned to ``pyspark``, with its Connect
    client), and the test tools at the versions ``dev`` pins."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    out = list(project["dependencies"]) + list(extras["liftbridge"])
    for req in extras["spark"]:
        out.append(f"pyspark[connect]=={pyspark}" if req.startswith("pyspark") else req)
    for req in extras["dev"]:
        name = re.split(r"[<>=!\[ ]", req, maxsplit=1)[0]
        if name in TEST_TOOLS:
            out.append(req)
    return out


def run(version: str, pytest_args: Sequence[str]) -> int:
    venv = ROOT / ".venv-spark" / version
    python = venv / "bin" / "python"
    if not python.is_file():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(python), "-m", "pip", "install", "--quiet", *requirements(version)]
    print(f"+ {' '.join(pip)}", flush=True)
    subprocess.run(pip, check=True)
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{ROOT}"}
    argv = [str(python), "-m", "pytest", "tests/spark", "-p", "no:cacheprovider"]
    argv += [f"--deselect={job}" for job in OWN_JOBS]
    # pyspark 4.0 leaves sockets of its own unclosed: pytest would turn their
    # ResourceWarnings, raised while the garbage collector frees them, into failures
    argv += ["-W", "ignore::pytest.PytestUnraisableExceptionWarning", *pytest_args]
    print(f"+ {' '.join(argv)}", flush=True)
    return subprocess.run(argv, cwd=ROOT, env=env, check=False).returncode


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    pytest_args: list[str] = []
    if "--" in args:
        at = args.index("--")
        args, pytest_args = args[:at], args[at + 1 :]
    parser = argparse.ArgumentParser(prog="python -m release.spark_matrix")
    parser.add_argument("--pyspark", nargs="+", default=list(DEFAULT_VERSIONS))
    opts = parser.parse_args(args)
    failed = [v for v in opts.pyspark if run(v, pytest_args) != 0]
    for version in opts.pyspark:
        print(
            f"release.spark_matrix: pyspark {version} {'failed' if version in failed else 'passed'}"
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
