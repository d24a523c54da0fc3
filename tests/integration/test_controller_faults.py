"""Faults in the middle of a converge and of a rollout of every deployment, with the invariants
checked after each (bench/faults.py, bench/invariants.py; the bench runs the same rounds at 64,
256 and 1,024 deployments): on a simulated cluster of its own, 64 ModelDeployments x 2 replicas
converge under ``python -m gpustack_controller`` (its own process, on a kube-apiserver of its
own, audited), then each round deletes an eighth of them, creates as many, edits every other
one, and strikes a quarter of the way in: the controller SIGKILLed and started again, its API
server restarted, Kueue restarted, etcd paused for 10 s (``GPUSTACK_FAULTS`` names fewer rounds,
``GPUSTACK_FAULT_DEPLOYMENTS`` another size). After each, the run must converge again and the
checker must find no two live replicas of one ordinal, no Pod without a Workload or Workload
without a Pod past the grace, no write repeated in a loop, no lost status.

The rule "a role with no serving replica during its rollout" is reported but not asserted: the
rollout's cadence gate turns the next healthy replica over once the replacement is admitted, not
once it is Ready (docs/decisions.md, "A role unserved between a replacement's admission and its
readiness"), so each rollout of a two-replica role leaves it unserved for the replacement's
start-up."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from bench.controller import (
    CONTROLLED,
    CONTROLLER_USER,
    ControllerProcess,
    NamespaceWatch,
    _deployment,
    _edited_deployment,
    _in_flight,
    _namespace,
    _role,
    prepare,
)
from bench.faults import FaultContext, fault_rounds
from gpustack_controller.kube import MODEL_DEPLOYMENTS, PODS, Kube
from gpustack_controller.kube import WORKLOADS as CONTROLLER_WORKLOADS

from .cluster import Cluster, ClusterBinaries, default_nodes

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

#: The issue's shorter version: 64 deployments and all four faults (the bench runs 64, 256 and
#: 1,024). Each round re-converges in 30 to 60 s on the two cores (docs/design/0006).
DEPLOYMENTS = int(os.environ.get("GPUSTACK_FAULT_DEPLOYMENTS", "64"))
REPLICAS = 2
FAULTS = tuple(os.environ.get("GPUSTACK_FAULTS", "controller,apiserver,kueue,etcd").split(","))


@pytest.fixture(scope="module")
def fault_cluster(envtest_binaries: ClusterBinaries) -> Iterator[Cluster]:
    """A cluster of its own: its Kueue, API servers and etcd are restarted and paused."""
    gpus = DEPLOYMENTS * REPLICAS
    with Cluster(envtest_binaries, nodes=default_nodes(count=-(-gpus // 8))) as sim:
        yield sim


async def test_faults_during_converge_and_rollout_break_no_invariant(
    fault_cluster: Cluster, tmp_path: Path
) -> None:
    server = fault_cluster.control_plane.add_apiserver("controller")
    kube = await Kube.connect(kubeconfig=str(fault_cluster.kubeconfig))
    controller = ControllerProcess(
        server.kubeconfig(CONTROLLER_USER), tmp_path / "controller.log", None
    )
    pods = workloads = None
    try:
        await prepare(kube, fault_cluster, DEPLOYMENTS * REPLICAS)
        await controller.started()
        ns = await _namespace(kube, "faults")
        pods = NamespaceWatch(kube, PODS, ns)
        workloads = NamespaceWatch(kube, CONTROLLER_WORKLOADS, ns)
        await pods.start()
        await workloads.start()
        started = time.perf_counter()
        await _in_flight(
            (
                partial(
                    kube.create,
                    MODEL_DEPLOYMENTS,
                    _deployment(f"bench-{i}", ns, CONTROLLED[0], REPLICAS),
                    ns,
                )
                for i in range(DEPLOYMENTS)
            ),
            16,
        )
        await pods.until(lambda: pods.all_ready(DEPLOYMENTS * REPLICAS), 300, "first converge")
        print(f"converged {DEPLOYMENTS} deployments in {time.perf_counter() - started:.1f} s")
        ctx = FaultContext(
            kube=kube,
            namespace=ns,
            pods=pods,
            workloads=workloads,
            controller=controller,
            server=server,
            cluster=fault_cluster,
            audit_log=fault_cluster.dir / f"audit-{server.name}.log",
            replicas=REPLICAS,
            deployment=_edited_deployment,
            role=lambda replicas, edit: _role(CONTROLLED[0], replicas, edit),
            live=[f"bench-{i}" for i in range(DEPLOYMENTS)],
            next_index=DEPLOYMENTS,
            rest_seconds=3.0,
            grace_seconds=15.0,
        )
        rounds = await fault_rounds(ctx, FAULTS)
        for r in rounds:
            print(r.line())
        # Every round struck while Pods were being replaced and created, and ended converged.
        assert [r.fault for r in rounds] == list(FAULTS)
        assert all(r.deployments and r.created and r.reconverge_s == r.reconverge_s for r in rounds)
        broken = [str(v) for r in rounds for v in r.violations if v.rule != "role-unserved"]
        assert broken == []
        # The checker saw the controller's writes (it runs as the audited identity).
        assert all(r.writes > 0 for r in rounds)
    finally:
        for watch in (pods, workloads):
            if watch is not None:
                await watch.stop()
        controller.stop()
        await kube.close()
