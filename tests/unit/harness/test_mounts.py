"""Chroot mount bookkeeping. The mount and umount calls themselves need root and would change
the machine, so a fake keeps the mount table; parsing, ordering and deleting are real."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from integration.harness import mounts


class FakeMounts:
    """A mount table in memory; ``stuck`` mount points refuse to go."""

    def __init__(self, points: list[str] | None = None, stuck: frozenset[str] = frozenset()):
        self.points = list(points or [])
        self.stuck = stuck
        self.calls: list[tuple[str, ...]] = []

    def mounts_text(self) -> str:
        lines = ["/dev/vda / ext4 rw 0 0"]
        lines += [f"x {p.replace(' ', chr(92) + '040')} fs rw 0 0" for p in self.points]
        return "\n".join(lines) + "\n"

    def bind(self, source: Path, target: Path, *, read_only: bool) -> None:
        self.calls.append(("bind", str(source), str(target), "ro" if read_only else "rw"))
        self.points.append(os.path.realpath(target))

    def unmount(self, target: str) -> None:
        self.calls.append(("umount", target))
        if target not in self.stuck:
            self.points.remove(target)


def test_mount_points_decode_the_kernels_escapes() -> None:
    text = "proc /proc proc rw 0 0\n/dev/vda /srv/my\\040dir ext4 rw 0 0\n\n"
    assert mounts.mount_points(text) == ["/proc", "/srv/my dir"]


def test_mounts_under_lists_deepest_first_and_skips_lookalike_siblings(tmp_path: Path) -> None:
    root = str(tmp_path / "rootfs")
    text = "\n".join(
        f"x {p} fs rw 0 0"
        for p in (
            f"{root}/proc",
            f"{root}/srv/streamwire",
            f"{root}/srv/streamwire/deeper",
            f"{root}-cluster/proc",
            f"{root}",
            "/proc",
        )
    )
    assert mounts.mounts_under(tmp_path / "rootfs", text) == [
        f"{root}/srv/streamwire/deeper",
        f"{root}/srv/streamwire",
        f"{root}/proc",
        root,
    ]


def test_bind_chroot_binds_proc_and_dev_read_only_and_the_data_read_write(tmp_path: Path) -> None:
    rootfs, data = tmp_path / "rootfs", tmp_path / "data"
    fake = FakeMounts()
    bound = mounts.bind_chroot(rootfs, data, fake)
    assert fake.calls == [
        ("bind", "/proc", str(rootfs / "proc"), "ro"),
        ("bind", "/dev", str(rootfs / "dev"), "ro"),
        ("bind", str(data), str(rootfs / "srv/streamwire"), "rw"),
    ]
    assert bound == [str(rootfs / "proc"), str(rootfs / "dev"), str(rootfs / "srv/streamwire")]
    assert (rootfs / "srv/streamwire").is_dir()
    # a second `up` binds nothing twice
    assert mounts.bind_chroot(rootfs, data, fake) == []
    assert len(fake.calls) == 3


def test_unbind_chroot_takes_the_data_away_first(tmp_path: Path) -> None:
    rootfs = tmp_path / "rootfs"
    fake = FakeMounts()
    mounts.bind_chroot(rootfs, tmp_path / "data", fake)
    fake.calls.clear()
    mounts.unbind_chroot(rootfs, fake)
    assert fake.calls == [
        ("umount", str(rootfs / "srv/streamwire")),
        ("umount", str(rootfs / "dev")),
        ("umount", str(rootfs / "proc")),
    ]
    assert fake.points == []
    assert mounts.unbind_chroot(rootfs, fake) == []


def test_safe_rm_tree_unmounts_then_deletes(tmp_path: Path) -> None:
    tree = tmp_path / "rabbitmq-sid.tmp.x"
    (tree / "proc").mkdir(parents=True)
    (tree / "etc" / "rabbitmq").mkdir(parents=True)
    (tree / "etc" / "rabbitmq" / "rabbitmq.conf").write_text("x\n", encoding="utf-8")
    fake = FakeMounts([str(tree / "proc"), str(tmp_path / "elsewhere")])
    assert mounts.safe_rm_tree(tree, fake)
    assert not tree.exists()
    assert fake.points == [str(tmp_path / "elsewhere")]  # untouched


def test_safe_rm_tree_refuses_while_something_stays_mounted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = tmp_path / "rootfs"
    (tree / "dev").mkdir(parents=True)
    (tree / "dev" / "null-look-alike").write_text("", encoding="utf-8")
    stuck = str(tree / "dev")
    fake = FakeMounts([stuck], stuck=frozenset({stuck}))
    assert not mounts.safe_rm_tree(tree, fake)
    assert (tree / "dev" / "null-look-alike").exists()
    assert "refusing to delete" in capsys.readouterr().err


def test_safe_rm_tree_of_nothing(tmp_path: Path) -> None:
    assert mounts.safe_rm_tree(tmp_path / "absent", FakeMounts())


def test_the_system_table_is_readable() -> None:
    assert "/" in mounts.mount_points(mounts.SystemMounts().mounts_text())


def test_a_chroot_remembers_which_harness_runs_brokers_in_it(tmp_path: Path) -> None:
    rootfs, ours, theirs = tmp_path / "rootfs", tmp_path / "ours", tmp_path / "theirs"
    for folder in (rootfs, ours, theirs):
        folder.mkdir()
    assert mounts.owner_elsewhere(rootfs, ours) is None  # nobody yet
    mounts.claim(rootfs, theirs)
    assert mounts.owner_elsewhere(rootfs, ours) == theirs.resolve()  # a shared cache
    assert mounts.owner_elsewhere(rootfs, theirs) is None  # its own
    theirs.rmdir()
    assert mounts.owner_elsewhere(rootfs, ours) is None  # that harness is gone
    mounts.claim(rootfs, ours)
    assert mounts.owner_elsewhere(rootfs, ours) is None
