"""Run the real node plugin process (``gpustack_modelmanager.__main__.run``):
``python tests/support/csiplugin.py [--trees DIR] [plugin flags]``.

Without ``--trees`` it is the plugin as shipped, its real node store under ``--store-root``.
With ``--trees DIR``, the test double of OUR node store (tests/support/csi.py
``DirectoryTreeStore``) stands in for ``gpustack_modelmanager.store``: trees under
``DIR/<hex of the digest>`` are Ready; a digest listed in ``DIR/pending.txt`` (one per line)
answers Pending. Everything else is the plugin as shipped either way: its flags, the gRPC server
on the unix socket, the ModelArtifact reads and the Settings informer against a real API server,
the kernel's bind mounts.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/, for support.*
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the repository

from gpustack_modelmanager.__main__ import parser, run
from gpustack_modelmanager.csi.storeapi import TreeAnswer, TreePending, TreeRequest
from support.csi import DirectoryTreeStore


class PendingFileStore(DirectoryTreeStore):
    """The double, also answering Pending for the digests a file lists (read on each call)."""

    async def acquire(self, request: TreeRequest) -> TreeAnswer:
        listed = self.root / "pending.txt"
        if listed.exists() and request.digest in listed.read_text().split():
            self.requests.append(request)
            return TreePending(downloaded_bytes=100, size_bytes=request.size_bytes)
        return await super().acquire(request)


def main() -> None:
    p = parser()
    p.add_argument("--trees", type=Path, help="serve the test double's trees from DIR")
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    double = PendingFileStore(args.trees) if args.trees is not None else None
    sys.exit(asyncio.run(run(args, store=double)))


if __name__ == "__main__":
    main()
