"""The mount table reader of the node plugin (gpustack_modelmanager/csi/mounter.py)."""

from __future__ import annotations

from pathlib import Path

from gpustack_modelmanager.csi.mounter import mount_points, mounted

MOUNTINFO = """\
22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw
90 22 8:1 /store/ab /pods/u/csi/model/mount ro,nosuid,nodev,relatime shared:1 - ext4 /dev/sda1 rw
91 22 8:1 /x /mnt/with\\040space rw,relatime - ext4 /dev/sda1 rw
92 22 8:1 /y /mnt/with\\040space ro,relatime - ext4 /dev/sda1 rw
"""


def test_mount_points_read_the_options_and_unescape() -> None:
    points = mount_points(MOUNTINFO)
    target = "/pods/u/csi/model/mount"
    assert points[target] == "ro,nosuid,nodev,relatime"
    assert points["/mnt/with space"] == "ro,relatime"  # the top mount wins
    assert points["/"] == "rw,relatime"


def test_mounted_reads_this_process_table(tmp_path: Path) -> None:
    assert mounted(Path("/proc")) is not None
    assert mounted(tmp_path) is None
