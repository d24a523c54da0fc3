"""Loopback load on the webhook server, with a real API server answering its reads.

Starts an envtest control plane (etcd + kube-apiserver, the project's CRDs), creates the objects
the reviews read (an InstanceType; a Binding → pool → backend), starts ``python -m
gpustack_webhook`` exactly as the Deployment runs it (TLS, live reads through a kubeconfig), then
drives it with 16 concurrent HTTPS clients posting AdmissionReviews, in two phases:

* ``inject``: Pod CREATE on the injection path (reads Settings, the Binding, pool and backend:
  through the server's watch-fed cache, ``gpustack_webhook/cache.py``);
* ``validate``: ModelDeployment CREATE on the validation path (reads Settings, the InstanceType,
  live);
* ``paced``: the ``inject`` review again, sent at a steady ``--rate`` (default 100 reviews/s,
  open loop: each on its schedule whether or not the previous one answered), for
  ``--paced-seconds``: the latency a steady trickle of Pod creations sees;
* ``inject-live`` (with ``--live``): the ``inject`` phase against a second server started with
  ``--no-watch-cache``, every read a GET, for comparison.

The closed-loop phases are bounded twice: each stops after ``--count`` requests or ``--seconds``
of load, whichever comes first (after ``--warmup`` seconds that are not measured). An error is
anything but HTTP 200 with the expected verdict. Prints p50/p95/p99/max latency and requests per
second per phase, and the CPU time the webhook server and this load generator spent per request
(all of them share the machine with etcd and kube-apiserver, so the load generator's share shows
whether it is the bottleneck).

The baseline is the library's own time for the same review, measured in this process in the
same run: ``review_pod`` on the same AdmissionRequest with the same objects (read from the API
server, decoded once) as static lookups, CPU time per call over ``--library-iterations`` calls.
The server's CPU per injection review is printed against it (target <= 1.5x), and the paced
phase's p99 against 10 ms. Two floors say what those targets stand on: ``floor``, the same
clients getting ``/healthz`` (TLS, HTTP and the event loop per request, no review) in a closed
loop, and ``floor-paced``, the same at the paced rate. Around them: the server's own work per
review (its CPU less the library's), the CPU the control plane's processes (kube-apiserver,
etcd) used during each phase (the machine's other tenants: a latency tail on two cores can be
theirs), and for the paced phase the server's own review-duration histogram (``/metrics``), which
says how much of the tail the server's handling holds. The last line is ``key=value`` pairs.

Run: ``python -m bench.webhook_load [--seconds 30] [--count 200000] [--clients 16] [--rate 100]
[--paced-seconds 30] [--live]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import ssl
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import aiohttp
from integration.controlplane import ControlPlane, started_control_plane
from integration.webhook_fixtures import (
    WebhookProcess,
    create_inputs,
    create_namespace,
    delete_inputs,
    deployment,
    labelled_pod,
)

from gpustack_render.api.inputs import KVCacheBackend, KVCachePool, KVCachePoolBinding
from gpustack_render.core.review import AdmissionRequest
from gpustack_render.core.settings import Settings
from gpustack_render.injection import review_pod
from gpustack_render.schema.lookups import StaticLookups, decode_stored

INJECT_PATH = "/mutate-gpustack-worker-kvcache-core-v1-pod"
VALIDATE_PATH = "/validate-worker-gpustack-ai-v1-modeldeployment"
HEALTH_PATH = "/healthz"
METRICS_PATH = "/metrics"
#: The server's review-duration histogram (gpustack_webhook/metrics.py).
HISTOGRAM = "gpustack_webhook_review_duration_seconds"


@dataclass
class Phase:
    """One measured phase: latencies of good answers, and the errors seen."""

    name: str
    latencies: list[float] = field(default_factory=list)
    errors: int = 0
    first_error: str = ""
    seconds: float = 0.0
    #: Answers received, warm-up included (the CPU figures cover the warm-up too).
    completed: int = 0
    #: CPU seconds over the phase (warm-up included): the webhook server, this process.
    server_cpu: float = float("nan")
    client_cpu: float = 0.0
    #: CPU seconds the control plane's components (kube-apiserver, etcd) used over the phase:
    #: the machine's other tenants, whose bursts a latency tail on two cores can come from.
    others_cpu: dict[str, float] = field(default_factory=dict)
    #: Wall seconds the CPU figures cover (the warm-up included).
    cpu_wall: float = 0.0
    #: The server's own review-duration histogram over the phase (bucket bound in seconds →
    #: reviews within it), for the phases that post injection reviews.
    server_buckets: dict[float, float] = field(default_factory=dict)

    def server_p99_bound(self) -> float:
        """The smallest histogram bucket bound (seconds) holding 99% of the reviews as the
        server timed them (from reading the body to the verdict); NaN without a histogram."""
        if not self.server_buckets:
            return float("nan")
        total = max(self.server_buckets.values())
        for bound in sorted(self.server_buckets):
            if self.server_buckets[bound] >= 0.99 * total:
                return bound
        return float("inf")

    def record(self, counted: bool, elapsed: float, problem: str) -> None:
        """One answer: counted (after the warm-up) as a latency or an error."""
        self.completed += 1
        if not counted:
            return
        if problem:
            self.errors += 1
            self.first_error = self.first_error or problem
        else:
            self.latencies.append(elapsed)

    def percentile(self, q: float) -> float:
        if not self.latencies:
            return float("nan")
        ordered = sorted(self.latencies)
        index = min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))
        return ordered[index] * 1000

    @property
    def count(self) -> int:
        return len(self.latencies) + self.errors

    @property
    def rps(self) -> float:
        return self.count / self.seconds if self.seconds else 0.0


def process_cpu(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used; NaN where /proc cannot tell."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")


def components_cpu(components: dict[str, int]) -> dict[str, float]:
    """CPU seconds used so far by each named process."""
    return {name: process_cpu(pid) for name, pid in components.items()}


async def inject_buckets(session: aiohttp.ClientSession, url: str) -> dict[float, float]:
    """The server's review-duration histogram for the injection webhook, all verdicts summed:
    bucket bound (seconds) → reviews within it (``/metrics`` on the same listener)."""
    async with session.get(url + METRICS_PATH) as resp:
        text = await resp.text()
    out: dict[float, float] = {}
    for line in text.splitlines():
        if line.startswith(f"{HISTOGRAM}_bucket{{") and 'webhook="pod-inject"' in line:
            bound = float(line.split('le="', 1)[1].split('"', 1)[0])
            out[bound] = out.get(bound, 0.0) + float(line.rsplit(" ", 1)[1])
    return out


def review(kind: dict[str, str], obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": kind,
            "resource": {"group": kind["group"], "version": "v1", "resource": "x"},
            "operation": "CREATE",
            "namespace": namespace,
            "name": obj["metadata"].get("name", ""),
            "userInfo": {"username": "bench"},
            "object": obj,
            "oldObject": None,
            "dryRun": False,
        },
    }


def check_inject(answer: dict[str, Any]) -> str:
    response = answer.get("response") or {}
    if response.get("allowed") is not True or response.get("patchType") != "JSONPatch":
        return f"not injected: {json.dumps(response.get('status'))[:300]}"
    return ""


def check_validate(answer: dict[str, Any]) -> str:
    response = answer.get("response") or {}
    if response.get("allowed") is not True:
        return f"refused: {json.dumps(response.get('status'))[:300]}"
    return ""


async def post_review(
    session: aiohttp.ClientSession, url: str, body: bytes | None, check: Any
) -> tuple[float, str]:
    """One AdmissionReview posted (``body`` ``None``: a GET of ``url``, the HTTPS floor): its
    latency in seconds and the problem with its answer (empty when it is the expected verdict;
    with ``check`` ``None``, any 200)."""
    started = time.perf_counter()
    problem = ""
    try:
        if body is None:
            request = session.get(url)
        else:
            request = session.post(url, data=body, headers={"Content-Type": "application/json"})
        async with request as resp:
            payload = await resp.read()
            if resp.status != 200:
                problem = f"HTTP {resp.status}: {payload[:200]!r}"
            elif check is not None:
                problem = check(json.loads(payload))
    except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
        problem = f"{type(exc).__name__}: {exc}"
    return time.perf_counter() - started, problem


async def run_phase(
    phase: Phase,
    session: aiohttp.ClientSession,
    url: str,
    body: bytes | None,
    check: Any,
    *,
    clients: int,
    count: int,
    seconds: float,
    warmup: float,
) -> None:
    measuring = False
    stop_at = 0.0
    issued = 0

    async def worker() -> None:
        nonlocal issued
        while True:
            if measuring and (issued >= count or time.monotonic() >= stop_at):
                return
            if measuring:
                issued += 1
            counted = measuring
            phase.record(counted, *await post_review(session, url, body, check))

    tasks = [asyncio.create_task(worker()) for _ in range(clients)]
    await asyncio.sleep(warmup)
    measuring = True
    began = time.monotonic()
    stop_at = began + seconds
    # Warm-up requests still in flight finish uncounted; the workers stop by themselves.
    await asyncio.wait_for(asyncio.gather(*tasks), timeout=seconds + 60)
    phase.seconds = time.monotonic() - began


async def run_paced(
    phase: Phase,
    session: aiohttp.ClientSession,
    url: str,
    body: bytes | None,
    check: Any,
    *,
    rate: float,
    seconds: float,
    warmup: float,
) -> None:
    """Open loop: one request every ``1 / rate`` seconds, each on its own schedule."""
    loop = asyncio.get_running_loop()
    began = loop.time()
    measured_from = began + warmup
    end = measured_from + seconds

    async def one(counted: bool) -> None:
        phase.record(counted, *await post_review(session, url, body, check))

    tasks = []
    sent = 0
    while True:
        due = began + sent / rate
        if due >= end:
            break
        delay = due - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(due >= measured_from)))
        sent += 1
    await asyncio.wait_for(asyncio.gather(*tasks), timeout=60)
    phase.seconds = seconds


def library_cpu_seconds(
    cp: ControlPlane, inject: dict[str, Any], namespace: str, iterations: int
) -> float:
    """CPU seconds the library takes for the ``inject`` review, per call: ``review_pod`` with
    the objects it reads (as the API server stores them, decoded once) and the server's Settings
    (no ConfigMap: every default, the server's namespace as the system namespace)."""
    pod = inject["request"]["object"]
    binding_name = pod["metadata"]["annotations"]["kvcache.gpustack.ai/binding"]
    base = "/apis/worker.gpustack.ai/v1"
    _, binding_raw = cp.request(
        "GET", f"{base}/namespaces/{namespace}/kvcachepoolbindings/{binding_name}"
    )
    binding = decode_stored(KVCachePoolBinding, binding_raw, name=binding_name, namespace=namespace)
    pool_name = binding.spec.pool_ref.name
    _, pool_raw = cp.request("GET", f"{base}/kvcachepools/{pool_name}")
    pool = decode_stored(KVCachePool, pool_raw, name=pool_name, namespace="")
    backend_name = pool.spec.backends[0]
    _, backend_raw = cp.request("GET", f"{base}/kvcachebackends/{backend_name}")
    backend = decode_stored(KVCacheBackend, backend_raw, name=backend_name, namespace="")
    lookups = StaticLookups.of([binding, pool, backend])
    settings = Settings(system_namespace=namespace)
    request = AdmissionRequest.from_review(inject)
    verdict = review_pod(request, lookups=lookups, settings=settings)
    if not verdict.allowed or not verdict.patch:
        raise RuntimeError(f"the library did not inject the benchmark's Pod: {verdict}")
    for _ in range(200):
        review_pod(request, lookups=lookups, settings=settings)
    started = time.process_time()
    for _ in range(iterations):
        review_pod(request, lookups=lookups, settings=settings)
    return (time.process_time() - started) / iterations


def inject_review(namespace: str, binding: str) -> dict[str, Any]:
    pod = labelled_pod("bench", binding)
    pod["metadata"]["namespace"] = namespace
    return review({"group": "", "version": "v1", "kind": "Pod"}, pod, namespace)


async def drive(
    server: WebhookProcess,
    namespace: str,
    binding: str,
    instance_type: str,
    args: argparse.Namespace,
    *,
    components: dict[str, int] | None = None,
    inject_only: bool = False,
    name_suffix: str = "",
) -> list[Phase]:
    components = components or {}
    context = ssl.create_default_context(cadata=server.ca.cert_pem.decode())
    connector = aiohttp.TCPConnector(limit=args.clients, ssl=context)
    timeout = aiohttp.ClientTimeout(total=10)
    md = deployment("bench", namespace, instance_type, resources={"accelerator": 1})
    inject = inject_review(namespace, binding)
    validate = review(
        {"group": "worker.gpustack.ai", "version": "v1", "kind": "ModelDeployment"},
        md,
        namespace,
    )
    phases = [Phase(f"inject{name_suffix}")]
    plan: list[tuple[Phase, str, dict[str, Any] | None, Any]] = [
        (phases[0], INJECT_PATH, inject, check_inject)
    ]
    if not inject_only:
        phases.append(Phase("validate"))
        plan.append((phases[1], VALIDATE_PATH, validate, check_validate))
        # The HTTPS floor: the same server answering GET /healthz, nothing else, under the
        # same load: what any request costs it before a review's own work.
        phases.append(Phase("floor"))
        plan.append((phases[2], HEALTH_PATH, None, None))
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        for phase, path, body, check in plan:
            with measured(phase, server.pid, components):
                await run_phase(
                    phase,
                    session,
                    server.url + path,
                    None if body is None else json.dumps(body).encode(),
                    check,
                    clients=args.clients,
                    count=args.count,
                    seconds=args.seconds,
                    warmup=args.warmup,
                )
            report(phase)
        if not inject_only:
            # The paced review, then its latency floor: GET /healthz at the same rate.
            paced_plan = [
                (Phase("paced"), INJECT_PATH, json.dumps(inject).encode(), check_inject),
                (Phase("floor-paced"), HEALTH_PATH, None, None),
            ]
            for phase, path, data, check in paced_plan:
                buckets = await inject_buckets(session, server.url)
                with measured(phase, server.pid, components):
                    await run_paced(
                        phase,
                        session,
                        server.url + path,
                        data,
                        check,
                        rate=args.rate,
                        seconds=args.paced_seconds,
                        warmup=args.warmup,
                    )
                if path == INJECT_PATH:
                    after = await inject_buckets(session, server.url)
                    phase.server_buckets = _spent(buckets, after)
                report(phase)
                phases.append(phase)
    return phases


@contextlib.contextmanager
def measured(phase: Phase, server_pid: int, components: dict[str, int]) -> Iterator[None]:
    """Fill ``phase``'s CPU figures over the block: the server's, this process's, each of the
    control plane's ``components``', and the wall time they cover."""
    server_cpu, client_cpu = process_cpu(server_pid), time.process_time()
    others, began = components_cpu(components), time.monotonic()
    yield
    phase.server_cpu = process_cpu(server_pid) - server_cpu
    phase.client_cpu = time.process_time() - client_cpu
    phase.others_cpu = _spent(others, components_cpu(components))
    phase.cpu_wall = time.monotonic() - began


K = TypeVar("K")


def _spent(before: dict[K, float], after: dict[K, float]) -> dict[K, float]:
    return {key: after[key] - before.get(key, 0.0) for key in after}


def report(phase: Phase) -> None:
    lat = phase.latencies
    mean = statistics.fmean(lat) * 1000 if lat else float("nan")
    print(
        f"{phase.name:<9} {phase.count:>7} requests in {phase.seconds:5.1f} s  "
        f"{phase.rps:7.0f} req/s  p50 {phase.percentile(0.50):6.2f} ms  "
        f"p95 {phase.percentile(0.95):6.2f} ms  p99 {phase.percentile(0.99):6.2f} ms  "
        f"max {phase.percentile(1.0):7.2f} ms  mean {mean:6.2f} ms  errors {phase.errors}",
        flush=True,
    )
    done = max(phase.completed, 1)
    print(
        f"{phase.name:<9} CPU per request: webhook server {phase.server_cpu / done * 1000:.2f} ms, "
        f"load generator {phase.client_cpu / done * 1000:.2f} ms",
        flush=True,
    )
    if phase.others_cpu and phase.cpu_wall:
        shares = ", ".join(
            f"{name} {cpu / phase.cpu_wall * 100:.1f}%" for name, cpu in phase.others_cpu.items()
        )
        print(f"{phase.name:<9} other processes' CPU (share of one core): {shares}", flush=True)
    if phase.server_buckets:
        total = max(max(phase.server_buckets.values()), 1.0)
        within = phase.server_buckets.get(0.0025, float("nan")) / total * 100
        print(
            f"{phase.name:<9} as the server timed its reviews: {within:.1f}% within 2.5 ms, "
            f"99% within {phase.server_p99_bound() * 1000:g} ms (its histogram's buckets)",
            flush=True,
        )
    if phase.first_error:
        print(f"{phase.name:<9} first error: {phase.first_error}", flush=True)


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench.webhook_load", description=__doc__)
    p.add_argument("--clients", type=int, default=16, help="concurrent clients (default 16)")
    p.add_argument(
        "--seconds", type=float, default=30.0, help="measured seconds per phase (default 30)"
    )
    p.add_argument(
        "--count", type=int, default=200_000, help="most requests per phase (default 200000)"
    )
    p.add_argument("--warmup", type=float, default=2.0, help="unmeasured seconds per phase")
    p.add_argument(
        "--rate", type=float, default=100.0, help="reviews per second of the paced phase"
    )
    p.add_argument(
        "--paced-seconds", type=float, default=30.0, help="measured seconds of the paced phase"
    )
    p.add_argument(
        "--library-iterations",
        type=int,
        default=3000,
        help="calls timed for the library's own time per review (default 3000)",
    )
    p.add_argument(
        "--live",
        action="store_true",
        help="also run the inject phase against a server without the watch cache",
    )
    return p.parse_args(argv)


def _server(cp: ControlPlane, namespace: str, workdir: Path, *extra: str) -> WebhookProcess:
    return WebhookProcess(
        kubeconfig=cp.kubeconfig,
        ca=cp.ca,
        namespace=namespace,
        workdir=workdir,
        extra_args=["--log-level=warning", *extra],
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv if argv is not None else [])
    scope = uuid.uuid4().hex[:8]
    namespace = f"bench-{scope}"
    live: Phase | None = None
    load = os.getloadavg()
    with started_control_plane() as cp, tempfile.TemporaryDirectory(prefix="bench-wh-") as tmp:
        create_namespace(cp, namespace, {})
        instance_type, binding, _ = create_inputs(cp, scope, namespace)
        library = library_cpu_seconds(
            cp, inject_review(namespace, binding), namespace, args.library_iterations
        )
        print(
            f"library: review_pod of the inject review takes {library * 1000:.3f} ms of CPU "
            f"per call (static lookups, {args.library_iterations} calls)",
            flush=True,
        )
        server = _server(cp, namespace, Path(tmp) / "cached")
        try:
            server.start()
            print(
                f"webhook server on {server.url}, API server on {cp.url}; "
                f"{args.clients} clients, {args.seconds:g} s or {args.count} requests per phase; "
                f"paced {args.rate:g}/s for {args.paced_seconds:g} s",
                flush=True,
            )
            inject, validate, floor, paced, floor_paced = asyncio.run(
                drive(
                    server,
                    namespace,
                    binding,
                    instance_type,
                    args,
                    components={p.name: p.popen.pid for p in cp.processes},
                )
            )
        finally:
            server.close()
        if args.live:
            server = _server(cp, namespace, Path(tmp) / "live", "--no-watch-cache")
            try:
                server.start()
                (live,) = asyncio.run(
                    drive(
                        server,
                        namespace,
                        binding,
                        instance_type,
                        args,
                        inject_only=True,
                        name_suffix="-live",
                    )
                )
            finally:
                server.close()
        delete_inputs(cp, scope)
    per_review = inject.server_cpu / max(inject.completed, 1)
    ratio = per_review / library
    print(
        f"inject: server CPU per review {per_review * 1000:.3f} ms = {ratio:.2f}x the library's "
        f"{library * 1000:.3f} ms (target <= 1.5x)",
        flush=True,
    )
    if live is not None:
        live_review = live.server_cpu / max(live.completed, 1)
        print(
            f"inject-live: server CPU per review {live_review * 1000:.3f} ms = "
            f"{live_review / library:.2f}x the library's (every read a GET)",
            flush=True,
        )
    floor_request = floor.server_cpu / max(floor.completed, 1)
    print(
        f"floor: server CPU per GET /healthz {floor_request * 1000:.3f} ms under the same load; "
        f"library + floor = {(library + floor_request) / library:.2f}x the library "
        "(what the target stands on: TLS, HTTP and the event loop per request)",
        flush=True,
    )
    overhead = per_review - library
    print(
        f"inject: the server's own work around the library {overhead * 1000:.3f} ms per review "
        f"(server CPU less the library's), of which the HTTPS floor {floor_request * 1000:.3f} ms",
        flush=True,
    )
    others_share = sum(paced.others_cpu.values()) / paced.cpu_wall if paced.cpu_wall else 0.0
    print(
        f"paced: {paced.count} reviews at {args.rate:g}/s, p99 {paced.percentile(0.99):.2f} ms "
        f"(target <= 10 ms); GET /healthz at the same rate: p99 "
        f"{floor_paced.percentile(0.99):.2f} ms; the server timed 99% of them within "
        f"{paced.server_p99_bound() * 1000:g} ms; the control plane's processes used "
        f"{others_share * 100:.1f}% of a core meanwhile",
        flush=True,
    )
    print(f"load average at start (1, 5, 15 min): {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    errors = sum(p.errors for p in (inject, validate, floor, paced, floor_paced))
    errors += live.errors if live else 0
    print(
        f"inject_p99_ms={inject.percentile(0.99):.2f} inject_rps={inject.rps:.0f} "
        f"inject_cpu_ms={per_review * 1000:.3f} library_cpu_ms={library * 1000:.3f} "
        f"inject_cpu_ratio={ratio:.2f} "
        f"validate_p99_ms={validate.percentile(0.99):.2f} validate_rps={validate.rps:.0f} "
        f"paced_p99_ms={paced.percentile(0.99):.2f} floor_cpu_ms={floor_request * 1000:.3f} "
        f"floor_paced_p99_ms={floor_paced.percentile(0.99):.2f} "
        f"inject_overhead_ms={overhead * 1000:.3f} "
        f"paced_server_p99_within_ms={paced.server_p99_bound() * 1000:g} "
        f"paced_others_core_pct={others_share * 100:.1f} errors={errors}",
        flush=True,
    )
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
