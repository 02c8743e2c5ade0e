"""A run of NATS ``MSG`` commands for directly delivered subscriptions, taken from a socket
read before nats-py's parser sees it.

nats-py's parser matches a regular expression per command, deletes each command from the
front of its buffer (a copy of the rest of the buffer each time) and awaits a coroutine per
message: ≈ 4 µs of CPU per ack (docs/benchmarks/notes/2026-11.md, "Liftbridge publish").
Acks are plain
``MSG <subject> <sid> <size>\\r\\n<payload>\\r\\n`` commands (no reply subject, no headers)
on a subscription whose messages :meth:`NatsLink.deliver_directly` hands to a function;
:func:`take_msgs` walks such a run at the front of the data and hands each one over, and
stops at anything else (another subscription, a reply subject, ``HMSG``, ``PING``, ``+OK``…),
which then goes to nats-py's parser unchanged and in order.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

__all__ = ("take_msgs",)

_MSG = b"MSG "
_CRLF = b"\r\n"
_MAX_LINE = 4096
"""nats-server's default max_control_line: a longer line is not a MSG of ours."""

DirectHandler = Callable[[bytes, bytes], bool]


def take_msgs(data: bytes, handlers: Mapping[int, DirectHandler]) -> tuple[int, int, int, bool]:
    """Hand the complete ``MSG`` commands at the front of ``data`` whose sid is in
    ``handlers`` (without a reply subject) to ``handlers[sid](subject, payload)``, in order,
    until one is something else, incomplete, or refused (its handler returns False: it is
    left in ``data``).

    Returns ``(consumed, messages, payload bytes, incomplete)``: the length of the front
    taken, the messages and payload bytes handed over, and whether it stopped at a ``MSG``
    for a handled sid (or the beginning of a command) that ``data`` holds only part of —
    the caller then keeps ``data[consumed:]`` until more bytes come. Raises nothing: a
    malformed line is left to nats-py's parser, which reports it.
    """
    pos, end, count, taken = 0, len(data), 0, 0
    find, startswith = data.find, data.startswith
    while pos < end:
        if not startswith(_MSG, pos):
            return pos, count, taken, end - pos < 4 and _MSG.startswith(data[pos:])
        eol = find(_CRLF, pos, pos + _MAX_LINE)
        if eol < 0:
            return pos, count, taken, end - pos < _MAX_LINE
        args = data[pos + 4 : eol].split(b" ")
        if len(args) != 3 or not args[1].isdigit() or not args[2].isdigit():
            return pos, count, taken, False
        handler = handlers.get(int(args[1]))
        if handler is None:
            return pos, count, taken, False
        size = int(args[2])
        start = eol + 2
        stop = start + size
        if stop + 2 > end:
            return pos, count, taken, True
        if data[stop : stop + 2] != _CRLF:
            return pos, count, taken, False
        if not handler(args[0], data[start:stop]):
            return pos, count, taken, False
        count += 1
        taken += size
        pos = stop + 2
    return pos, count, taken, False
