"""The import graph keeps the rules of docs/architecture.md (issue 30), checked by import-linter
against the contracts in ``pyproject.toml`` (``[tool.importlinter]``): no import cycle, type-only
imports counted (every package's children import each other without a cycle, which rules out a
cycle of modules anywhere); the three brokers independent; no import running up the layers
(Spark and the CLI, the brokers, the transport, the codec), directly or through other modules;
Spark and the CLI on the unified API only. ``make lint`` runs the same contracts
(``lint-imports``). The sans-IO layer's allowance of outside modules is ``test_layers.py``'s."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grimp
import pytest
from importlinter.application.use_cases import lint_imports, read_user_options
from importlinter.configuration import configure
from importlinter.contracts.acyclic_siblings import AcyclicSiblingsContract
from importlinter.contracts.forbidden import ForbiddenContract
from importlinter.contracts.independence import IndependenceContract
from importlinter.contracts.layers import LayersContract
from importlinter.domain.contract import Contract

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
#: Every package the synthetic graphs' contracts name (a contract refuses a missing one).
PACKAGES = ("p.spark", "p.rabbitmq", "p.iggy", "p.transport", "p.codec")

configure()  # import-linter's settings (option readers, timer), as its CLI sets them


def test_the_source_keeps_every_contract(capsys: pytest.CaptureFixture[str]) -> None:
    options = read_user_options(str(PYPROJECT))
    assert {c["id"] for c in options.contracts_options} == {
        "cycles",
        "brokers",
        "layers",
        "unified",
    }
    kept = lint_imports(str(PYPROJECT), cache_dir=None, no_logo=True)
    report = capsys.readouterr().out
    assert kept, report  # the report names each broken contract and the imports that break it
    assert "4 kept, 0 broken" in report


def _graph(*imports: tuple[str, str]) -> grimp.ImportGraph:
    graph = grimp.ImportGraph()
    for module in (*PACKAGES, *(m for pair in imports for m in pair)):
        parts = module.split(".")
        for i in range(1, len(parts) + 1):
            graph.add_module(".".join(parts[:i]))
    for importer, imported in imports:
        graph.add_import(importer=importer, imported=imported)
    return graph


def _kept(kind: type[Contract], graph: grimp.ImportGraph, **options: Any) -> bool:
    contract = kind("test", {"root_packages": ["p"]}, options)
    return contract.check(graph, verbose=False).kept


@pytest.mark.parametrize(
    "imports",
    [
        [("p.a", "p.b"), ("p.b", "p.a")],  # two modules
        [("p.x.a", "p.y.b"), ("p.y.b", "p.z.c"), ("p.z.c", "p.x.a")],  # three packages
        [("p.x.a", "p.x.b"), ("p.x.b", "p.x.c"), ("p.x.c", "p.x.a")],  # inside a package
    ],
)
def test_a_cycle_breaks_the_cycle_contract(imports: list[tuple[str, str]]) -> None:
    assert not _kept(AcyclicSiblingsContract, _graph(*imports), ancestors=["p"])
    assert _kept(AcyclicSiblingsContract, _graph(*imports[:-1]), ancestors=["p"])


def test_a_broker_importing_another_breaks_the_independence_contract() -> None:
    graph = _graph(("p.rabbitmq.client", "p.iggy.protocol"), ("p.iggy.client", "p.codec"))
    assert not _kept(IndependenceContract, graph, modules=["p.rabbitmq", "p.iggy"])
    assert _kept(IndependenceContract, _graph(("p.iggy.client", "p.codec")), modules=["p.iggy"])


def test_an_import_up_the_layers_breaks_the_layers_contract() -> None:
    layers = ["p.spark", "p.rabbitmq", "p.transport", "p.codec"]
    # indirectly: the codec reaches the transport through a module outside the layers
    up = _graph(("p.codec.reader", "p.metrics"), ("p.metrics", "p.transport.tcp"))
    assert not _kept(LayersContract, up, layers=layers)
    down = _graph(("p.spark.sink", "p.rabbitmq.client"), ("p.transport.tcp", "p.codec.reader"))
    assert _kept(LayersContract, down, layers=layers)


def test_spark_reaching_a_broker_module_breaks_the_unified_contract() -> None:
    options = {
        "source_modules": ["p.spark"],
        "forbidden_modules": ["p.rabbitmq", "p.transport"],
        "allow_indirect_imports": "true",
    }
    assert not _kept(ForbiddenContract, _graph(("p.spark.sink", "p.rabbitmq.client")), **options)
    unified = _graph(("p.spark.sink", "p.api"), ("p.api", "p.transport.tcp"))
    assert _kept(ForbiddenContract, unified, **options)
