"""The release tooling's own checks (``release/``): what makes a wheel native or pure, which
test tools the interpreter matrix installs, and the interpreters it looks for. The artefacts
themselves are built and installed by ``tests/integration/test_wheel.py``."""

from __future__ import annotations

import ast
import sys
import zipfile
from pathlib import Path

import pytest

from release import interpreters
from release.dist import DistError, check_native, check_pure
from release.matrix import CORELESS, LEAVE_OUT, ROOT, tool_requirements

STUB = "streamwire/_native/_core.pyi"


def _wheel(folder: Path, name: str, *members: str) -> Path:
    path = folder / name
    with zipfile.ZipFile(path, "w") as archive:
        for member in ("streamwire/__init__.py", *members):
            archive.writestr(member, b"")
    return path


def test_a_native_wheel_carries_the_stub_and_its_own_library(tmp_path: Path) -> None:
    name = "streamwire-0.1-cp312-cp312-manylinux_2_34_x86_64.whl"
    lib = "streamwire/_native/_core.cpython-312-x86_64-linux-gnu.so"
    check_native(_wheel(tmp_path, name, STUB, lib), "3.12")


@pytest.mark.parametrize(
    ("name", "members", "problem"),
    [
        (
            "streamwire-0.1-cp312-cp312-linux_x86_64.whl",
            [STUB, "streamwire/_native/_core.cpython-312-x86_64-linux-gnu.so"],
            "not a cp312 manylinux wheel",
        ),
        (
            "streamwire-0.1-cp312-cp312-manylinux_2_34_x86_64.whl",
            [STUB],
            "native core files",
        ),
        (
            "streamwire-0.1-cp312-cp312-manylinux_2_34_x86_64.whl",
            [STUB, "streamwire/_native/_core.cpython-311-x86_64-linux-gnu.so"],
            "is not CPython 3.12's",
        ),
        (
            "streamwire-0.1-cp312-cp312-manylinux_2_34_x86_64.whl",
            [
                STUB,
                "streamwire/_native/_core.cpython-312-x86_64-linux-gnu.so",
                "streamwire/_native/_core.cpython-311-x86_64-linux-gnu.so",
            ],
            "native core files",
        ),
    ],
)
def test_a_native_wheel_without_its_core_is_refused(
    tmp_path: Path, name: str, members: list[str], problem: str
) -> None:
    with pytest.raises(DistError, match=problem):
        check_native(_wheel(tmp_path, name, *members), "3.12")


def test_the_pure_wheel_carries_no_library(tmp_path: Path) -> None:
    check_pure(_wheel(tmp_path, "streamwire-0.1-py3-none-any.whl", STUB))
    with pytest.raises(DistError, match="carries"):
        check_pure(
            _wheel(
                tmp_path,
                "streamwire-0.2-py3-none-any.whl",
                STUB,
                "streamwire/_native/_core.cpython-311-x86_64-linux-gnu.so",
            )
        )
    with pytest.raises(DistError, match="not a py3-none-any wheel"):
        check_pure(_wheel(tmp_path, "streamwire-0.1-cp311-cp311-linux_x86_64.whl", STUB))


def test_the_matrix_installs_the_dev_test_tools_without_the_heavy_ones() -> None:
    wanted = tool_requirements()
    names = {r.split("=")[0].split(">")[0].split("[")[0].lower() for r in wanted}
    assert {"pytest", "pytest-asyncio", "hypothesis", "pytest-timeout"} <= names
    assert not names & LEAVE_OUT
    assert "streamwire" not in names
    assert "pytest==9.2.0" in wanted  # the dev extra's pins, as they are


def test_interpreter_tags_and_this_interpreter_is_found() -> None:
    assert [interpreters.tag(v) for v in interpreters.SUPPORTED] == ["cp311", "cp312", "cp313"]
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    assert interpreters.find(here) == sys.executable
    assert interpreters.find("2.1") is None


def test_the_tests_the_matrix_runs_once_import_nothing_of_streamwire() -> None:
    """The matrix's pure-Python run leaves out :data:`CORELESS`: right only while no module of
    theirs imports streamwire (then ``STREAMWIRE_PURE`` changes nothing in them)."""
    files = []
    for name in CORELESS:
        path = ROOT / name
        assert path.exists(), name
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    assert len(files) > 5
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            assert not any(n == "streamwire" or n.startswith("streamwire.") for n in names), (
                path,
                names,
            )
