"""Pausing the cyclic garbage collector around a render: a process-wide switch, so it belongs
to the shells that call the library (the controller, the command line, the benchmarks), never
to the pure layers. It lives here, in the package the shells share, so no shell leans on another
for it; it imports nothing but ``gc``, so the command line's start-up does not grow by it."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    """Pause the cyclic garbage collector while a pass allocates its manifests.

    A large pass allocates millions of dicts and lists, none of them in a reference cycle; the
    collector would traverse the growing heap again and again (it triples the time of the
    largest shape) and could free nothing. Reference counting still frees everything, and the
    previous state is restored on the way out.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
