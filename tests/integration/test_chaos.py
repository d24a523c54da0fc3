"""Chaos on the simulated cluster: the controller killed mid-rollout, the API server stopped.

The controller runs as its own process (``python -m gpustack_controller``) so it can be killed
with SIGKILL at any point. Kill points are drawn from a seeded generator, so a failure is
repeatable; the test is bounded in kills and in time. After every kill the state Kueue, the
scheduler and KWOK left is checked against the rollout's invariants (the seed's "Rollout
behavior", docs/contract/model-deployment.md):

* no ordinal holds live members of two configurations;
* no seat (role, ordinal, member) is held by two live Pods;
* at most one replacement per role is unresolved (created, its group not admitted yet);

and, once the controller is left running, the rollout finishes with every seat present.
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpustack_controller.kube import MODEL_DEPLOYMENTS, Kube

from .cluster import Cluster
from .controller_fixtures import (
    Entrance,
    admitted,
    deployment,
    eventually,
    get_md,
    group_of,
    live,
    new_entrance,
    new_namespace,
    pods_of,
    seat,
    serving,
    workloads_in,
)
from .controlplane import free_port

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

REPO_ROOT = Path(__file__).resolve().parents[2]
IMAGES = ("vllm/vllm-openai:v0.25.1", "vllm/vllm-openai:v0.25.2", "vllm/vllm-openai:v0.26.0")
#: At least this many SIGKILLs in the test (the issue asks for 20).
KILLS = 20
#: The test gives up (fails) past this many seconds.
BUDGET = 420.0
SEED = 20261201


class ControllerProcess:
    """``python -m gpustack_controller`` against the cluster, restartable and killable."""

    def __init__(self, kubeconfig: Path, log_dir: Path) -> None:
        self.kubeconfig = kubeconfig
        self.log_dir = log_dir
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        self.starts += 1
        log = (self.log_dir / f"controller-{self.starts}.log").open("wb")
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gpustack_controller",
                f"--kubeconfig={self.kubeconfig}",
                "--no-leader-elect",
                "--health-host=127.0.0.1",
                f"--health-port={free_port()}",
            ],
            cwd=REPO_ROOT,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        log.close()

    def kill(self) -> None:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


@pytest.fixture
def controller(kubeconfig_path: Path, tmp_path: Path) -> Iterator[ControllerProcess]:
    proc = ControllerProcess(kubeconfig_path, tmp_path)
    try:
        yield proc
    finally:
        proc.stop()


def _image(pod: dict[str, Any]) -> str:
    return str(pod["spec"]["containers"][-1]["image"])


async def _violations(kube: Kube, ns: str, name: str, wanted: str) -> list[str]:
    """The rollout invariants that the current state breaks (empty: none)."""
    pods = live(await pods_of(kube, ns, name))
    workloads = {w["metadata"]["name"]: w for w in await workloads_in(kube, ns)}
    problems: list[str] = []
    seats: dict[tuple[str, int, int], int] = {}
    images: dict[tuple[str, int], set[str]] = {}
    for pod in pods:
        key = seat(pod)
        seats[key] = seats.get(key, 0) + 1
        images.setdefault(key[:2], set()).add(_image(pod))
    problems += [f"seat {k} held by {n} live Pods" for k, n in seats.items() if n > 1]
    problems += [f"ordinal {k} mixes {sorted(v)}" for k, v in images.items() if len(v) > 1]
    unresolved = {
        key
        for pod in pods
        if _image(pod) == wanted
        and not (group_of(pod) in workloads and admitted(workloads[group_of(pod)]))
        for key in [seat(pod)[:2]]
    }
    by_role: dict[str, int] = {}
    for role_name, _ in unresolved:
        by_role[role_name] = by_role.get(role_name, 0) + 1
    problems += [f"role {r}: {n} unresolved replacements" for r, n in by_role.items() if n > 1]
    return problems


async def _rolled(kube: Kube, ns: str, name: str, wanted: str, pods: int) -> bool:
    current = await serving(kube, ns, name, pods)
    return bool(current) and all(_image(p) == wanted for p in current or ())


async def _set_image(kube: Kube, ns: str, name: str, entrance: Entrance, image: str) -> None:
    body = deployment(name, ns, entrance.role(replicas=3, size=2), image=image)
    await kube.merge_patch(MODEL_DEPLOYMENTS, name, {"spec": body["spec"]}, ns)


async def test_sigkill_at_random_points_of_rollouts_breaks_no_invariant(
    kube: Kube, cluster: Cluster, controller: ControllerProcess
) -> None:
    rng = random.Random(SEED)
    started = time.monotonic()
    ns = await new_namespace(kube, "chaos")
    # 3 replicas x 2 members x 1 GPU, and room for one replacement group beside them.
    entrance = await new_entrance(kube, cluster, gpus=8)
    controller.start()
    body = deployment("chaos", ns, entrance.role(replicas=3, size=2), image=IMAGES[0])
    await kube.create(MODEL_DEPLOYMENTS, body, ns)
    await eventually(lambda: serving(kube, ns, "chaos", 6), timeout=90, what="6 Pods serving")

    kills = checks = edits = 0
    wanted = IMAGES[0]
    while kills < KILLS:
        assert time.monotonic() - started < BUDGET, f"out of time after {kills} kills"
        if await _rolled(kube, ns, "chaos", wanted, 6):
            edits += 1
            wanted = IMAGES[edits % len(IMAGES)]
            await _set_image(kube, ns, "chaos", entrance, wanted)
        await asyncio.sleep(rng.uniform(0.2, 2.5))
        controller.kill()
        kills += 1
        problems = await _violations(kube, ns, "chaos", wanted)
        checks += 1
        assert not problems, f"after kill {kills}: {problems}"
        await asyncio.sleep(rng.uniform(0.0, 1.0))
        problems = await _violations(kube, ns, "chaos", wanted)
        checks += 1
        assert not problems, f"while the controller is down after kill {kills}: {problems}"
        controller.start()

    # Left alone, the controller finishes the rollout it was in.
    await eventually(
        lambda: _rolled(kube, ns, "chaos", wanted, 6), timeout=120, what=f"rolled to {wanted}"
    )
    assert not await _violations(kube, ns, "chaos", wanted)
    assert edits >= 1, "no rollout was interrupted"
    final = live(await pods_of(kube, ns, "chaos"))
    assert sorted(seat(p) for p in final) == [
        ("server", o, m) for o in range(3) for m in range(2)
    ], "a seat was lost or duplicated"
    print(
        f"chaos: {kills} kills, {checks} invariant checks, {edits} edits, "
        f"{time.monotonic() - started:.0f} s"
    )


async def test_the_controller_recovers_from_a_10s_api_server_outage_without_a_restart(
    kube: Kube, cluster: Cluster, controller: ControllerProcess
) -> None:
    ns = await new_namespace(kube, "outage")
    entrance = await new_entrance(kube, cluster, gpus=4)
    controller.start()
    body = deployment("outage", ns, entrance.role(replicas=2), image=IMAGES[0])
    await kube.create(MODEL_DEPLOYMENTS, body, ns)
    await eventually(lambda: serving(kube, ns, "outage", 2), timeout=90, what="2 Pods serving")
    # Mid-rollout: the edit lands, then the API server goes away for 10 s.
    edited = deployment("outage", ns, entrance.role(replicas=2), image=IMAGES[1])
    await kube.merge_patch(MODEL_DEPLOYMENTS, "outage", {"spec": edited["spec"]}, ns)
    await asyncio.sleep(0.5)
    await asyncio.to_thread(cluster.control_plane.pause_apiserver, 10.0)

    async def rolled() -> bool:
        current = await serving(kube, ns, "outage", 2)
        return bool(current) and all(_image(p) == IMAGES[1] for p in current or ())

    await eventually(rolled, timeout=120, what="the rollout finished after the outage")
    assert controller.alive() and controller.starts == 1, "the controller was restarted"

    async def ready() -> bool:
        md = await get_md(kube, ns, "outage")
        return md is not None and (md.get("status") or {}).get("phase") == "Ready"

    await eventually(ready, timeout=60, what="status phase Ready after the outage")
    assert controller.alive() and controller.starts == 1, "the controller was restarted"
