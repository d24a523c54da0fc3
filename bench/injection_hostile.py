"""How long the Pod KV-cache review takes on the largest hostile Pods an author can send.

The library runs on the webhook's event loop, so a review that takes seconds stalls every other
review behind it, and past the API server's 10 s webhook timeout the Pod gets no verdict at all.
Each case below fills a Pod of the benchmark in bench/injection.py with about 1 MB of one
hostile shape: an option bundle a launcher reads letter by letter (``env``, ``tini``,
``python3``), a chain of 150,000 launchers, and 17,000 ``env`` entries rewritten every other one
(a JSON Patch diff is quadratic on that many equal items). Each prints its review time and the
ratio to ``json.dumps`` of the same Pod in this run (the baseline: reading the object once);
the run fails (exit 1) when a case's review is more than 500 times that baseline, or takes more
than 2 s (a fifth of the timeout). Before the reviews were linear, these cases took 11–58 s
(ratios in the thousands); linear, they measure 5–70 here.

Run: ``python -m bench.injection_hostile`` (or ``python -m bench`` for every benchmark).
"""

from __future__ import annotations

import copy
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from bench.injection import NS, lookups, pod
from gpustack_render.core.review import AdmissionRequest
from gpustack_render.core.settings import Settings
from gpustack_render.injection import review_pod
from gpustack_render.schema.lookups import StaticLookups

MAX_RATIO = 500.0
MAX_SECONDS = 2.0
ROUNDS = 3


def _with_command(command: list[str]) -> dict[str, Any]:
    subject = pod()
    engine = next(c for c in subject["spec"]["containers"] if c["name"] == "server")
    engine["command"] = command
    engine.pop("args", None)
    return subject


def _alternating_env() -> dict[str, Any]:
    subject = pod()
    engine = next(c for c in subject["spec"]["containers"] if c["name"] == "server")
    engine["env"] = [
        {"name": "MOONCAKE_MASTER", "value": f"v{i}"} if i % 2 else {"name": f"X{i}", "value": "1"}
        for i in range(17_000)
    ]
    return subject


SGLANG = ["python3", "-m", "sglang.launch_server"]
CASES: dict[str, Callable[[], dict[str, Any]]] = {
    "env-option-bundle": lambda: _with_command(["env", "-" + "v" * 1_000_000, *SGLANG]),
    "tini-option-bundle": lambda: _with_command(["tini", "-" + "v" * 1_000_000, "--", *SGLANG]),
    "python-option-bundle": lambda: _with_command(
        ["python3", "-" + "u" * 1_000_000, "-m", "sglang.launch_server"]
    ),
    "launcher-chain": lambda: _with_command(["tini", "--"] * 150_000 + SGLANG),
    "busybox-chain": lambda: _with_command(["busybox"] * 150_000 + SGLANG),
    "alternating-env": _alternating_env,
}


def _best(runs: list[Callable[[], object]]) -> float:
    """The fastest of ``runs`` (each timed alone)."""
    best = float("inf")
    for run in runs:
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


def _review(
    subject: dict[str, Any], objects: StaticLookups, settings: Settings
) -> Callable[[], object]:
    """One review of ``subject`` (a copy made before the clock starts, one per round)."""
    request = AdmissionRequest(operation="CREATE", object=subject, namespace=NS, name="chat-0")
    return lambda: review_pod(request, lookups=objects, settings=settings)


def _dumps(subject: dict[str, Any]) -> Callable[[], object]:
    return lambda: json.dumps(subject)


def main() -> int:
    objects = lookups()
    settings = Settings()
    status = 0
    for name, build in CASES.items():
        subject = build()
        size = len(json.dumps(subject))
        request = AdmissionRequest(operation="CREATE", object=subject, namespace=NS, name="chat-0")

        verdict = review_pod(request, lookups=objects, settings=settings)
        seconds = _best([_review(copy.deepcopy(subject), objects, settings) for _ in range(ROUNDS)])
        baseline = _best([_dumps(subject)] * ROUNDS)
        ratio = seconds / baseline
        missed = ratio > MAX_RATIO or seconds > MAX_SECONDS
        status |= missed
        print(
            f"case={name} bytes={size} allowed={verdict.allowed} review_s={seconds:.3f} "
            f"json_dumps_s={baseline:.4f} ratio={ratio:.1f}"
            + (f" MISSED (target ratio<={MAX_RATIO:.0f}, <={MAX_SECONDS:.0f} s)" if missed else ""),
            flush=True,
        )
    return status


if __name__ == "__main__":
    sys.exit(main())
