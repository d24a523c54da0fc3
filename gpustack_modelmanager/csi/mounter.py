"""Read-only bind mounts through the kernel's own calls (``mount(2)``, ``umount2(2)``), and the
mount table as ``/proc/self/mountinfo`` lists it.

The plugin runs privileged with the kubelet's pods directory mounted with ``Bidirectional``
propagation, so a bind mount made here is seen by kubelet and by the Pod's containers.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
from pathlib import Path

MS_RDONLY = 0x1
MS_NOSUID = 0x2
MS_NODEV = 0x4
MS_REMOUNT = 0x20
MS_BIND = 0x1000
MS_REC = 0x4000

_libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
_libc.mount.argtypes = [
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_char_p,
    ctypes.c_ulong,
    ctypes.c_void_p,
]
_libc.umount2.argtypes = [ctypes.c_char_p, ctypes.c_int]


class MountError(OSError):
    """A mount or unmount call failed (``errno`` and the path are in the message)."""


def _call_mount(source: str | None, target: str, flags: int) -> None:
    src = source.encode() if source is not None else None
    if _libc.mount(src, target.encode(), None, flags, None) != 0:
        err = ctypes.get_errno()
        raise MountError(err, f"mount {source or '(remount)'} on {target}: {os.strerror(err)}")


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


def bind_read_only(source: Path, target: Path) -> None:
    """Bind ``source`` on ``target`` (a directory that exists), then make the bind read-only,
    nosuid and nodev; a failed remount unmounts again so nothing writable is left."""
    _call_mount(str(source), str(target), MS_BIND | MS_REC)
    try:
        _call_mount(None, str(target), MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV)
    except MountError:
        unmount(target)
        raise


def unmount(target: Path) -> None:
    """Unmount ``target``; nothing mounted there is success."""
    if _libc.umount2(str(target).encode(), 0) != 0:
        err = ctypes.get_errno()
        if err in (errno.EINVAL, errno.ENOENT):
            return
        raise MountError(err, f"umount {target}: {os.strerror(err)}")
