"""Read-only bind mounts through the kernel's own calls (``open_tree(2)``, ``mount_setattr(2)``,
``move_mount(2)``, ``umount2(2)``), and the mount table as ``/proc/self/mountinfo`` lists it.

The plugin runs privileged with the kubelet's pods directory mounted with ``Bidirectional``
propagation, so a bind mount made here is seen by kubelet and by the Pod's containers.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
from pathlib import Path

# The new mount API's calls (the same numbers on every architecture since Linux 5.2) and flags.
SYS_OPEN_TREE = 428
SYS_MOVE_MOUNT = 429
SYS_MOUNT_SETATTR = 442
AT_FDCWD = -100
AT_EMPTY_PATH = 0x1000
AT_RECURSIVE = 0x8000
OPEN_TREE_CLONE = 1
OPEN_TREE_CLOEXEC = os.O_CLOEXEC
MOVE_MOUNT_F_EMPTY_PATH = 0x4
MOUNT_ATTR_RDONLY = 0x1
MOUNT_ATTR_NOSUID = 0x2
MOUNT_ATTR_NODEV = 0x4

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]


class MountError(OSError):
    """A mount or unmount call failed (``errno`` and the path are in the message)."""


def _unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as ``\\ooo``."""
    out: list[str] = []
    i = 0
    while i < len(field):
        if field[i] == "\\" and i + 3 < len(field) and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mount_points(mountinfo: str) -> dict[str, str]:
    """Each mount point of a ``mountinfo`` text and its options (the last mount on a path wins,
    as the kernel shows the top one)."""
    out: dict[str, str] = {}
    for line in mountinfo.splitlines():
        fields = line.split()
        if len(fields) >= 6:
            out[_unescape(fields[4])] = fields[5]
    return out


def mounted(target: Path) -> str | None:
    """The mount options of ``target`` when something is mounted on it, else ``None``."""
    text = Path("/proc/self/mountinfo").read_text()
    return mount_points(text).get(str(target.resolve(strict=False)))


class _MountAttr(ctypes.Structure):
    """``struct mount_attr`` of ``mount_setattr(2)``."""

    _fields_ = (
        ("attr_set", ctypes.c_uint64),
        ("attr_clr", ctypes.c_uint64),
        ("propagation", ctypes.c_uint64),
        ("userns_fd", ctypes.c_uint64),
    )


def _syscall(number: int, what: str, *args: object) -> int:
    result = int(_libc.syscall(number, *args))
    if result < 0:
        err = ctypes.get_errno()
        raise MountError(err, f"{what}: {os.strerror(err)}")
    return result


def bind_read_only(source: Path, target: Path) -> None:
    """Bind ``source`` on ``target`` (a directory that exists), read-only, nosuid and nodev.

    The new mount API (Linux 5.12+): the tree is cloned detached (``open_tree``), made read-only
    while still detached (``mount_setattr``), then attached at the target (``move_mount``). So
    the mount is read-only from its first instant, and so is every copy the target's shared
    propagation makes in kubelet's namespace: a ``MS_REMOUNT|MS_RDONLY`` after a plain bind would
    change this namespace's copy only, leaving the propagated ones writable.
    """
    fd = _syscall(
        SYS_OPEN_TREE,
        f"open_tree {source}",
        ctypes.c_int(AT_FDCWD),
        str(source).encode(),
        ctypes.c_uint(OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE),
    )
    try:
        attr = _MountAttr(attr_set=MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV)
        _syscall(
            SYS_MOUNT_SETATTR,
            f"mount_setattr {source}",
            ctypes.c_int(fd),
            b"",
            ctypes.c_uint(AT_EMPTY_PATH | AT_RECURSIVE),
            ctypes.byref(attr),
            ctypes.c_size_t(ctypes.sizeof(attr)),
        )
        _syscall(
            SYS_MOVE_MOUNT,
            f"move_mount {source} to {target}",
            ctypes.c_int(fd),
            b"",
            ctypes.c_int(AT_FDCWD),
            str(target).encode(),
            ctypes.c_uint(MOVE_MOUNT_F_EMPTY_PATH),
        )
    finally:
        os.close(fd)


def unmount(target: Path) -> None:
    """Unmount ``target``; nothing mounted there is success."""
    if _libc.umount2(str(target).encode(), 0) != 0:
        err = ctypes.get_errno()
        if err in (errno.EINVAL, errno.ENOENT):
            return
        raise MountError(err, f"umount {target}: {os.strerror(err)}")
