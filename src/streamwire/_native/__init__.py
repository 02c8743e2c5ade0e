"""The optional native core: the codec's per-message loops, compiled (Rust, PyO3).

``core`` is the extension module ``streamwire._native._core`` when it is built, carries the
:data:`ABI` this package expects and passes its import-time self-check; otherwise it is
``None`` and every caller runs its pure-Python code, which stays the reference: the same API,
the same bytes, the same messages, the same exceptions (``tests/property/test_native_core.py``).

``STREAMWIRE_PURE=1`` (or the older ``STREAMWIRE_PURE_PYTHON=1``) forces the pure-Python
code; the choice is made once, at import. :data:`reason` says which was chosen and why
(``native core 0.1.0``, or ``pure Python: <why>``; ``streamwire --version`` prints it). A core
that is installed but unusable (another :data:`ABI`, an import error, a failed self-check) is
logged once at WARNING on the ``streamwire`` logger: the pure-Python codec loops cost 4-17x
the native core's CPU (docs/benchmarks.md, "Which core each figure used").
``pip install`` builds the extension when cargo is on PATH (``setup.py``); see
docs/development.md, "Native core".
"""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import AsyncIterator, Callable, Coroutine, Sequence
from typing import TYPE_CHECKING, Any, Final, Protocol

from streamwire.codec.headers import HeaderValue
from streamwire.codec.message import Message
from streamwire.errors import ChecksumMismatchError, DecodeError, LocalProtocolError

if TYPE_CHECKING:
    from streamwire._native._core import FrameIndex as _FrameIndex

__all__ = ("ABI", "PURE_ENV", "NativeCore", "built", "core", "forced_pure", "installed", "reason")

ABI: Final = 16
"""The extension's ``ABI`` must equal this (``native/src/lib.rs``)."""

PURE_ENV: Final = ("STREAMWIRE_PURE", "STREAMWIRE_PURE_PYTHON")


class NativeCore(Protocol):
    """What callers use of the extension (its full types: ``_core.pyi``)."""

    @property
    def ABI(self) -> int: ...

    @property
    def __version__(self) -> str: ...

    @property
    def FrameIndex(self) -> type[_FrameIndex]: ...

    @property
    def ReceivedMessage(self) -> type[Message]: ...

    def init(
        self,
        message: type[Message],
        decode_error: type[BaseException],
        checksum_error: type[BaseException],
        local_error: type[BaseException],
    ) -> None: ...

    def make_message(
        self,
        value: bytes,
        key: bytes | None,
        headers: dict[str, HeaderValue],
        timestamp_us: int | None,
        offset: int | None,
        stream: str | None,
        partition: int | None,
        id: int | None,
    ) -> Message: ...

    def rmq_decode_records(
        self,
        buf: bytes,
        start: int,
        end: int,
        first_offset: int,
        num_records: int,
        ts: int,
        stream: str,
        skip_below: int,
        amqp: bool,
        crc: int | None,
        record: Callable[[int, int, int], Message],
        sub_batch: Callable[[int, int], tuple[int, int, list[Message]]],
    ) -> list[Message]: ...

    def lb_decode_message(self, raw: bytes) -> Message | None: ...

    def h2_gather_data(
        self, buf: bytearray, start: int, stream: int, out: bytearray, budget: int, max_frame: int
    ) -> tuple[int, int]: ...

    def lb_decode_grpc(
        self, buf: bytearray, start: int, limit: int
    ) -> tuple[list[Message], int]: ...

    def rmq_publish_entries(
        self,
        first: int,
        bodies: Sequence[bytes],
        skip: bytes | bytearray,
        start: int,
        room: int,
        max_count: int,
        wrap: bool,
        head: int = -1,
    ) -> tuple[bytes, int, int, int, int] | None: ...

    def rmq_bytes_total(self, values: object) -> int | None: ...

    def rmq_sub_batch_records(self, bodies: object, wrap: bool) -> bytes | None: ...

    def rmq_id_run(self, ids: object) -> bool | None: ...

    def iggy_encode_batch(self, messages: Sequence[Any]) -> bytes | None: ...

    def iggy_encode_runs(
        self, runs: list[tuple[list[bytes], bytes, int]], room: int = 0
    ) -> bytearray | None: ...

    def iggy_locate_frames(
        self, buf: bytes | memoryview, start: int, end: int | None, frame: str
    ) -> _FrameIndex: ...

    def iggy_received_messages(
        self,
        frames: _FrameIndex,
        stream: str,
        key_header: str | None,
        verify: bool,
        headers_and_key: Callable[[bytes, str | None], tuple[dict[str, HeaderValue], bytes | None]],
    ) -> list[Message]: ...

    def lazy_futures(self, cls: type[Any], ledger: object, count: int) -> list[Any]: ...

    def gc_track(self, obj: object) -> None: ...

    def ready_iterator(
        self,
        ready: Any,
        owner: object,
        name: str,
        field: str,
        slow: Callable[[], Coroutine[Any, Any, Any]],
    ) -> AsyncIterator[Any]: ...

    def frame_buffer(self, size: int) -> tuple[bytes, memoryview]: ...


