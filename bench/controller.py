"""The control plane at scale: the controller against a bare loop on the simulated cluster, at
several sizes in one run (default 64, 256 and 1,024 deployments x 2 replicas).

One simulated GPU cluster (tests/integration/cluster.py: etcd, kube-apiserver, the real Kueue,
scheduler, garbage collector, KWOK) is started with enough KWOK Nodes of 8 GPUs for the largest
size, a /12 Service range, and ClusterQueues whose quota fits it. For each size, in this order:

* ``bare``: the same rendered Pods created by a plain loop (16 creates in flight), queued on a
  ClusterQueue without the AdmissionCheck (nobody else would answer it), until every Pod is
  Running and Ready: the floor of what Kueue, the scheduler and KWOK cost for those Pods (the
  baseline: no controller logic at all);
* ``floor``: the honest floor: the same loop on a ClusterQueue *with* an AdmissionCheck
  (:data:`FLOOR_CHECK`), answered by the smallest possible checker (:class:`FloorChecker`: a
  watch of the namespace's Workloads that marks the check ``Ready`` with one apply as soon as
  every group of the Workload's joint set holds quota; no rendering, no status, no events). It
  is what Kueue, the scheduler and KWOK cost with an AdmissionCheck, which the controller's
  Pods always go through: the converge is divided by it (``ratio_floor``) and by the plain
  bare loop (``ratio_bare``);
* ``controller``: ``python -m gpustack_controller`` started as its own process (so its CPU time
  and peak RSS are its own: ``/proc/<pid>/stat`` and ``VmHWM``), with its informers synced
  before the clock starts (``/healthz`` answers ``ok``); the clock starts at the first of the
  ModelDeployments created (16 creates in flight) and stops when every Pod of every deployment
  is Running and Ready: the controller created them, Kueue admitted every group through the
  project's joint AdmissionCheck, the scheduler bound them, KWOK ran them.

Then, with the controller still running on the converged cluster:

* ``idle``: once the controller has made no write for 10 s, a window of ``--idle-seconds``
  (default 300) with nothing changing; every write the controller makes in it is counted (the
  target is none);
* ``edit``: ``--edits`` times, an annotation of the InstanceType every deployment reads is
  touched (the controller queues all of them again: a full queue of passes that change nothing)
  and at once one deployment's role env is edited (a new pod-spec-hash: a rollout). The time
  from the edit to the first Pod with the new hash is the edit's latency; it is split into the
  controller's reaction (edit → the old replica's Pods deleted), Kueue and KWOK retiring the
  old group (→ its Pods and Workload gone, which the create gate waits for) and the controller's
  create (→ the replacement Pod seen).

Then ``faults`` (``--faults``, default all four; bench/faults.py): one round per fault, each
deleting an eighth of the deployments, creating as many and rolling out every other one, and
striking a quarter of the way in: the controller SIGKILLed and restarted, its API server
restarted, Kueue restarted, etcd paused 10 s. After each the bench waits for the re-converge,
prints its time and what the checker (bench/invariants.py) found.

With ``--compare-with DIR`` (a checkout of another revision), that revision's controller
converges each size once more just before this one's: before and after a change, same run.

For every phase the bench prints where the machine's CPU went (bench/cpu.py: busy cores, and
seconds per process of the cluster and the controller; for the converge, what it used beyond
the honest floor, process by process), when the last Pod was created, how long each Pod took from
created to Ready, and Kueue's own requests per Pod and per second: Kueue runs on an API server
of its own too, counted the same way, and its client is held to 50 requests/s (burst 100) by
its release configuration, which is what bounds the bare loop. While converging it also prints
the controller's passes per queue with their mean duration (the controller's own metrics).

How the controller's API requests are counted: ``apiserver_request_total`` (Kubernetes 1.35) is
labelled by verb, group, version, resource, subresource, scope, component and code, never by
user or user agent, and no per-user breakdown of it exists. So the controller talks to an API
server of its own: a second kube-apiserver on the same etcd (as an HA control plane runs two),
which nobody else uses (:meth:`integration.controlplane.ControlPlane.add_apiserver`). Its
``apiserver_request_total`` minus its ``apiserver_selfrequest_total`` (the server's own loopback
requests, counted by the same labels) is exactly what the controller sent, read from the API
server's own counters. Watch requests are counted when they end. The controller runs as its
own identity bound to the ClusterRole and Role of ``deploy/controller/rbac.yaml``, so the
least-privilege RBAC is exercised too. Writes are POST, PUT, PATCH, APPLY, DELETE and
DELETECOLLECTION.

Figures per size: converge seconds and the ratios to the honest floor (target <= 1.2) and to
the bare loop, the
controller's CPU per deployment (the per-deployment cost; target at the largest size within
1.2x of the smallest) and per pass, its peak RSS (target <= 300 MiB at 1,024), its requests by
verb and resource while converging, the writes of the idle window (target 0) and the
controller's CPU rate in it, the watch events its informers were sent while converging (by
resource, with their size: the API server's ``apiserver_watch_events_total`` and
``apiserver_watch_events_sizes``), the edit latency p50/p99 (target p99 <= 1 s) and the fault
rounds. The last line is ``key=value`` pairs, ending with ``ratio_floor=`` and ``ratio_bare=``
at the largest size run.

The smallest size's CPU per deployment is the figure the growth divides by, and it is the
noisiest: a few seconds of CPU, and how many passes a deployment takes depends on how its
events happen to coalesce in the queue. So the smallest size is converged ``--repeats`` more
times (default 2; controller phase only, each with a fresh controller and namespace) and its
figure is the median of all its converges.

Run: ``python -m bench.controller [--sizes 64,256,1024] [--replicas 2] [--idle-seconds 300]
[--edits 20] [--repeats 2] [--faults controller,apiserver,kueue,etcd|none] [--compare-with DIR]
[--profile DIR] [--controller-arg=--workers=16 ...]``
(``--profile`` runs the controller under cProfile and writes one ``controller-<size>.prof`` per
size into DIR; ``--controller-arg`` passes one more flag to the controller).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import re
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

from integration.cluster import Cluster, default_nodes, locate_cluster_binaries
from integration.controlplane import AUDITED_USER, ApiServer, free_port, load_yaml_documents

from bench import REPO_ROOT
from bench.cpu import CpuProbe, CpuUse, process_seconds
from gpustack_controller.kube import (
    ADMISSION_CHECKS,
    INSTANCE_TYPES,
    MODEL_DEPLOYMENTS,
    PODS,
    ApiError,
    Kube,
    Resource,
)
from gpustack_render.api.inputs import InstanceType
from gpustack_render.core import labels
from gpustack_render.core.settings import Settings
from gpustack_render.reconcile.observed import observe_workload
from gpustack_render.rendering.renderer import render
from gpustack_render.schema.decoding import decode_deployment, decode_model
from gpustack_render.schema.lookups import StaticLookups

NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
LOCAL_QUEUES = Resource("kueue.x-k8s.io", "v1beta2", "localqueues", "LocalQueue")
WORKLOADS = Resource("kueue.x-k8s.io", "v1beta2", "workloads", "Workload")
CONTROLLED = ("gpustack-nvidia-h100-ctl", "gpustack-fnv64-9b8a7c6d5e4f3a21")
BARE = ("gpustack-nvidia-h100-bare", "gpustack-fnv64-0b0a0e0b0a0e0000")
#: The honest floor's InstanceType and ClusterQueue (with :data:`FLOOR_CHECK`).
FLOOR = ("gpustack-nvidia-h100-floor", "gpustack-fnv64-0f0f0f0f0f0f0f0f")
#: The AdmissionCheck of the honest floor, answered by :class:`FloorChecker`.
FLOOR_CHECK = "bench-floor-check"
FLOOR_CONTROLLER = "bench.gpustack.ai/floor"
KUEUE_API_VERSION = "kueue.x-k8s.io/v1beta2"
#: The fault checker's rule for a role with no serving replica during its rollout.
UNSERVED = "role-unserved"
SYSTEM_NAMESPACE = "gpustack-system"
#: The controller's identity on its API server (bound to deploy/controller/rbac.yaml's roles):
#: the identity the API servers audit, so the fault checker reads every write the controller
#: made from its server's audit log.
CONTROLLER_USER = AUDITED_USER
CONTROLLER_RBAC = REPO_ROOT / "deploy" / "controller" / "rbac.yaml"
WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION"})
#: Creates in flight, for the bare loop and the ModelDeployments alike.
CREATE_CONCURRENCY = 16
CONVERGE_TIMEOUT = 3600.0
#: An edit whose replacement Pod is not seen by then counts as this long (and as missed).
EDIT_TIMEOUT = 60.0
BINARIES = (
    "etcd",
    "kube-apiserver",
    "kube-scheduler",
    "kube-controller-manager",
    "kubectl",
    "kueue",
    "kwok",
)


# ---- objects ---------------------------------------------------------------------------------


def _instance_type(name: str, entrance: str) -> dict[str, Any]:
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "InstanceType",
        "metadata": {"name": name},
        "spec": {"acceleratable": True, "unitResources": {"cpu": "8", "ram": "64Gi"}},
        "status": {
            "entrance": entrance,
            "detail": {"manufacturer": "nvidia", "memory": "80Gi"},
            "accelerator": {"capacity": 4096},
        },
    }


def _role(instance_type: str, replicas: int, edit: int = 0) -> dict[str, Any]:
    role: dict[str, Any] = {
        "name": "server",
        "replicas": replicas,
        "instanceType": instance_type,
        "resources": {"accelerator": 1},
    }
    if edit:
        role["env"] = [{"name": "BENCH_EDIT", "value": str(edit)}]
    return role


def _deployment(name: str, namespace: str, instance_type: str, replicas: int) -> dict[str, Any]:
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelDeployment",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "model": {"name": "Qwen/Qwen3-8B"},
            "engine": {"name": "vLLM", "image": "vllm/vllm-openai:v0.25.1"},
            "roles": [_role(instance_type, replicas)],
        },
    }


def _edited_deployment(name: str, namespace: str, replicas: int, edit: int) -> dict[str, Any]:
    body = _deployment(name, namespace, CONTROLLED[0], replicas)
    body["spec"]["roles"] = [_role(CONTROLLED[0], replicas, edit)]
    return body


async def _namespace(kube: Kube, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    await kube.create(
        NAMESPACES, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    return name


async def _in_flight(jobs: Iterable[Callable[[], Awaitable[Any]]], limit: int) -> None:
    gate = asyncio.Semaphore(limit)

    async def one(job: Callable[[], Awaitable[Any]]) -> None:
        async with gate:
            await job()

    await asyncio.gather(*(one(j) for j in jobs))


def _ready(pod: dict[str, Any]) -> bool:
    status = pod.get("status") or {}
    return status.get("phase") == "Running" and any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or ()
    )


# ---- watching one namespace ------------------------------------------------------------------


@dataclass
class Timeline:
    """When one phase's Pods were created (the last, seconds after the phase's start) and how
    long each took from created to Ready (sorted)."""

    last_created: float
    to_ready: list[float]

    def wait(self, q: float) -> float:
        if not self.to_ready:
            return float("nan")
        return self.to_ready[min(len(self.to_ready) - 1, max(0, round(q * len(self.to_ready)) - 1))]

    def line(self) -> str:
        return (
            f"last Pod created {self.last_created:.1f} s in; created -> Ready per Pod "
            f"p50 {self.wait(0.5):.1f} s, p99 {self.wait(0.99):.1f} s"
        )


@dataclass
class Seen:
    """When this process saw an object of a watched namespace appear, start deleting, and go
    (``time.perf_counter``)."""

    added: float
    labels: dict[str, str]
    #: The pod-spec-hash annotation of a Pod.
    spec_hash: str = ""
    deleting: float | None = None
    deleted: float | None = None
    #: When a Pod was first seen Running and Ready.
    ready: float | None = None
    uid: str = ""
    #: The uids of the Pods that own it (a Workload's owner references).
    owners: frozenset[str] = frozenset()
    #: A Workload's stages: first seen holding quota, with an admission check Ready, admitted.
    reserved: float | None = None
    checked: float | None = None
    admitted: float | None = None


class NamespaceWatch:
    """Every object of one resource in one namespace as a watch delivers it."""

    def __init__(self, kube: Kube, resource: Resource, namespace: str) -> None:
        self.kube = kube
        self.resource = resource
        self.namespace = namespace
        self.objects: dict[str, dict[str, Any]] = {}
        self.seen: dict[str, list[Seen]] = {}
        self.changed = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        items, rv = await self.kube.list(self.resource, self.namespace)
        for obj in items:
            self._event("ADDED", obj)
        self._task = asyncio.create_task(self._run(rv))

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    async def _run(self, rv: str) -> None:
        while True:
            try:
                async for event in self.kube.watch(
                    self.resource, namespace=self.namespace, resource_version=rv
                ):
                    new_rv = str((event.object.get("metadata") or {}).get("resourceVersion"))
                    rv = new_rv or rv
                    if event.type != "BOOKMARK":
                        self._event(event.type, event.object)
            except asyncio.CancelledError:
                raise
            except Exception:  # a broken stream: resume from the last version seen
                await asyncio.sleep(0.2)

    def _event(self, kind: str, obj: dict[str, Any]) -> None:
        now = time.perf_counter()
        meta = obj.get("metadata") or {}
        name = str(meta.get("name"))
        history = self.seen.setdefault(name, [])
        uid = meta.get("uid")
        old = self.objects.get(name)
        if old is None or (old.get("metadata") or {}).get("uid") != uid:
            spec_hash = str((meta.get("annotations") or {}).get(labels.POD_SPEC_HASH) or "")
            history.append(Seen(now, dict(meta.get("labels") or {}), spec_hash, uid=str(uid)))
        current = history[-1]
        if kind != "DELETED":
            current.owners |= frozenset(
                str(ref.get("uid"))
                for ref in meta.get("ownerReferences") or ()
                if ref.get("kind") == "Pod" and ref.get("uid")
            )
        if kind == "DELETED":
            self.objects.pop(name, None)
            current.deleted = now
        else:
            self.objects[name] = obj
        if meta.get("deletionTimestamp") and current.deleting is None:
            current.deleting = now
        if current.ready is None and kind != "DELETED" and _ready(obj):
            current.ready = now
        if kind != "DELETED" and obj.get("kind", self.resource.kind) == "Workload":
            _workload_stages(current, obj, now)
        self.changed.set()

    async def until(self, done: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.perf_counter() + timeout
        while not done():
            self.changed.clear()
            left = deadline - time.perf_counter()
            if left <= 0:
                raise RuntimeError(f"{what}: not reached after {timeout:.0f} s")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.changed.wait(), min(left, 1.0))

    def timeline(self, started: float) -> Timeline:
        """When the Pods first seen after ``started`` were created and turned Ready."""
        firsts = [h[0] for h in self.seen.values() if h and h[0].added >= started]
        created = sorted(s.added - started for s in firsts)
        waits = sorted(s.ready - s.added for s in firsts if s.ready is not None)
        return Timeline(created[-1] if created else float("nan"), waits)

    def all_ready(self, want: int) -> bool:
        live = [o for o in self.objects.values() if not o["metadata"].get("deletionTimestamp")]
        return len(live) >= want and all(_ready(p) for p in live)


def _workload_stages(seen: Seen, workload: dict[str, Any], now: float) -> None:
    """Note when a Workload is first seen holding quota, with a check Ready, admitted."""
    status = workload.get("status") or {}
    true = {c.get("type") for c in status.get("conditions") or () if c.get("status") == "True"}
    if seen.reserved is None and "QuotaReserved" in true:
        seen.reserved = now
    if seen.admitted is None and "Admitted" in true:
        seen.admitted = now
    checks = status.get("admissionChecks") or ()
    if seen.checked is None and checks and all(c.get("state") == "Ready" for c in checks):
        seen.checked = now


#: The stages of one Pod's way to Ready, in order, as :func:`stages` measures them.
STAGES: tuple[str, ...] = (
    "Pod -> Workload",
    "-> quota reserved",
    "-> checks Ready",
    "-> admitted",
    "-> Pod Ready",
)


def stages(
    pods: NamespaceWatch, workloads: NamespaceWatch, started: float
) -> dict[str, list[float]]:
    """Per stage (:data:`STAGES`), the seconds each Pod created after ``started`` spent in it
    (sorted), its Workload found by owner reference: where a Pod's wait from created to Ready
    went (Kueue creates the Workload and reserves quota, the admission check answers, Kueue
    admits and ungates, the scheduler binds and KWOK runs it)."""
    by_uid = {s.uid: s for h in pods.seen.values() for s in h if s.added >= started}
    out: dict[str, list[float]] = {name: [] for name in STAGES}
    for history in workloads.seen.values():
        for wl in history:
            pod = next((by_uid[u] for u in sorted(wl.owners) if u in by_uid), None)
            if pod is None:
                continue
            points = (pod.added, wl.added, wl.reserved, wl.checked, wl.admitted, pod.ready)
            for name, (a, b) in zip(STAGES, itertools.pairwise(points), strict=True):
                if a is not None and b is not None:
                    out[name].append(max(0.0, b - a))
    return {name: sorted(values) for name, values in out.items()}


def stages_line(measured: dict[str, list[float]]) -> str:
    """``stages p50 / p99 (s): Pod -> Workload 0.4 / 1.0, ...``"""

    def pick(values: list[float], q: float) -> float:
        return values[min(len(values) - 1, max(0, round(q * len(values)) - 1))]

    return "stages p50 / p99 (s): " + ", ".join(
        f"{name} {pick(v, 0.5):.1f} / {pick(v, 0.99):.1f}" for name, v in measured.items() if v
    )


class FloorChecker(NamespaceWatch):
    """The smallest possible answer to an AdmissionCheck: a watch of one namespace's Workloads
    that marks :data:`FLOOR_CHECK` ``Ready`` (one server-side apply of the Workload's one
    ``status.admissionChecks[]`` entry) as soon as every group of the Workload's joint set holds
    a quota reservation. A joint set is the groups of one ordinal of one deployment (the
    project's joint check admits a replica's roles together, and a single-role replica on its
    own: docs/contract/controller.md §9); ``sets`` maps each group name (the Workload's name) to
    its set. No rendering, no status, no events, no read beyond the watch."""

    def __init__(self, kube: Kube, namespace: str, sets: dict[str, tuple[str, str]]) -> None:
        super().__init__(kube, WORKLOADS, namespace)
        self.sets = sets
        self.members: dict[tuple[str, str], set[str]] = {}
        for group, key in sets.items():
            self.members.setdefault(key, set()).add(group)
        self.reserved: set[str] = set()
        self.sent: set[str] = set()
        self.gate = asyncio.Semaphore(CREATE_CONCURRENCY)
        self.tasks: set[asyncio.Task[None]] = set()
        self.applies = 0

    def _event(self, kind: str, obj: dict[str, Any]) -> None:
        super()._event(kind, obj)
        name = str((obj.get("metadata") or {}).get("name"))
        if kind == "DELETED":
            self.reserved.discard(name)
            return
        workload = observe_workload(obj)
        entry = workload.checks.get(FLOOR_CHECK)
        if not workload.quota_reserved or entry is None or workload.deleting:
            self.reserved.discard(name)
            return
        self.reserved.add(name)
        key = self.sets.get(name, ("", name))
        members = self.members.get(key, {name})
        if not members <= self.reserved:
            return
        for member in sorted(members - self.sent):
            self.sent.add(member)
            task = asyncio.create_task(self._ready(member))
            self.tasks.add(task)
            task.add_done_callback(self.tasks.discard)

    async def _ready(self, name: str) -> None:
        body = {
            "apiVersion": KUEUE_API_VERSION,
            "kind": "Workload",
            "metadata": {"name": name, "namespace": self.namespace},
            "status": {
                "admissionChecks": [
                    {
                        "name": FLOOR_CHECK,
                        "state": "Ready",
                        "message": "",
                        "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                    }
                ]
            },
        }
        async with self.gate:
            for _ in range(5):
                try:
                    await self.kube.apply(
                        WORKLOADS,
                        body,
                        field_manager=FLOOR_CONTROLLER,
                        namespace=self.namespace,
                        subresource="status",
                    )
                    self.applies += 1
                    return
                except ApiError as exc:
                    if exc.not_found:
                        return
                    await asyncio.sleep(0.5)
            self.sent.discard(name)  # let the next event of the Workload try again

    async def stop(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        await super().stop()


async def ensure_floor_check(kube: Kube) -> None:
    """The floor's AdmissionCheck, reported ``Active`` (Kueue admits nothing through an
    inactive one)."""
    body = {
        "apiVersion": KUEUE_API_VERSION,
        "kind": "AdmissionCheck",
        "metadata": {"name": FLOOR_CHECK},
        "spec": {"controllerName": FLOOR_CONTROLLER},
    }
    await kube.apply(ADMISSION_CHECKS, body, field_manager=FLOOR_CONTROLLER)
    status = {
        **body,
        "status": {
            "conditions": [
                {
                    "type": "Active",
                    "status": "True",
                    "reason": "Ready",
                    "message": "the bench's floor checker is running",
                    "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                }
            ]
        },
    }
    await kube.apply(ADMISSION_CHECKS, status, field_manager=FLOOR_CONTROLLER, subresource="status")


async def _drain(kube: Kube, ns: str) -> None:
    """Delete the namespace and wait until it is gone (its Pods' quota released).

    Kubernetes 1.35 deletes a namespace's Pods before anything else and Kueue keeps its
    finalizer on a deleted Pod while the group's Workload exists, so the Workloads are deleted
    here explicitly (docs/decisions.md, "Namespace deletion and plain Pod groups"), as one
    collection, again every 10 s while the namespace stands. A read that times out on a loaded
    API server is tried again."""
    await kube.delete(NAMESPACES, ns)
    deadline = time.perf_counter() + 1800
    last_sweep = 0.0
    while time.perf_counter() < deadline:
        try:
            if time.perf_counter() - last_sweep > 10:
                await kube.request("DELETE", WORKLOADS.path(ns))
                last_sweep = time.perf_counter()
            if await kube.get(NAMESPACES, ns) is None:
                return
        except ApiError as exc:
            if exc.status not in (0, 404, 429, 500, 503, 504):
                raise
        await asyncio.sleep(2)
    raise RuntimeError(f"namespace {ns} still exists after 1800 s")


# ---- the API server's counters ---------------------------------------------------------------

_SAMPLE = re.compile(r"^(apiserver_request_total|apiserver_selfrequest_total)\{(.*)\} (\S+)$")
_PASSES = re.compile(
    r'^gpustack_controller_reconcile_duration_seconds_(sum|count)\{controller="(\w+)",.*\} (\S+)$'
)


def _matches(pattern: re.Pattern[str], metrics_text: str) -> Iterator[tuple[str, ...]]:
    """The groups of every line of a ``/metrics`` text that ``pattern`` matches."""
    for line in metrics_text.splitlines():
        match = pattern.match(line)
        if match is not None:
            yield match.groups()


_LATENCY = re.compile(r"^apiserver_request_duration_seconds_(sum|count)\{(.*)\} (\S+)$")


def request_seconds(metrics_text: str) -> dict[str, tuple[int, float]]:
    """Verb → (requests, seconds) the API server took to answer (watches left out), from its
    ``apiserver_request_duration_seconds``."""
    sums: dict[str, float] = {}
    counts: dict[str, float] = {}
    for part, body, value in _matches(_LATENCY, metrics_text):
        verb = dict(_LABEL.findall(body)).get("verb", "")
        if verb in ("WATCH", "CONNECT", ""):
            continue
        into = sums if part == "sum" else counts
        into[verb] = into.get(verb, 0.0) + float(value)
    return {v: (int(counts.get(v, 0)), sums.get(v, 0.0)) for v in sorted(counts)}


def pass_times(metrics_text: str) -> dict[str, tuple[int, float]]:
    """Queue name → (passes, seconds) from the controller's own ``/metrics``."""
    sums: dict[str, float] = {}
    counts: dict[str, float] = {}
    for part, queue, value in _matches(_PASSES, metrics_text):
        into = sums if part == "sum" else counts
        into[queue] = into.get(queue, 0.0) + float(value)
    return {q: (int(counts.get(q, 0)), sums.get(q, 0.0)) for q in sorted(set(sums) | set(counts))}


_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def _resource(lab: dict[str, str]) -> str:
    """``plural[.group]`` from an API server metric's labels."""
    return (
        f"{lab.get('resource', '')}.{lab['group']}" if lab.get("group") else lab.get("resource", "")
    )


def request_counts(metrics_text: str) -> Counter[tuple[str, str]]:
    """(verb, resource) → requests, from one ``/metrics`` text: ``apiserver_request_total``
    minus ``apiserver_selfrequest_total``. The resource is ``plural[.group][/subresource]``."""
    counts: Counter[tuple[str, str]] = Counter()
    for name, body, value in _matches(_SAMPLE, metrics_text):
        lab = dict(_LABEL.findall(body))
        resource = _resource(lab)
        if lab.get("subresource"):
            resource += f"/{lab['subresource']}"
        sign = -1 if name == "apiserver_selfrequest_total" else 1
        counts[(lab.get("verb", ""), resource)] += sign * int(float(value))
    return counts


_WATCH_EVENTS = re.compile(r"^apiserver_watch_events_(total|sizes_sum)\{(.*)\} (\S+)$")


def controller_watches() -> frozenset[str]:
    """The resources (``plural[.group]``) deploy/controller/rbac.yaml lets the controller watch."""
    watched = set()
    for doc in load_yaml_documents(CONTROLLER_RBAC):
        for rule in doc.get("rules") or ():
            if "watch" in rule.get("verbs", ()):
                for group in rule.get("apiGroups") or ("",):
                    watched |= {f"{r}.{group}" if group else r for r in rule["resources"]}
    return frozenset(watched)


def watch_events(metrics_text: str, only: frozenset[str]) -> Counter[tuple[str, str]]:
    """(``events`` or ``bytes``, resource) → what the API server sent to its watchers of the
    resources ``only`` names, from its ``apiserver_watch_events_total`` and
    ``apiserver_watch_events_sizes`` (labelled by group, version and resource, not by client).
    On the controller's own API server the watchers are the controller's informers and the
    server's own loopback informers; ``only`` leaves out what the controller may not watch
    (EndpointSlices, IPAddresses, ...), but the server's own Service informer is counted with
    the controller's."""
    counts: Counter[tuple[str, str]] = Counter()
    for part, body, value in _matches(_WATCH_EVENTS, metrics_text):
        resource = _resource(dict(_LABEL.findall(body)))
        if resource in only:
            counts[("events" if part == "total" else "bytes", resource)] += int(float(value))
    return counts


def diff(
    after: Counter[tuple[str, str]], before: Counter[tuple[str, str]]
) -> dict[tuple[str, str], int]:
    keys = set(after) | set(before)
    out = {k: after[k] - before[k] for k in keys}
    return {k: v for k, v in out.items() if v}


def writes(counts: dict[tuple[str, str], int]) -> int:
    return sum(v for (verb, _), v in counts.items() if verb in WRITE_VERBS)


def format_passes(passes: dict[str, tuple[int, float]]) -> str:
    return ", ".join(
        f"{queue} {n} (mean {seconds * 1000 / max(n, 1):.0f} ms)"
        for queue, (n, seconds) in passes.items()
    )


def format_counts(counts: dict[tuple[str, str], int]) -> str:
    if not counts:
        return "none"
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return ", ".join(f"{verb} {resource} {n}" for (verb, resource), n in ordered)


# ---- the controller process ------------------------------------------------------------------


class ControllerProcess:
    """``python -m gpustack_controller`` against its own API server."""

    def __init__(
        self,
        kubeconfig: Path,
        log: Path,
        profile: Path | None,
        extra: tuple[str, ...] = (),
        source: Path | None = None,
    ) -> None:
        self.port = free_port()
        self.log = log
        argv = [sys.executable]
        if profile is not None:
            argv += ["-m", "cProfile", "-o", str(profile)]
        argv += [
            "-m",
            "gpustack_controller",
            f"--kubeconfig={kubeconfig}",
            f"--namespace={SYSTEM_NAMESPACE}",
            "--no-leader-elect",
            f"--health-port={self.port}",
            "--health-host=127.0.0.1",
            "--log-level=warning",
            *extra,
        ]
        self.argv = argv
        #: Another checkout's controller (``--compare-with``): run from there, importing its code.
        self.cwd = str(source) if source is not None else None
        self.env = {**os.environ, "PYTHONPATH": str(source)} if source is not None else None
        with log.open("ab") as out:
            self.popen = self._spawn(out)

    def _spawn(self, out: Any) -> subprocess.Popen[bytes]:
        return subprocess.Popen(
            self.argv, stdout=out, stderr=subprocess.STDOUT, cwd=self.cwd, env=self.env
        )

    def kill_and_restart(self) -> None:
        """SIGKILL the controller (no shutdown of any kind) and start it again, same flags."""
        self.popen.kill()
        self.popen.wait()
        with self.log.open("ab") as out:
            self.popen = self._spawn(out)

    def _health(self) -> str:
        try:
            url = f"http://127.0.0.1:{self.port}/healthz"
            with urllib.request.urlopen(url, timeout=2) as resp:
                return str(resp.read().decode())
        except OSError:
            return ""

    async def started(self, timeout: float = 300) -> None:
        """Until the informers are synced and the workers run (``/healthz`` says ``ok``)."""
        deadline = time.perf_counter() + timeout
        while await asyncio.to_thread(self._health) != "ok":
            if self.popen.poll() is not None:
                raise RuntimeError(f"the controller exited; see {self.log}")
            if time.perf_counter() > deadline:
                raise RuntimeError(f"the controller did not start in {timeout:.0f} s")
            await asyncio.sleep(0.2)

    def cpu_seconds(self) -> float:
        seconds = process_seconds(self.popen.pid)
        if seconds is None:
            raise RuntimeError(f"the controller exited; see {self.log}")
        return seconds

    def metrics(self) -> str:
        url = f"http://127.0.0.1:{self.port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as resp:
            return str(resp.read().decode())

    def peak_rss_mib(self) -> float:
        for line in Path(f"/proc/{self.popen.pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.send_signal(signal.SIGTERM)
            try:
                self.popen.wait(60)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()


# ---- one size --------------------------------------------------------------------------------


@dataclass
class Figures:
    deployments: int
    pods: int
    bare: Phase | None = None
    #: The honest floor: the bare loop through an AdmissionCheck answered by the floor checker.
    floor: Phase | None = None
    controlled: Phase | None = None
    bare_s: float = 0.0
    floor_s: float = 0.0
    controller_s: float = 0.0
    cpu_s: float = 0.0
    peak_rss_mib: float = 0.0
    converge_requests: dict[tuple[str, str], int] = field(default_factory=dict)
    #: (``events`` or ``bytes``, resource) → what the controller's informers were sent while
    #: converging.
    converge_watch: dict[tuple[str, str], int] = field(default_factory=dict)
    #: Queue name → (passes, seconds) while converging, from the controller's own metrics.
    passes: dict[str, tuple[int, float]] = field(default_factory=dict)
    #: Verb → (requests, seconds) its API server took for the controller while converging.
    latency: dict[str, tuple[int, float]] = field(default_factory=dict)
    idle_s: float = 0.0
    #: The controller's CPU seconds over the idle window (its background rate, nothing changing).
    idle_cpu_s: float = 0.0
    #: Controller CPU seconds of the extra converges at this size (``--repeats``), each with a
    #: fresh controller; the per-deployment cost is their median with the first.
    cpu_repeats: list[float] = field(default_factory=list)
    idle_requests: dict[tuple[str, str], int] = field(default_factory=dict)
    #: Per edit: (total, controller deletes, Kueue and KWOK retire, controller creates) seconds.
    edits: list[tuple[float, float, float, float]] = field(default_factory=list)
    #: Edits whose replacement Pod was not seen within EDIT_TIMEOUT (counted at that time).
    edits_missed: int = 0
    #: The fault rounds (bench.faults), in order.
    faults: list[Any] = field(default_factory=list)
    #: The same converge by the controller of ``--compare-with`` (before a change).
    before: Figures | None = None

    @property
    def fault_violations(self) -> int:
        """Violations of the fault rounds, the rollout's unserved roles left out (below)."""
        return sum(n for r in self.faults for k, n in r.rule_counts().items() if k != UNSERVED)

    @property
    def unserved(self) -> int:
        """Roles left with no serving replica during a round's rollout (the cadence gate waits
        for the replacement's admission, not its readiness: docs/decisions.md)."""
        return sum(r.rule_counts()[UNSERVED] for r in self.faults)

    @property
    def ratio(self) -> float:
        return self.controller_s / self.bare_s

    @property
    def ratio_floor(self) -> float:
        """The converge over the honest floor (``nan`` when it was not run)."""
        return self.controller_s / self.floor_s if self.floor_s else float("nan")

    @property
    def cpu_ms_per_deployment(self) -> float:
        """The median over this size's converges (one unless it was repeated)."""
        return statistics.median([self.cpu_s, *self.cpu_repeats]) * 1000 / self.deployments

    @property
    def pass_count(self) -> int:
        """Passes of every queue while converging."""
        return sum(n for n, _ in self.passes.values())

    @property
    def cpu_ms_per_pass(self) -> float:
        passes = self.pass_count
        return self.cpu_s * 1000 / passes if passes else float("nan")

    @property
    def idle_cpu_ms_per_s(self) -> float:
        return self.idle_cpu_s * 1000 / max(self.idle_s, 1e-9)

    def watched(self, part: str) -> int:
        """The ``events`` or ``bytes`` the controller's informers were sent while converging."""
        return sum(v for (p, _), v in self.converge_watch.items() if p == part)

    def edit_percentile(self, q: float, part: int = 0) -> float:
        values = sorted(e[part] for e in self.edits if e[part] == e[part])  # NaN: missed
        if not values:
            return float("nan")
        return values[min(len(values) - 1, max(0, round(q * len(values)) - 1))]


@dataclass
class Phase:
    """One converge: its time, its Pods' timeline and Kueue's requests meanwhile."""

    seconds: float
    timeline: Timeline
    kueue: dict[tuple[str, str], int]
    #: The floor checker's writes (the honest floor only).
    checker_writes: int = 0
    #: Where the machine's CPU went while it ran (bench/cpu.py).
    cpu: CpuUse | None = None
    #: Where each Pod's wait went, stage by stage (:func:`stages`).
    stages: dict[str, list[float]] = field(default_factory=dict)

    def kueue_line(self, pods: int) -> str:
        total = sum(self.kueue.values())
        per_pod = ", ".join(
            f"{verb} {resource} {n / pods:.1f}"
            for (verb, resource), n in sorted(self.kueue.items(), key=lambda kv: -kv[1])
            if n / pods >= 0.05
        )
        return (
            f"Kueue made {total} requests ({total / pods:.1f} per Pod, "
            f"{total / self.seconds:.0f}/s against its client's 50/s); per Pod: {per_pod}"
        )


async def _kueue_counts(server: ApiServer) -> Counter[tuple[str, str]]:
    return request_counts(await asyncio.to_thread(server.metrics))


async def _bare(
    kube: Kube,
    kueue: ApiServer,
    deployments: int,
    replicas: int,
    *,
    floor: bool = False,
    probe: CpuProbe | None = None,
) -> Phase:
    """The bare loop; with ``floor``, on the ClusterQueue with :data:`FLOOR_CHECK`, answered by
    a :class:`FloorChecker` (the honest floor)."""
    queue = FLOOR if floor else BARE
    ns = await _namespace(kube, "floor" if floor else "bare")
    await kube.create(
        LOCAL_QUEUES,
        {
            "apiVersion": LOCAL_QUEUES.api_version,
            "kind": "LocalQueue",
            "metadata": {"name": queue[1], "namespace": ns},
            "spec": {"clusterQueue": queue[1]},
        },
        ns,
    )
    it, _ = decode_model(InstanceType, _instance_type(*queue))
    assert it is not None
    pods = []
    for i in range(deployments):
        body = _deployment(f"bench-{i}", ns, queue[0], replicas)
        body["metadata"]["uid"] = str(uuid.uuid4())
        md, errs = decode_deployment(body)
        assert md is not None, errs
        pods += render(md, lookups=StaticLookups.of([it]), settings=Settings()).pods()
    sets: dict[str, tuple[str, str]] = {}
    for pod in pods:
        pod["metadata"].pop("ownerReferences", None)  # no ModelDeployment to own them
        lab = pod["metadata"].get("labels") or {}
        sets[str(lab.get(labels.POD_GROUP_NAME))] = (
            str(lab.get(labels.INSTANCE)),
            str(lab.get(labels.POD_ORDINAL)),
        )
    watch = NamespaceWatch(kube, PODS, ns)
    checker = FloorChecker(kube, ns, sets) if floor else None
    await watch.start()
    if checker is not None:
        await checker.start()
    try:
        before = await _kueue_counts(kueue)
        started = time.perf_counter()
        cpu_before = probe.snapshot(started) if probe is not None else None
        await _in_flight((partial(kube.create, PODS, p, ns) for p in pods), CREATE_CONCURRENCY)
        await watch.until(lambda: watch.all_ready(len(pods)), CONVERGE_TIMEOUT, "bare loop")
        took = time.perf_counter() - started
        phase = Phase(took, watch.timeline(started), diff(await _kueue_counts(kueue), before))
        if probe is not None and cpu_before is not None:
            phase.cpu = probe.since(cpu_before, probe.snapshot(time.perf_counter()))
        if checker is not None:
            phase.stages = stages(watch, checker, started)
        if checker is not None:
            phase.checker_writes = checker.applies
    finally:
        await watch.stop()
        if checker is not None:
            await checker.stop()
    await _drain(kube, ns)
    return phase


async def _quiet(server: ApiServer, *, quiet_for: float = 10.0, timeout: float = 300.0) -> None:
    """Until the controller has made no write for ``quiet_for`` seconds."""
    deadline = time.perf_counter() + timeout
    last = writes(dict(request_counts(await asyncio.to_thread(server.metrics))))
    since = time.perf_counter()
    while time.perf_counter() - since < quiet_for:
        if time.perf_counter() > deadline:
            raise RuntimeError(f"the controller kept writing for {timeout:.0f} s after converging")
        await asyncio.sleep(1.0)
        now = writes(dict(request_counts(await asyncio.to_thread(server.metrics))))
        if now != last:
            last, since = now, time.perf_counter()


async def _edits(
    kube: Kube,
    ns: str,
    pods: NamespaceWatch,
    workloads: NamespaceWatch,
    deployments: int,
    replicas: int,
    count: int,
    figures: Figures,
) -> None:
    """``count`` edits, each behind a queue full of every deployment (an InstanceType touch)."""
    step = max(1, deployments // max(1, count))
    for n in range(count):
        target = f"bench-{(n * step) % deployments}"
        old = {
            name
            for name, obj in pods.objects.items()
            if (obj["metadata"].get("labels") or {}).get(labels.INSTANCE) == target
        }
        groups = {
            (pods.objects[name]["metadata"].get("labels") or {}).get(labels.POD_GROUP_NAME)
            for name in old
        }
        old_hashes = {pods.seen[name][-1].spec_hash for name in old}
        await kube.merge_patch(
            INSTANCE_TYPES,
            CONTROLLED[0],
            {"metadata": {"annotations": {"bench.gpustack.ai/touch": f"{n}-{uuid.uuid4().hex}"}}},
        )
        edited = time.perf_counter()
        await kube.merge_patch(
            MODEL_DEPLOYMENTS,
            target,
            {"spec": {"roles": [_role(CONTROLLED[0], replicas, edit=n + 1)]}},
            ns,
        )

        def replacement(
            edited: float = edited, target: str = target, old_hashes: set[Any] = old_hashes
        ) -> float | None:
            for history in pods.seen.values():
                for seen in history:
                    if (
                        seen.added > edited
                        and seen.labels.get(labels.INSTANCE) == target
                        and seen.spec_hash not in old_hashes
                    ):
                        return seen.added
            return None

        try:
            await pods.until(lambda: replacement() is not None, EDIT_TIMEOUT, f"edit of {target}")
        except RuntimeError:
            figures.edits_missed += 1
            figures.edits.append((EDIT_TIMEOUT, float("nan"), float("nan"), float("nan")))
            continue
        created = replacement()
        assert created is not None
        deleting = [
            s.deleting for name in old for s in pods.seen[name][-1:] if s.deleting is not None
        ]
        gone = [
            s.deleted
            for name in (*old, *(g for g in groups if g))
            for watch in (pods, workloads)
            for s in watch.seen.get(name, [])[-1:]
            if s.deleted is not None and s.deleted <= created
        ]
        reaction = (min(deleting) if deleting else created) - edited
        freed = (max(gone) if gone else created) - edited
        figures.edits.append(
            (created - edited, reaction, freed - reaction, created - edited - freed)
        )
        await asyncio.sleep(1.0)


async def _controlled(
    kube: Kube,
    server: ApiServer,
    kueue: ApiServer,
    kubeconfig: Path,
    figures: Figures,
    *,
    replicas: int,
    idle_seconds: float,
    edits: int,
    log_dir: Path,
    profile: Path | None,
    controller_args: tuple[str, ...] = (),
    cluster: Cluster | None = None,
    faults: tuple[str, ...] = (),
    source: Path | None = None,
    probe: CpuProbe | None = None,
) -> None:
    deployments = figures.deployments
    ns = await _namespace(kube, "ctl")
    controller = ControllerProcess(
        kubeconfig,
        log_dir / f"controller-{deployments}{'-before' if source else ''}.log",
        profile,
        controller_args,
        source,
    )
    pods = NamespaceWatch(kube, PODS, ns)
    workloads = NamespaceWatch(kube, WORKLOADS, ns)
    try:
        await controller.started()
        await pods.start()
        await workloads.start()
        text = await asyncio.to_thread(server.metrics)
        before, latency_before = request_counts(text), request_seconds(text)
        watched = controller_watches()
        watch_before = watch_events(text, watched)
        kueue_before = await _kueue_counts(kueue)
        cpu_before = controller.cpu_seconds()
        started = time.perf_counter()
        own = {"controller": controller.popen.pid}
        machine_before = probe.snapshot(started, own) if probe is not None else None
        await _in_flight(
            (
                partial(
                    kube.create,
                    MODEL_DEPLOYMENTS,
                    _deployment(f"bench-{i}", ns, CONTROLLED[0], replicas),
                    ns,
                )
                for i in range(deployments)
            ),
            CREATE_CONCURRENCY,
        )
        await pods.until(
            lambda: pods.all_ready(deployments * replicas), CONVERGE_TIMEOUT, "controller"
        )
        figures.controller_s = time.perf_counter() - started
        figures.controlled = Phase(
            figures.controller_s,
            pods.timeline(started),
            diff(await _kueue_counts(kueue), kueue_before),
        )
        if probe is not None and machine_before is not None:
            figures.controlled.cpu = probe.since(
                machine_before, probe.snapshot(time.perf_counter(), own)
            )
        figures.controlled.stages = stages(pods, workloads, started)
        figures.passes = await asyncio.to_thread(lambda: pass_times(controller.metrics()))
        latency_after = request_seconds(await asyncio.to_thread(server.metrics))
        figures.latency = {
            verb: (
                n - latency_before.get(verb, (0, 0.0))[0],
                t - latency_before.get(verb, (0, 0.0))[1],
            )
            for verb, (n, t) in latency_after.items()
        }
        await _quiet(server)
        figures.cpu_s = controller.cpu_seconds() - cpu_before
        text = await asyncio.to_thread(server.metrics)
        after = request_counts(text)
        figures.converge_requests = diff(after, before)
        figures.converge_watch = diff(watch_events(text, watched), watch_before)
        idle_started, idle_cpu = time.perf_counter(), controller.cpu_seconds()
        await asyncio.sleep(idle_seconds)
        figures.idle_s = time.perf_counter() - idle_started
        figures.idle_cpu_s = controller.cpu_seconds() - idle_cpu
        figures.idle_requests = diff(request_counts(await asyncio.to_thread(server.metrics)), after)
        await _edits(kube, ns, pods, workloads, deployments, replicas, edits, figures)
        figures.peak_rss_mib = controller.peak_rss_mib()
        live = [f"bench-{i}" for i in range(deployments)]
        if faults and cluster is not None:
            from bench.faults import FaultContext, fault_rounds

            ctx = FaultContext(
                kube=kube,
                namespace=ns,
                pods=pods,
                workloads=workloads,
                controller=controller,
                server=server,
                cluster=cluster,
                audit_log=cluster.dir / f"audit-{server.name}.log",
                replicas=replicas,
                deployment=_edited_deployment,
                role=lambda replicas, edit: _role(CONTROLLED[0], replicas, edit),
                live=list(live),
                next_index=deployments,
            )
            figures.faults = await fault_rounds(ctx, faults)
            live = ctx.live
        await _in_flight(
            (partial(kube.delete, MODEL_DEPLOYMENTS, name, ns) for name in live),
            CREATE_CONCURRENCY,
        )
        await _drain(kube, ns)
    finally:
        await pods.stop()
        await workloads.stop()
        controller.stop()


async def _bind_controller(kube: Kube) -> None:
    """deploy/controller/rbac.yaml's roles, bound to :data:`CONTROLLER_USER`."""
    for doc in load_yaml_documents(CONTROLLER_RBAC):
        kind = doc["kind"]
        if kind in ("ClusterRoleBinding", "RoleBinding"):
            doc["subjects"] = [
                {"kind": "User", "name": CONTROLLER_USER, "apiGroup": "rbac.authorization.k8s.io"}
            ]
        plural = {
            "ClusterRole": "clusterroles",
            "ClusterRoleBinding": "clusterrolebindings",
            "Role": "roles",
            "RoleBinding": "rolebindings",
        }[kind]
        resource = Resource(
            "rbac.authorization.k8s.io", "v1", plural, kind, namespaced=kind.startswith("Role")
        )
        await kube.create(resource, doc, doc["metadata"].get("namespace"))


async def prepare(kube: Kube, cluster: Cluster, gpus: int) -> None:
    """The InstanceTypes and ClusterQueues of the three phases (quota for ``gpus`` GPUs each),
    the floor's AdmissionCheck, the controller's namespace and its RBAC."""
    await ensure_floor_check(kube)
    for name, entrance in (CONTROLLED, BARE, FLOOR):
        body = _instance_type(name, entrance)
        status = body.pop("status")
        await kube.create(INSTANCE_TYPES, body)
        await kube.merge_patch(INSTANCE_TYPES, name, {"status": status}, subresource="status")
    quota: dict[str, str | int] = {
        "nvidia.com/gpu": gpus,
        "cpu": gpus * 8,
        "memory": f"{gpus * 64}Gi",
    }
    cluster.ensure_cluster_queue(CONTROLLED[1], quota=quota)
    cluster.ensure_cluster_queue(BARE[1], quota=quota, admission_check=None)
    cluster.ensure_cluster_queue(FLOOR[1], quota=quota, admission_check=FLOOR_CHECK)
    await kube.create(
        NAMESPACES,
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NAMESPACE}},
    )
    await _bind_controller(kube)


async def run(
    cluster: Cluster,
    server: ApiServer,
    kueue: ApiServer,
    sizes: list[int],
    *,
    replicas: int,
    idle_seconds: float,
    edits: int,
    log_dir: Path,
    profile_dir: Path | None,
    controller_args: tuple[str, ...] = (),
    repeats: int = 0,
    faults: tuple[str, ...] = (),
    compare_with: Path | None = None,
) -> list[Figures]:
    kube = await Kube.connect(kubeconfig=str(cluster.kubeconfig))
    try:
        await prepare(kube, cluster, max(sizes) * replicas)
        kubeconfig = server.kubeconfig(CONTROLLER_USER)
        await _bare(kube, kueue, 2, 1)  # warm the API server's, Kueue's and the client's paths
        await _bare(kube, kueue, 2, 1, floor=True)
        probe = CpuProbe(cluster.pids)
        results = []
        for size in sizes:
            figures = Figures(deployments=size, pods=size * replicas)
            figures.bare = await _bare(kube, kueue, size, replicas, probe=probe)
            figures.bare_s = figures.bare.seconds
            print(f"[{size}] bare loop {figures.bare_s:.1f} s", flush=True)
            figures.floor = await _bare(kube, kueue, size, replicas, floor=True, probe=probe)
            figures.floor_s = figures.floor.seconds
            print(f"[{size}] honest floor {figures.floor_s:.1f} s", flush=True)
            if compare_with is not None:
                figures.before = Figures(deployments=size, pods=size * replicas)
                await _controlled(
                    kube,
                    server,
                    kueue,
                    kubeconfig,
                    figures.before,
                    replicas=replicas,
                    idle_seconds=0.0,
                    edits=0,
                    log_dir=log_dir,
                    profile=None,
                    controller_args=controller_args,
                    source=compare_with,
                    probe=probe,
                )
                print(f"[{size}] before: {figures.before.controller_s:.1f} s", flush=True)
            profile = None if profile_dir is None else profile_dir / f"controller-{size}.prof"
            await _controlled(
                kube,
                server,
                kueue,
                kubeconfig,
                figures,
                replicas=replicas,
                idle_seconds=idle_seconds,
                edits=edits,
                log_dir=log_dir,
                profile=profile,
                controller_args=controller_args,
                cluster=cluster,
                faults=faults,
                probe=probe,
            )
            for n in range(repeats if size == sizes[0] else 0):
                again = Figures(deployments=size, pods=size * replicas)
                await _controlled(
                    kube,
                    server,
                    kueue,
                    kubeconfig,
                    again,
                    replicas=replicas,
                    idle_seconds=0.0,
                    edits=0,
                    log_dir=log_dir,
                    profile=None,
                    controller_args=controller_args,
                )
                figures.cpu_repeats.append(again.cpu_s)
                print(
                    f"[{size}] converge again ({n + 2} of {repeats + 1}): "
                    f"{again.controller_s:.1f} s, controller CPU {again.cpu_s:.1f} s, "
                    f"{again.pass_count} passes",
                    flush=True,
                )
            report(figures)
            report_faults(figures)
            results.append(figures)
        return results
    finally:
        await kube.close()


# ---- output ----------------------------------------------------------------------------------


def cpu_beyond_floor(controlled: CpuUse, floor: CpuUse) -> str:
    """What the converge used beyond the honest floor: core-seconds in all, and by process
    (largest first; the controller and its own API server are the controller's cost)."""
    names = set(controlled.by_process) | set(floor.by_process)
    extra = {n: controlled.by_process.get(n, 0.0) - floor.by_process.get(n, 0.0) for n in names}
    parts = ", ".join(
        f"{n} {s:+.1f}"
        for n, s in sorted(extra.items(), key=lambda kv: -abs(kv[1]))
        if abs(s) >= 0.5
    )
    return (
        f"beyond the honest floor: {controlled.busy - floor.busy:+.0f} core-s of machine CPU "
        f"({controlled.busy:.0f} against {floor.busy:.0f}); by process (s): {parts}"
    )


def _phase_lines(
    phase: Phase, pods: int, floor: Phase | None = None, *, kueue: bool = True
) -> None:
    """A phase's timeline, Kueue's requests, its Pods' stages and where its CPU went (beyond
    the honest floor's too, for a converge)."""
    print(f"     {phase.timeline.line()}")
    if kueue:
        print(f"     {phase.kueue_line(pods)}")
    if phase.stages:
        print(f"     {stages_line(phase.stages)}")
    if phase.cpu is not None:
        print(f"     {phase.cpu.line()}")
        if floor is not None and floor.cpu is not None:
            print(f"     {cpu_beyond_floor(phase.cpu, floor.cpu)}")


def report(f: Figures) -> None:
    n = f.deployments
    print(f"-- {n} deployments x {f.pods // n} replicas ({f.pods} Pods)", flush=True)
    print(
        f"   bare loop:  {f.bare_s:.1f} s to create the {f.pods} Pods and see them admitted "
        "and Ready"
    )
    if f.bare is not None:
        _phase_lines(f.bare, f.pods)
    if f.floor is not None:
        print(
            f"   honest floor: {f.floor_s:.1f} s, the same loop through an AdmissionCheck "
            f"answered by the smallest checker ({f.floor.checker_writes} check writes)"
        )
        _phase_lines(f.floor, f.pods)
    print(
        f"   controller: {f.controller_s:.1f} s from the first create to every Pod admitted and "
        f"Ready = {f.ratio_floor:.2f}x the honest floor (target <= 1.2), "
        f"{f.ratio:.2f}x the bare loop"
    )
    if f.controlled is not None:
        _phase_lines(f.controlled, f.pods, f.floor)
    b = f.before
    if b is not None:
        print(
            f"   before (--compare-with, converged just before): {b.controller_s:.1f} s = "
            f"{b.controller_s / f.floor_s if f.floor_s else float('nan'):.2f}x the honest floor; "
            f"{sum(b.converge_requests.values()) / n:.1f} requests and "
            f"{b.cpu_ms_per_deployment:.1f} ms of CPU per deployment, {b.pass_count} passes "
            f"({format_passes(b.passes)})"
        )
        if b.controlled is not None:
            _phase_lines(b.controlled, f.pods, f.floor, kueue=False)
        print(f"     requests: {format_counts(b.converge_requests)}")
    repeated = (
        f"; median of {len(f.cpu_repeats) + 1} converges, each "
        + ", ".join(f"{c * 1000 / n:.1f}" for c in (f.cpu_s, *f.cpu_repeats))
        + " ms"
        if f.cpu_repeats
        else ""
    )
    print(
        f"   per deployment: {f.controller_s * 1000 / n:.0f} ms of converge time, "
        f"{f.cpu_ms_per_deployment:.1f} ms of controller CPU "
        f"({f.cpu_s:.1f} s over the converge{repeated}); "
        f"{f.cpu_ms_per_pass:.1f} ms of CPU per pass"
    )
    if f.passes:
        print(
            f"   passes while converging (the controller's own metrics): {format_passes(f.passes)}"
        )
    if f.latency:
        print(
            "   its API server's answer time per request while converging: "
            + ", ".join(
                f"{verb} {seconds * 1000 / n:.0f} ms"
                for verb, (n, seconds) in f.latency.items()
                if n > 0
            )
        )
    print(f"   controller peak RSS: {f.peak_rss_mib:.0f} MiB (its own process, VmHWM)")
    if f.converge_watch:
        sent = sorted(
            ((r, v) for (part, r), v in f.converge_watch.items() if part == "events"),
            key=lambda kv: (-kv[1], kv[0]),
        )
        events, size = f.watched("events"), f.watched("bytes")
        print(
            f"   watch events sent to the controller while converging: {events} "
            f"({events / n:.1f} per deployment, {size / n / 1024:.1f} KiB per deployment): "
            + ", ".join(
                f"{r} {v} ({f.converge_watch.get(('bytes', r), 0) / max(v, 1) / 1024:.1f} KiB)"
                for r, v in sent
            )
        )
    total = sum(f.converge_requests.values())
    print(
        f"   API requests while converging: {total} ({total / n:.1f} per deployment), "
        f"{writes(f.converge_requests)} writes: {format_counts(f.converge_requests)}"
    )
    print(
        f"   idle {f.idle_s:.0f} s converged: {writes(f.idle_requests)} writes (target 0), "
        f"controller CPU {f.idle_cpu_ms_per_s:.1f} ms/s; "
        f"requests: {format_counts(f.idle_requests)}"
    )
    if f.edits:
        missed = (
            f"; {f.edits_missed} not replaced within {EDIT_TIMEOUT:.0f} s" if f.edits_missed else ""
        )
        print(
            f"   edit -> first replacement Pod, {len(f.edits)} edits each behind a queue of all "
            f"{n} deployments: p50 {f.edit_percentile(0.5):.2f} s, "
            f"p99 {f.edit_percentile(0.99):.2f} s, max {max(e[0] for e in f.edits):.2f} s "
            f"(target p99 <= 1 s){missed}"
        )
        print(
            "     split (p50 / p99): controller deletes the old replica "
            f"{f.edit_percentile(0.5, 1):.2f} / {f.edit_percentile(0.99, 1):.2f} s; "
            "Kueue and KWOK retire the old group "
            f"{f.edit_percentile(0.5, 2):.2f} / {f.edit_percentile(0.99, 2):.2f} s; "
            "controller creates the replacement "
            f"{f.edit_percentile(0.5, 3):.2f} / {f.edit_percentile(0.99, 3):.2f} s"
        )


def report_faults(f: Figures) -> None:
    if not f.faults:
        return
    print(
        f"   faults, one round each while deployments converge and all others roll out: "
        f"{f.fault_violations} violations of the invariants; {f.unserved} roles with no "
        "serving replica for a moment of their rollout"
    )
    for r in f.faults:
        print(f"     {r.line()}")


def _build_seconds(bin_dir: Path) -> str:
    parts = []
    for name in BINARIES:
        record = (bin_dir / name).resolve().with_name(f"{name}.build-seconds")
        try:
            parts.append(f"{name} {int(record.read_text())} s")
        except (OSError, ValueError):
            parts.append(f"{name} (not recorded)")
    return ", ".join(parts)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.controller", description=__doc__)
    parser.add_argument(
        "--sizes", default="64,256,1024", help="deployments per size, comma-separated"
    )
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument(
        "--idle-seconds", type=float, default=300.0, help="the converged idle window (default 300)"
    )
    parser.add_argument("--edits", type=int, default=20, help="edits timed per size (default 20)")
    parser.add_argument(
        "--repeats",
        type=int,
        default=2,
        help="converge the smallest size this many more times, each with a fresh controller; "
        "its CPU per deployment is the median (default 2)",
    )
    parser.add_argument(
        "--profile", type=Path, default=None, help="cProfile the controller into DIR"
    )
    parser.add_argument(
        "--log-dir", type=Path, default=None, help="keep the controller's logs in DIR"
    )
    parser.add_argument(
        "--controller-arg",
        action="append",
        default=[],
        help="one more flag for the controller (repeatable), e.g. --controller-arg=--workers=32",
    )
    parser.add_argument(
        "--faults",
        default="controller,apiserver,kueue,etcd",
        help="the fault rounds after the edits at each size, in order (bench/faults.py), or 'none'",
    )
    parser.add_argument(
        "--compare-with",
        type=Path,
        default=None,
        help="a checkout of the project (e.g. `git archive main | tar -x -C DIR`) whose "
        "controller converges each size once more, just before this one's: before and after "
        "a change in the same run",
    )
    parser.add_argument(
        "--service-cidr", default=None, help="the API server's Service range (default a /12)"
    )
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    binaries = locate_cluster_binaries()
    gpus = max(sizes) * args.replicas
    nodes = default_nodes(count=max(8, -(-gpus // 8)))
    for directory in (args.profile, args.log_dir):
        if directory is not None:
            directory.mkdir(parents=True, exist_ok=True)
    options: dict[str, Any] = {"nodes": nodes, "startup_timeout": 300.0}
    if args.service_cidr:
        options["service_cidr"] = args.service_cidr
    load = os.getloadavg()
    with Cluster(binaries, **options) as cluster:
        server = cluster.control_plane.add_apiserver("controller")
        # Kueue on an API server of its own too: its requests are counted the same way.
        kueue = cluster.control_plane.add_apiserver("kueue")
        cluster.restart_kueue(kubeconfig=kueue.kubeconfig("kueue-bench", ("system:masters",)))
        results = asyncio.run(
            run(
                cluster,
                server,
                kueue,
                sizes,
                replicas=args.replicas,
                idle_seconds=args.idle_seconds,
                edits=args.edits,
                log_dir=args.log_dir or cluster.dir,
                profile_dir=args.profile,
                controller_args=tuple(args.controller_arg),
                repeats=args.repeats,
                faults=tuple(x for x in args.faults.split(",") if x.strip() and x != "none"),
                compare_with=args.compare_with,
            )
        )
        start_s = cluster.startup_seconds
        cidr = cluster.service_cidr
    end_load = os.getloadavg()
    print(
        f"cluster: {len(nodes)} KWOK Nodes x 8 GPUs, Service range {cidr}; "
        f"cold start {start_s:.1f} s"
    )
    print(f"binaries (first build on this machine): {_build_seconds(binaries.bin_dir)}")
    print(
        f"load average (1, 5, 15 min) at start {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}, "
        f"at end {end_load[0]:.2f} {end_load[1]:.2f} {end_load[2]:.2f}"
    )
    for figures in results:
        report(figures)
        report_faults(figures)
    small, large = results[0], results[-1]
    growth = large.cpu_ms_per_deployment / small.cpu_ms_per_deployment
    print(
        f"per-deployment controller CPU at {large.deployments} / at {small.deployments} "
        f"(median of {len(small.cpu_repeats) + 1} converges): "
        f"{growth:.2f}x (target <= 1.2)"
    )
    pairs = [f"growth={growth:.2f}", f"cluster_start_s={start_s:.1f}"]
    for f in results:
        n = f.deployments
        pairs += [
            f"controller_s_{n}={f.controller_s:.1f}",
            f"bare_s_{n}={f.bare_s:.1f}",
            f"floor_s_{n}={f.floor_s:.1f}",
            f"ratio_{n}={f.ratio:.2f}",
            f"ratio_floor_{n}={f.ratio_floor:.2f}",
            *(
                [f"before_ratio_floor_{n}={f.before.controller_s / f.floor_s:.2f}"]
                if f.before is not None and f.floor_s
                else []
            ),
            f"cpu_ms_per_deployment_{n}={f.cpu_ms_per_deployment:.1f}",
            f"cpu_ms_per_pass_{n}={f.cpu_ms_per_pass:.1f}",
            f"watch_events_per_deployment_{n}={f.watched('events') / n:.1f}",
            f"idle_cpu_ms_per_s_{n}={f.idle_cpu_ms_per_s:.1f}",
            f"rss_mib_{n}={f.peak_rss_mib:.0f}",
            f"idle_writes_{n}={writes(f.idle_requests)}",
            f"edit_p99_s_{n}={f.edit_percentile(0.99):.2f}",
        ]
        for label, phase in (("floor", f.floor), ("controller", f.controlled)):
            if phase is not None and phase.cpu is not None:
                pairs.append(f"busy_cores_{label}_{n}={phase.cpu.busy_cores:.2f}")
        if f.faults:
            pairs += [
                f"fault_violations_{n}={f.fault_violations}",
                f"unserved_{n}={f.unserved}",
                "reconverge_s_{}={}".format(
                    n, ",".join(f"{r.fault}:{r.reconverge_s:.1f}" for r in f.faults)
                ),
            ]
    pairs += [f"ratio_floor={large.ratio_floor:.2f}", f"ratio_bare={large.ratio:.2f}"]
    print(" ".join(pairs))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
