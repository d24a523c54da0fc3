"""Ray for the Elastic EP integration test: a version-keyed virtualenv outside the repository.

``ray_bin()`` answers the ``bin`` directory of
``${GPUSTACK_RAY_CACHE:-~/.cache/gpustack-render}/ray-<RAY_VERSION>/``, creating it the first time
(``python3.11 -m venv`` then ``pip install ray[default]==<RAY_VERSION>``: the ``default`` extra
brings the dashboard, whose state API the test reads) and reusing it afterwards. A venv is
complete only once the marker file ``.complete`` exists, so an interrupted install is redone,
never half-used. Ray is not a dependency of the project nor of its test extra: only this test
runs it.

Run it alone to prepare the cache ahead of a CI job: ``python tests/integration/ray_install.py``
(it prints the ``bin`` directory and how long the install took).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Final

#: The Ray the test runs: the version GPUStack's Elastic EP documents pin (the engine check,
#: hack/engines-check.py, installs the same one beside vLLM).
RAY_VERSION: Final = "2.56.1"
#: The interpreter the venv is built with (the engine images' Python line).
RAY_PYTHON: Final = os.environ.get("GPUSTACK_RAY_PYTHON", "python3.11")
#: How long an install may take before it is called failed (a fresh machine downloads ~100 MB).
INSTALL_TIMEOUT_S: Final = 900


class RayInstallError(RuntimeError):
    """Ray could not be installed (the message says which step and its output)."""


def ray_cache_dir() -> Path:
    base = os.environ.get("GPUSTACK_RAY_CACHE") or str(Path.home() / ".cache" / "gpustack-render")
    return Path(base) / f"ray-{RAY_VERSION}"


def _run(argv: list[str], step: str) -> None:
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RayInstallError(f"{step}: {exc}") from exc
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr)[-4000:]
        raise RayInstallError(f"{step} exited {proc.returncode}:\n{tail}")


def ray_bin(log: bool = True) -> Path:
    """The ``bin`` directory of the Ray venv (with ``ray`` and ``python`` in it), installed on
    first use."""
    venv = ray_cache_dir()
    marker = venv / ".complete"
    bindir = venv / "bin"
    if marker.is_file() and (bindir / "ray").is_file():
        return bindir
    if venv.exists():
        shutil.rmtree(venv)
    venv.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    _run([RAY_PYTHON, "-m", "venv", str(venv)], f"creating the venv {venv} with {RAY_PYTHON}")
    _run(
        [
            str(bindir / "python"),
            "-m",
            "pip",
            "install",
            "--disable-pip-version-check",
            "--quiet",
            f"ray[default]=={RAY_VERSION}",
        ],
        f"pip install ray[default]=={RAY_VERSION} into {venv}",
    )
    marker.write_text(f"ray[default]=={RAY_VERSION}\n")
    if log:
        print(
            f"installed ray[default]=={RAY_VERSION} into {venv} in "
            f"{time.monotonic() - started:.1f} s",
            file=sys.stderr,
        )
    return bindir


if __name__ == "__main__":
    t0 = time.monotonic()
    print(ray_bin())
    print(f"ready in {time.monotonic() - t0:.1f} s", file=sys.stderr)
