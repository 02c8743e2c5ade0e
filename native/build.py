"""Rebuild the native core in the source tree: ``python native/build.py [--debug] [--force]``.

The developer's loop: ``pip install -e .`` builds the core in place once (setuptools-rust,
``setup.py``); after an edit of ``native/`` this runs ``cargo build`` for the running
interpreter and copies the library to ``src/streamwire/_native/_core<EXT_SUFFIX>``
(gitignored), where the package finds it. It does nothing when that library is newer than
every source (``--force`` builds anyway). Exits non-zero when cargo is missing or the build
fails; ``make venv`` reports that and carries on with the pure-Python code. Needs only cargo
and crates.io (``native/Cargo.lock``). Wheels are built by ``make dist``, never by this.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

NATIVE = Path(__file__).resolve().parent
TARGET = NATIVE.parent / "src" / "streamwire" / "_native"


def library(profile_dir: Path) -> Path:
    for name in ("lib_core.so", "lib_core.dylib", "_core.dll"):
        if (profile_dir / name).is_file():
            return profile_dir / name
    raise FileNotFoundError(f"no built library in {profile_dir}")


def sources() -> list[Path]:
    return [NATIVE / "Cargo.toml", NATIVE / "Cargo.lock", *sorted((NATIVE / "src").glob("*.rs"))]


def up_to_date(dest: Path) -> bool:
    """``dest`` exists and is newer than every source of the crate."""
    try:
        built = dest.stat().st_mtime
    except FileNotFoundError:
        return False
    return all(source.stat().st_mtime <= built for source in sources())


def main() -> int:
    parser = argparse.ArgumentParser(prog="python native/build.py")
    parser.add_argument("--debug", action="store_true", help="an unoptimised build")
    parser.add_argument("--force", action="store_true", help="build even when up to date")
    args = parser.parse_args()
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    dest = TARGET / f"_core{suffix}"
    if not (args.force or args.debug) and up_to_date(dest):
        print(f"native core: {dest.relative_to(NATIVE.parent)} is up to date")
        return 0
    cargo = shutil.which("cargo")
    if cargo is None:
        print("native core: cargo not found (pure Python will be used)", file=sys.stderr)
        return 1
    env = {**os.environ, "PYO3_PYTHON": sys.executable}
    cmd = [cargo, "build", "--locked", "--manifest-path", str(NATIVE / "Cargo.toml")]
    if not args.debug:
        cmd.append("--release")
    if subprocess.run(cmd, env=env, check=False).returncode:
        print("native core: cargo build failed (pure Python will be used)", file=sys.stderr)
        return 1
    built = library(NATIVE / "target" / ("debug" if args.debug else "release"))
    tmp = dest.with_suffix(dest.suffix + ".tmp")
    shutil.copyfile(built, tmp)
    os.replace(tmp, dest)  # atomic: a running interpreter keeps its mapped copy
    print(f"native core: built {dest.relative_to(NATIVE.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
