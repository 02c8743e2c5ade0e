"""Re-capture the ``wheel-*.hex`` vectors: run the official ``apache-iggy`` 0.9.0 client
through the scripted session of ``tests/iggy_double/wheel.py`` against the test double and
write every request frame it sends, whole (256-byte header + body), one file per frame.

    PYTHONPATH=. .venv/bin/python tests/vectors/iggy/capture_wheel.py

The frames are the wheel's own bytes (header, numbering, checksums, bodies); only the replies
come from the double. Client ids and timestamps differ on every run, so the tests compare the
stored files field by field and re-encode them; they never expect a fresh capture to equal
them byte for byte.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import apache_iggy as ig

from tests.iggy_double import IggyDouble
from tests.iggy_double.wheel import steps

HERE = Path(__file__).resolve().parent


async def capture() -> dict[str, list[bytes]]:
    frames: dict[str, list[bytes]] = {}
    async with IggyDouble() as double:
        client = ig.IggyClient(double.address)
        await client.connect()
        for name, make in steps(client):
            before = len(double.frames)
            await asyncio.wait_for(make(), 10)
            frames[name] = double.frames[before:]
    return frames


def main() -> None:
    for name, captured in asyncio.run(capture()).items():
        for i, frame in enumerate(captured):
            suffix = "" if i == 0 else f"-{i}"
            text = (
                f"# Request frame {i + 1}/{len(captured)} of step {name!r}, sent by"
                " apache-iggy 0.9.0 (see PROVENANCE.md)\n"
                f"{frame[:256].hex()}\n{frame[256:].hex()}\n"
            )
            (HERE / f"wheel-{name}{suffix}.hex").write_text(text)


if __name__ == "__main__":
    main()
