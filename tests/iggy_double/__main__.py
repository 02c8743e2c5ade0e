"""The conformance double as a process of its own, for faults that act on a process
(SIGSTOP: a hung server whose sockets stay open)::

    python -m tests.iggy_double [--port N]

It prints ``listening on HOST:PORT`` once it accepts connections and serves until SIGTERM
or SIGINT. Its log is in memory: a SIGKILL loses what it stored, which a real server, with
its log on disk, does not. So a crash and restart is only tried against a real server.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys

from tests.iggy_double.server import IggyDouble


async def serve(port: int) -> None:
    double = IggyDouble()
    await double.start(port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    sys.stdout.write(f"listening on {double.address}\n")
    sys.stdout.flush()
    try:
        await stop.wait()
    finally:
        await double.stop()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.iggy_double")
    parser.add_argument("--port", type=int, default=0, help="0: an ephemeral port")
    args = parser.parse_args(argv)
    asyncio.run(serve(args.port))
    return 0


if __name__ == "__main__":
    sys.exit(main())
