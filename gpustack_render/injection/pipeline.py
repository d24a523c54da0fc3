"""The KV-cache Pod injection pipeline: the CREATE processing order of
``docs/contract/injection-notes.md`` §2, step by step, and the UPDATE freeze (§10).

Entry points:

- :func:`review_pod` — one admission request (CREATE: injection; UPDATE: freeze) → Verdict;
- :func:`inject_pod` — the CREATE decision on a raw Pod → :class:`InjectionResult`;
- :func:`freeze_pod` — the UPDATE freeze → :class:`~gpustack_render.core.errors.ErrorList`.

Every refusal runs before any mutation: the contract, the Binding walk, the target container,
the collisions, the launch, and only then the mutation and its patch.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from gpustack_render.core import jsonview, naming
from gpustack_render.core.errors import Verdict
from gpustack_render.core.review import AdmissionRequest
from gpustack_render.core.settings import Settings
from gpustack_render.engines import connectors, owned
from gpustack_render.injection import refusal as r
from gpustack_render.injection.collisions import check_collisions, names_flag
from gpustack_render.injection.contract import Contract, opted_in, read_contract
from gpustack_render.injection.freeze import freeze_pod
from gpustack_render.injection.launch import Launch, check_launch
from gpustack_render.injection.mutate import apply_injection
from gpustack_render.injection.patch import make_patch
from gpustack_render.injection.record import InjectionRecord
from gpustack_render.injection.refusal import Refusal
from gpustack_render.injection.resolve import Resolution, resolve
from gpustack_render.injection.target import Target, select_container
from gpustack_render.schema.decoding import nesting_errors
from gpustack_render.schema.lookups import Lookups


@dataclass(frozen=True)
class InjectionResult:
    """The CREATE decision for one Pod.

    ``pod`` is the Pod to admit: the mutated copy when injected (it shares the branches
    injection leaves alone with the input; modify neither), else the input itself, unchanged.
    ``refusal`` is set when refused; ``record`` when injected; neither when the Pod did not opt
    in.
    """

    pod: Mapping[str, Any]
    refusal: Refusal | None = None
    record: InjectionRecord | None = None

    @property
    def injected(self) -> bool:
        return self.record is not None


def inject_pod(
    pod: Mapping[str, Any],
    *,
    namespace: str,
    lookups: Lookups,
    settings: Settings,
) -> InjectionResult:
    """The CREATE injection of ``pod`` in ``namespace`` (docs/contract/injection-notes.md §2).

    Every refusal runs before any mutation, so a refused Pod is returned as submitted; the first
    failing step wins. Never raises on malformed Pods (a field of the wrong type reads as
    absent).
    """
    if not opted_in(jsonview.labels_of(pod)):
        return InjectionResult(pod)
    deep = nesting_errors(pod)  # read, compared and diffed below: bounded first
    if deep:
        return InjectionResult(
            pod, refusal=Refusal(r.NESTING, f"the Pod is unreadable: {deep[0].message()}")
        )
    contract = read_contract(jsonview.annotations_of(pod))
    if isinstance(contract, Refusal):
        return InjectionResult(pod, refusal=contract)
    resolution = resolve(
        contract,
        namespace=namespace or naming.DEFAULT_NAMESPACE,
        lookups=lookups,
        settings=settings,
    )
    if isinstance(resolution, Refusal):
        return InjectionResult(pod, refusal=resolution)
    client = connectors.store_client(
        contract.engine,
        endpoint=resolution.endpoint,
        transport=resolution.transport,
        tenant=resolution.tenant,
        dtype=resolution.dtype,
        kv_role=connectors.kv_role_for(contract.role),
    )
    pod_spec = jsonview.spec_of(pod)
    target = select_container(pod_spec, named=contract.container)
    if isinstance(target, Refusal):
        return InjectionResult(pod, refusal=target)
    refused = check_collisions(
        pod_spec,
        target,
        engine=contract.engine,
        client=client,
        dtype=resolution.dtype,
        tenant=resolution.tenant,
    )
    if refused is not None:
        return InjectionResult(pod, refusal=refused)
    launch = check_launch(
        target.name,
        jsonview.tokens(target.container.get("command")),
        jsonview.tokens(target.container.get("args")),
        engine=contract.engine,
        forwarded=contract.forwarded,
    )
    if isinstance(launch, Refusal):
        return InjectionResult(pod, refusal=launch)
    return _inject(pod, contract, resolution, client, target, launch)


def _inject(
    pod: Mapping[str, Any],
    contract: Contract,
    resolution: Resolution,
    client: connectors.StoreClient,
    target: Target,
    launch: Launch,
) -> InjectionResult:
    defaulted = [
        token
        for group in client.defaulted_args
        if not names_flag(target.container, group[0], engine=contract.engine)
        for token in group
    ]
    record = InjectionRecord(
        binding=contract.binding,
        engine=contract.engine,
        vehicle="file" if client.volumes else "environment",
        domain=resolution.domain,
        tenant_injected=bool(resolution.tenant),
        launch_program=launch.program,
        launch_args_forwarded=launch.forwarded,
    )
    # The tenant is Binding-owned: with no tenant to write (a single-tenant store), a tenant the
    # author declared would be the one the engine reads, so it is removed rather than kept.
    single_tenant = client.vehicle == "environment" and not resolution.tenant
    withdrawn = (owned.MOONCAKE_TENANT_ID_ENV,) if single_tenant else ()
    mutated = apply_injection(
        pod,
        index=target.index,
        client=client,
        defaulted_args=defaulted,
        record=record,
        withdrawn_env=withdrawn,
    )
    return InjectionResult(mutated, record=record)


def _namespace(request: AdmissionRequest, pod: Mapping[str, Any]) -> str:
    ns = jsonview.metadata_of(pod).get("namespace")
    return request.namespace or (ns if isinstance(ns, str) and ns else naming.DEFAULT_NAMESPACE)


def _name(request: AdmissionRequest, pod: Mapping[str, Any]) -> str:
    meta = jsonview.metadata_of(pod)
    name = request.name or meta.get("name") or meta.get("generateName") or ""
    if isinstance(name, str):
        return name
    # A scalar of the wrong type is named as written; an object or list (of any depth) is not.
    return str(name) if isinstance(name, (int, float, bool)) else ""


def review_pod(request: AdmissionRequest, *, lookups: Lookups, settings: Settings) -> Verdict:
    """One Pod admission request: CREATE runs the injection, UPDATE the freeze.

    A CREATE refusal is ``403 Forbidden`` with the rule id as ``origin`` and no causes; an
    injection is allowed with the JSON Patch from the submitted Pod to the mutated one. The
    freeze answers ``422 Invalid`` with one cause per violation. Other operations are allowed.
    """
    pod = request.object if isinstance(request.object, dict) else {}
    if request.operation == "CREATE":
        result = inject_pod(
            pod, namespace=_namespace(request, pod), lookups=lookups, settings=settings
        )
        if result.refusal is not None:
            return Verdict.forbid(result.refusal.message, origin=result.refusal.rule)
        if not result.injected:
            return Verdict.allow()
        return Verdict.allow(patch=make_patch(pod, result.pod))
    if request.operation == "UPDATE":
        errs = nesting_errors(request.object) or nesting_errors(request.old_object)
        if errs:
            return Verdict.from_errors(errs, group_kind="Pod", name=_name(request, pod))
        errs = freeze_pod(request.old_object, request.object)
        return Verdict.from_errors(errs, group_kind="Pod", name=_name(request, pod))
    return Verdict.allow()