def forced_pure(environ: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    """Whether the environment asks for the pure-Python code (any value but ``""``/``0``)."""
    return any(environ.get(name, "") not in ("", "0") for name in PURE_ENV)


def _self_check(mod: NativeCore) -> None:
    """The extension builds messages exactly as ``Message.received`` does."""
    headers: dict[str, HeaderValue] = {}
    ts, offset, msg_id = 1_700_000_000_000_000, 1 << 70, (1 << 127) + 5
    built = mod.make_message(b"v", b"k", headers, ts, offset, "s", 3, msg_id)
    expected = Message.received(
        b"v",
        key=b"k",
        headers=headers,
        timestamp_us=ts,
        offset=offset,
        stream="s",
        partition=3,
        id=msg_id,
    )
    if type(built) is not Message or built != expected or built.headers is not headers:
        raise RuntimeError("the native core builds messages differently")


#: Why a package installed without the native core runs in pure Python, and how to get it.
NOT_BUILT = (
    "native core not built (no Rust toolchain when streamwire was installed, or the pure "
    "py3-none-any wheel): everything works, with more CPU in the codec loops; to build it, "
    "install Rust (cargo on PATH) and run: pip install --force-reinstall --no-deps <the same "
    "source>"
)


def installed() -> bool:
    """Whether an extension module ``streamwire._native._core`` is present (usable or not)."""
    try:
        return importlib.util.find_spec(f"{__name__}._core") is not None
    except (ImportError, ValueError):
        return False


def built() -> tuple[NativeCore | None, str]:
    """The extension if it is built, of this :data:`ABI` and passes its self-check, whatever
    the environment says (the property tests compare it with the pure-Python code even when
    ``STREAMWIRE_PURE`` is set); otherwise ``None`` and why."""
    if not installed():  # the import's own message reads like a broken install
        return None, NOT_BUILT
    try:
        from streamwire._native import _core
    except ImportError as exc:
        return None, f"native core not loadable: {exc} (reinstall streamwire)"
    abi = getattr(_core, "ABI", None)
    if abi != ABI:
        return (
            None,
            f"native core ABI {abi}, this package needs {ABI}: "
            "reinstall streamwire (in a checkout: make native)",
        )
    try:
        _core.init(Message, DecodeError, ChecksumMismatchError, LocalProtocolError)
        _self_check(_core)
    except Exception as exc:  # an incompatible build: never worse than pure Python
        return None, f"native core failed its self-check: {exc!r}"
    return _core, f"native core {_core.__version__}"


def _load() -> tuple[NativeCore | None, str]:
    if forced_pure():
        return None, "pure Python: forced by STREAMWIRE_PURE"
    found, why = built()
    if found is not None:
        return found, why
    if installed():  # there, but unusable: a stale or foreign build, never silently
        logging.getLogger("streamwire").warning(
            "streamwire runs in pure Python, with 4-17x the CPU in its codec loops: %s", why
        )
    return None, f"pure Python: {why}"


_loaded = _load()
core: Final[NativeCore | None] = _loaded[0]
reason: Final[str] = _loaded[1]
