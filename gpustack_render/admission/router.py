"""Router rules (``docs/contract/admission.md`` §7), only with ``spec.router``.

Rules 1–6 refuse a router that cannot front the roles as declared. The router's own objects
(``rendering/router/``, D26) are this project's addition, so what would leave them unrendered is
never a reason to refuse a deployment the seed allows: no image (``router.image-missing``) and
roles listening on different container ports (``router.listener-ports-differ``) are admission
*warnings* (:func:`router_warnings`): the engines render and run, the router is not created, and
``RouterReady`` says why. One refusal stays: the timeout flag repeated in ``extraArgs`` while
``spec.router.requestTimeoutSeconds`` (this project's own field) is set
(``router.timeout-flag-twice``); like the port rules of §6 it leaves a stored deployment alone
until an edit creates the problem.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from gpustack_render.admission.context import Context, serving_port, serving_protocol
from gpustack_render.admission.ports import own_port
from gpustack_render.api.modeldeployment import RouterSpec
from gpustack_render.core import errors
from gpustack_render.core.errors import ErrorList
from gpustack_render.core.paths import ENGINE, ROUTER
from gpustack_render.core.vocabulary import Engine
from gpustack_render.deployment.roles import role_argv
from gpustack_render.engines.flags import find_flag
from gpustack_render.engines.owned import (
    DEFAULT_SERVING_PORT,
    LLM_D_ROUTER,
    ROUTER_OWNED_ARGS,
    SGLANG_GATEWAY,
    SSL_CERTFILE_FLAG,
    SSL_KEYFILE_FLAG,
    VLLM_ROUTER,
)
from gpustack_render.engines.parallelism import parse_int
from gpustack_render.rendering.router.build import listener_ports_failure, router_image_failure
from gpustack_render.rendering.router.commandline import FIELD_FLAGS

#: Engines each router fronts (rule 3), by base engine.
FRONTED_ENGINES: Final[dict[str, tuple[Engine, ...]]] = {
    LLM_D_ROUTER: (Engine.VLLM, Engine.SGLANG),
    VLLM_ROUTER: (Engine.VLLM,),
    SGLANG_GATEWAY: (Engine.SGLANG,),
}

#: Engines exposing every metric llm-d-router requires (rule 4); both do today [inferred].
LLM_D_ROUTER_METRIC_ENGINES: Final[dict[Engine, str]] = {Engine.VLLM: "", Engine.SGLANG: ""}
#: The metric llm-d-router scores endpoints by, as named in a refusal.
LLM_D_ROUTER_METRIC: Final = "the queue, running-request and KV-cache utilisation gauges"


def validate_router(ctx: Context, *, old_ctx: Context | None = None) -> ErrorList:
    """Rules 1–6 of §7, in order (every refusal ``Invalid``), then the router-object rules
    (:func:`validate_router_objects`)."""
    out = ErrorList()
    router = ctx.md.spec.router
    if router is None:
        return out
    name = router.name
    engine = ctx.base_engine
    out.extend(
        _repeated_flags(
            router,
            ROUTER_OWNED_ARGS.get(name, ()),
            "is set by the operator on router {router}",
            "Remove it",
            origin="router.owned-flag",
        )
    )
    if router.disaggregation_threshold_tokens is not None and name != LLM_D_ROUTER:
        out.append(
            errors.invalid(
                ROUTER.child("disaggregationThresholdTokens"),
                router.disaggregation_threshold_tokens,
                f"the field is meaningful only under router {LLM_D_ROUTER}, not {name}; remove it",
                origin="router.field-llm-d-only",
            )
        )
    fronted = FRONTED_ENGINES.get(name, ())
    if engine not in fronted:
        out.append(
            errors.invalid(
                ROUTER.child("name"),
                name,
                f"router {name} does not front engine {engine}; it fronts {', '.join(fronted)}",
                origin="router.engine-not-fronted",
            )
        )
    if name == LLM_D_ROUTER and engine not in LLM_D_ROUTER_METRIC_ENGINES:
        out.append(
            errors.invalid(
                ENGINE,
                engine,
                f"router {name} requires {LLM_D_ROUTER_METRIC}, which engine {engine} lacks",
                origin="router.engine-lacks-metric",
            )
        )
    ports: set[int] = set()
    for i, role in enumerate(ctx.md.spec.roles):
        protocol = serving_protocol(role)
        if protocol != "TCP":
            out.append(
                errors.invalid(
                    ROUTER,
                    name,
                    f"role {role.name!r} serves over {protocol} (its first declared port); "
                    f"router {name} reaches roles over TCP only",
                    origin="router.port-not-tcp",
                )
            )
        argv = role_argv(role).argv
        tls = [f for f in (SSL_CERTFILE_FLAG, SSL_KEYFILE_FLAG) if find_flag(argv, f, engine)]
        if tls:
            out.append(
                errors.invalid(
                    ROUTER,
                    name,
                    f"role {role.name!r} passes {' and '.join(tls)}; router {name} supports "
                    f"plaintext endpoints only",
                    origin="router.tls-endpoint",
                )
            )
        port = serving_port(role)
        ports.add(port)
        value, _ = own_port(ctx, role)
        own = parse_int(value) if value is not None else None
        if own == port and ctx.is_direct_decoder(i, out, origin="router.decoder-own-port"):
            out.append(
                errors.invalid(
                    ROUTER,
                    name,
                    f"role {role.name!r} passes --port {port}, its serving port; on this "
                    f"decoder the routing proxy takes port {port} and the engine moves "
                    f"behind it. Drop --port",
                    origin="router.decoder-own-port",
                )
            )
    if len(ports) > 1:
        listed = sorted(ports)
        out.append(
            errors.invalid(
                ROUTER,
                name,
                f"router {name} needs every role on one serving port (the first declared port, "
                f"else {DEFAULT_SERVING_PORT}); the roles serve on "
                f"{', '.join(str(p) for p in listed)}",
                origin="router.serving-ports-differ",
            )
        )
    out.extend(validate_router_objects(ctx, old_ctx=old_ctx))
    return out


def validate_router_objects(ctx: Context, *, old_ctx: Context | None = None) -> ErrorList:
    """The one refusal about the router's objects (D26): the timeout flag in ``extraArgs`` twice,
    skipped while deleting and when the stored object (``old_ctx``) already had it."""
    out = ErrorList()
    if ctx.md.spec.router is None or ctx.deleting:
        return out
    stored = {p.origin for p in _object_problems(old_ctx)} if old_ctx is not None else set()
    out.extend(p for p in _object_problems(ctx) if p.origin not in stored)
    return out


def _object_problems(ctx: Context) -> ErrorList:
    out = ErrorList()
    router = ctx.md.spec.router
    if router is None or router.request_timeout_seconds is None:
        return out
    out.extend(
        _repeated_flags(
            router,
            FIELD_FLAGS.get(router.name, ()),
            "is rendered from spec.router.requestTimeoutSeconds on router {router}",
            "Remove one",
            origin="router.timeout-flag-twice",
        )
    )
    return out


def router_warnings(ctx: Context) -> list[str]:
    """Why the router's objects would not be rendered (D26 amended), as admission warnings: the
    deployment is admitted, its engines render and run, the router is not created and
    ``RouterReady`` is ``False`` (``RenderFailed``) saying the same. Each names the field and the
    way out. Nothing while deleting; the listener rule is silent while rule 6 (different serving
    ports) refuses, which says all it would."""
    router = ctx.md.spec.router
    if router is None or ctx.deleting:
        return []
    failures = [router_image_failure(router, ctx.settings)]
    if len({serving_port(role) for role in ctx.md.spec.roles}) <= 1:
        failures.append(listener_ports_failure(router, _listeners(ctx)))
    return [
        f"{f.field}: the router is not rendered ({f.origin}): {f.message}; the engine roles "
        "run without it"
        for f in failures
        if f is not None
    ]


def _repeated_flags(
    router: RouterSpec, flags: Sequence[str], why: str, fix: str, *, origin: str
) -> ErrorList:
    """One ``Invalid`` per ``spec.router.extraArgs[j]`` whose flag (the exact name before ``=``;
    no prefix or underscore matching) is one of ``flags``, which the router's line already
    carries."""
    out = ErrorList()
    for j, token in enumerate(router.extra_args or ()):
        flag = token.split("=", 1)[0]
        if flag in flags:
            out.append(
                errors.invalid(
                    ROUTER.child("extraArgs").index(j),
                    token,
                    f"{flag} {why.format(router=router.name)}; two values for it cannot be told "
                    f"apart. {fix}",
                    origin=origin,
                )
            )
    return out


def _listeners(ctx: Context) -> dict[str, int]:
    """Each role's container-side listener, as the renderer computes it
    (``rendering/roleplan.py``): a direct decoder's proxy takes the serving port; any other
    role listens on its own ``--port``, else on the serving port. A role whose engine cannot be
    told (a failed InstanceType read) counts as not a direct decoder."""
    out: dict[str, int] = {}
    scratch = ErrorList()
    for i, role in enumerate(ctx.md.spec.roles):
        port = serving_port(role)
        if not ctx.is_direct_decoder(i, scratch, origin="router.listener-ports-differ"):
            value, _ = own_port(ctx, role)
            own = parse_int(value) if value is not None else None
            if own is not None and 0 < own < 65536:
                port = own
        out[role.name] = port
    return out
