"""Every ```python block of README.md and docs/*.md type-checks under ``mypy --strict`` and
``pyright`` in strict mode as user code against the installed package, and so does
``examples/``. (pyright's rules on unused names are off: a snippet shows a call's result
without using it.)

A block is checked as a module when it is one. A block that awaits at the top, or uses names
it does not define (the ``client`` a guide has been talking about), is checked as the body
of an ``async def`` whose parameters give those names the types of :data:`NAMES` (per guide
where a guide means its own client). A name missing from the table fails the test, naming it:
a snippet may not lean on anything the reader cannot see. A block that is a sketch rather
than code is fenced ``text``, not ``python``.
"""

from __future__ import annotations

import ast
import builtins
import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```python\n(.*?)^```", re.S | re.M)

#: The types of the names snippets use without defining them, and the imports those need.
NAMES: dict[str, str] = {
    "url": "str",
    "stream": "str",
    "topic": "str",
    "producer": "streamwire.Producer",
    "consumer": "streamwire.Consumer",
    "client": "streamwire.Client",
    "handle": "Callable[[streamwire.Message], None]",
    "streamwire": "",  # imported by the prelude
    "lb": "",
    "rmq": "",
    "iggy": "",
    "AckPolicy": "",
    "rabbit_url": "str",
    "spark": "Any",
    "events": "Any",
    "out": "Any",
}
#: A guide's ``client`` is its own protocol's client.
CLIENTS = {
    "liftbridge.md": "lb.Client",
    "rabbitmq.md": "rmq.Client",
    "iggy.md": "iggy.Client",
}
PRELUDE = """\
from __future__ import annotations
from collections.abc import Callable
from typing import Any
import streamwire
import streamwire.iggy as iggy
import streamwire.liftbridge as lb
import streamwire.rabbitmq as rmq
from streamwire.liftbridge import AckPolicy
"""


def _free_names(tree: ast.AST) -> list[str]:
    bound: set[str] = set()
    loaded: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            bound.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return sorted(loaded - bound - set(dir(builtins)))


def _module(doc: str, code: str) -> str:
    """The snippet as a module to check (see the module docstring)."""
    tree = ast.parse(code)
    free = _free_names(tree)
    unknown = [n for n in free if n not in NAMES]
    assert not unknown, f"uses {unknown}, defined nowhere in the snippet: define them there"
    try:
        compile(code, "<snippet>", "exec", dont_inherit=True)
        awaits = False
    except SyntaxError:
        awaits = True
    if not free and not awaits:
        return code
    params = [
        f"{n}: {CLIENTS.get(doc, NAMES[n]) if n == 'client' else NAMES[n]}"
        for n in free
        if NAMES[n]
    ]
    body = textwrap.indent(code, "    ")
    return f"{PRELUDE}\n\nasync def _snippet({', '.join(params)}) -> None:\n{body}\n"


def _snippets() -> list[tuple[str, str]]:
    return [
        (f"{doc.name}#{i}", m.group(1))
        for doc in DOCS
        for i, m in enumerate(FENCE.finditer(doc.read_text(encoding="utf-8")))
    ]


def _mypy(paths: list[Path]) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", *map(str, paths)],
        capture_output=True,
        text=True,
        check=False,
        cwd=paths[0].parent,
    )
    return done.stdout + done.stderr if done.returncode else ""


#: pyright's strict mode less its rules on names a snippet leaves unused.
PYRIGHT_CONFIG = {
    "typeCheckingMode": "strict",
    "pythonVersion": "3.11",
    "reportUnusedImport": False,
    "reportUnusedVariable": False,
    "reportUnusedFunction": False,
    "reportUnusedExpression": False,
}


def _pyright(paths: list[Path], where: Path) -> str:
    (where / "pyrightconfig.json").write_text(json.dumps(PYRIGHT_CONFIG), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "pyright", "--pythonpath", sys.executable, *map(str, paths)],
        capture_output=True,
        text=True,
        check=False,
        cwd=where,
    )
    return done.stdout + done.stderr if done.returncode else ""


def _user_code(tmp_path: Path) -> list[Path]:
    """Every snippet as a module of its own in ``tmp_path``, and the examples."""
    files: list[Path] = []
    for n, (where, code) in enumerate(_snippets()):
        name = re.sub(r"\W", "_", where.lower())
        path = tmp_path / f"snippet_{n:02d}_{name}.py"
        path.write_text(f"# {where}\n" + _module(where.partition("#")[0], code), encoding="utf-8")
        files.append(path)
    assert len(files) >= 25, "the snippets were not found"
    for example in sorted((ROOT / "examples").glob("*.py")):
        files.append(tmp_path / example.name)
        shutil.copyfile(example, files[-1])
    return files


@pytest.mark.one_core
def test_every_snippet_and_example_type_checks_under_mypy(tmp_path: Path) -> None:
    pytest.importorskip("mypy")  # a dev tool: the interpreter matrix's venvs leave it out
    pytest.importorskip("pyspark")  # what the Spark guide's snippets import
    errors = _mypy(_user_code(tmp_path))
    assert not errors, errors


@pytest.mark.one_core
@pytest.mark.skipif(shutil.which("node") is None, reason="pyright runs on node, not on PATH")
def test_every_snippet_and_example_type_checks_under_pyright(tmp_path: Path) -> None:
    pytest.importorskip("pyright")  # as for mypy above
    pytest.importorskip("pyspark")
    errors = _pyright(_user_code(tmp_path), tmp_path)
    assert not errors, errors


@pytest.mark.parametrize(
    ("code", "free"),
    [("x = client.y\nprint(x)", ["client"]), ("import a\na.b(c)", ["c"]),
     ("def f(u):\n    return u + v", ["v"]), ("try:\n    p()\nexcept E as e:\n    e", ["E", "p"])],
)  # fmt: skip
def test_free_names_are_what_a_snippet_uses_without_defining(code: str, free: list[str]) -> None:
    assert _free_names(ast.parse(code)) == free
