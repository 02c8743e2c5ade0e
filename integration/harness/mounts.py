"""Bind-mount bookkeeping of the RabbitMQ chroots, and deleting a tree without following a
mount into the host's ``/proc`` or ``/dev``."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Protocol

from .envfile import say

__all__ = [
    "OWNER_FILE",
    "MountOps",
    "SystemMounts",
    "bind_chroot",
    "claim",
    "is_mounted",
    "mount_points",
    "mounts_under",
    "owner_elsewhere",
    "safe_rm_tree",
    "unbind_chroot",
    "unmount_all_under",
]

#: where ``.brokers/<target>/data`` appears inside a chroot
MOUNT_DATA = "/srv/streamwire"


def _unescape(field: str) -> str:
    # /proc/self/mounts writes space, tab, newline and backslash as \040 \011 \012 \134
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and field[i + 1 : i + 4].isdigit() and len(field[i + 1 : i + 4]) == 3:
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mount_points(mounts_text: str) -> list[str]:
    """The mount points (second field) of a ``/proc/self/mounts`` text."""
    points = []
    for line in mounts_text.splitlines():
        fields = line.split()
        if len(fields) >= 2:
            points.append(_unescape(fields[1]))
    return points


def mounts_under(directory: Path, mounts_text: str) -> list[str]:
    """Mount points at or below ``directory``, deepest first (the order to unmount them)."""
    top = os.path.realpath(directory)
    below = {p for p in mount_points(mounts_text) if p == top or p.startswith(top + "/")}
    return sorted(below, key=lambda p: (p.count("/"), p), reverse=True)


class MountOps(Protocol):
    """The root-only operations, so that the bookkeeping can be tested with a fake."""

    def mounts_text(self) -> str: ...

    def bind(self, source: Path, target: Path, *, read_only: bool) -> None: ...

    def unmount(self, target: str) -> None: ...


class SystemMounts:
    """The real thing: ``/proc/self/mounts``, ``mount --bind`` and ``umount`` (then lazy)."""

    def mounts_text(self) -> str:
        return Path("/proc/self/mounts").read_text(encoding="utf-8")

    def bind(self, source: Path, target: Path, *, read_only: bool) -> None:
        subprocess.run(["mount", "--bind", str(source), str(target)], check=True)
        if read_only:
            # device nodes still open for writing, but nothing below the cache folder can
            # create or delete entries of the host's /dev or /proc
            subprocess.run(["mount", "-o", "remount,bind,ro", str(target)], check=True)

    def unmount(self, target: str) -> None:
        for argv in (["umount", target], ["umount", "-l", target]):
            done = subprocess.run(
                argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False
            )
            if done.returncode == 0:
                return


def is_mounted(path: Path, ops: MountOps) -> bool:
    return os.path.realpath(path) in mount_points(ops.mounts_text())


def unmount_all_under(directory: Path, ops: MountOps) -> None:
    """Unmounts everything at or below ``directory``, deepest first."""
    for point in mounts_under(directory, ops.mounts_text()):
        ops.unmount(point)


def safe_rm_tree(directory: Path, ops: MountOps) -> bool:
    """Deletes ``directory`` after unmounting everything below it; refuses (False) while
    anything is still mounted there, and never crosses into another file system."""
    if not directory.exists() and not directory.is_symlink():
        return True
    unmount_all_under(directory, ops)
    if mounts_under(directory, ops.mounts_text()):
        say(f"refusing to delete {directory}: something is still mounted below it")
        return False
    done = subprocess.run(["rm", "-rf", "--one-file-system", "--", str(directory)], check=False)
    return done.returncode == 0 and not directory.exists()


def bind_chroot(rootfs: Path, data: Path, ops: MountOps) -> list[str]:
    """Binds the host's ``/proc`` and ``/dev`` (read-only) and ``data`` (read-write, at
    :data:`MOUNT_DATA`) into ``rootfs``, each unless already there; returns what it bound."""
    done = []
    for name in ("proc", "dev"):
        target = rootfs / name
        if not is_mounted(target, ops):
            target.mkdir(parents=True, exist_ok=True)
            ops.bind(Path("/") / name, target, read_only=True)
            done.append(str(target))
    target = rootfs / MOUNT_DATA.lstrip("/")
    if not is_mounted(target, ops):
        target.mkdir(parents=True, exist_ok=True)
        ops.bind(data, target, read_only=False)
        done.append(str(target))
    return done


def unbind_chroot(rootfs: Path, ops: MountOps) -> list[str]:
    """Undoes :func:`bind_chroot` (data first); returns what it unmounted."""
    done = []
    for target in (rootfs / MOUNT_DATA.lstrip("/"), rootfs / "dev", rootfs / "proc"):
        if is_mounted(target, ops):
            ops.unmount(os.path.realpath(target))
            done.append(str(target))
    return done


OWNER_FILE = ".streamwire-state"
"""In a chroot's root: the state folder of the harness that runs brokers in it."""


def owner_elsewhere(rootfs: Path, state: Path) -> Path | None:
    """The other harness state folder that runs brokers in ``rootfs`` (it shares this cache),
    if that folder still exists; ``None`` when the chroot is free or ours."""
    try:
        recorded = Path((rootfs / OWNER_FILE).read_text(encoding="utf-8").strip())
    except OSError:
        return None
    if not recorded.parts or recorded.resolve() == state.resolve() or not recorded.is_dir():
        return None
    return recorded


def claim(rootfs: Path, state: Path) -> None:
    """Records ``state`` as the harness running brokers in ``rootfs``."""
    (rootfs / OWNER_FILE).write_text(f"{state.resolve()}\n", encoding="utf-8")
