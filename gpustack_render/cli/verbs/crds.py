"""``gpustack-render crds``: the CustomResourceDefinitions the project ships, generated from
the models."""

from __future__ import annotations

import argparse
from typing import TextIO

from gpustack_render.cli.exits import EXIT_OK
from gpustack_render.cli.output import emit
from gpustack_render.schema.crd import all_crds


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """The ``crds`` verb."""
    emit(all_crds(), args.output, out)
    return EXIT_OK
