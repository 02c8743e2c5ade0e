"""Build the native core into the source tree: ``python native/build.py [--debug]``.

Runs ``cargo build`` on ``native/`` for the running interpreter and copies the library to
``src/streamwire/_native/_core<EXT_SUFFIX>`` (gitignored), where the package finds it.
Exits non-zero when cargo is missing or the build fails; ``make venv`` reports that and
carries on with the pure-Python code. Needs only cargo and crates.io (``native/Cargo.lock``).
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


def main() -> int:
    parser = argparse.ArgumentParser(prog="python native/build.py")
    parser.add_argument("--debug", action="store_true", help="an unoptimised build")
    args = parser.parse_args()
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
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    dest = TARGET / f"_core{suffix}"
    tmp = dest.with_suffix(dest.suffix + ".tmp")
    shutil.copyfile(built, tmp)
    os.replace(tmp, dest)  # atomic: a running interpreter keeps its mapped copy
    print(f"native core: built {dest.relative_to(NATIVE.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
