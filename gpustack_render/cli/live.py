"""Live mode of ``explain``: read from a cluster what the offline mode takes from files.

``gpustack-render explain md/NAME -n NS [edited.yaml]`` reads (docs/explain.md, "Live mode"):

* the stored ModelDeployment ``NS/NAME`` (``GET``);
* its inputs, found as the controller finds them (:class:`~gpustack_render.reconcile.inputs.
  InputGraph`): each role's InstanceType and the KV-cache Binding, then the Binding's pool,
  then the pool's first backend (``GET`` each), for the stored object and for the edited one;
* the ``gpustack-settings`` ConfigMap of the system namespace (``GET``), read with the
  controller's policy: absent gives the defaults, a bad value keeps its default (a warning);
* the observed state: the deployment's Pods and Services (``LIST`` with its label selector),
  the namespace's Kueue Workloads that own one of those Pods or carry one of its group names
  (``LIST``, filtered here), the namespace's LocalQueues (``LIST``) and the ClusterQueue each
  points at (``GET``).

It sends ``GET`` requests only (a ``LIST`` is a ``GET`` on a collection), each with the user
agent :data:`USER_AGENT`; it never watches and never writes. Objects come back as plain dicts as
``kubectl get -o yaml`` prints them (``kind`` and ``apiVersion`` on list items, no
``managedFields``).

This is the one module of ``gpustack_render`` that talks to a server: the import contract "The
command line talks to no server" (pyproject.toml) lists it as its only exception. It sends its
requests through the shells' client (:mod:`gpustack_kube`: the kubeconfig loaded by
:func:`gpustack_kube.config.load`, the transport :class:`gpustack_kube.client.Kube`), imported
inside the functions that read a cluster, as asyncio is, so no other verb pays for them; the
paths are the library's (:mod:`gpustack_render.schema.resources`). Every failure is a
:class:`LiveError` carrying one line that names what failed and the way out; the command line
prints it and exits 2.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Awaitable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TextIO
from urllib.parse import urlencode

from gpustack_render.api.common import API_VERSION
from gpustack_render.api.modeldeployment import ModelDeployment
from gpustack_render.api.nodestore import NodeModelStore
from gpustack_render.cli.documents import skipped_kind
from gpustack_render.cli.sources import read_source
from gpustack_render.cli.yamlio import DocumentError, dump_yaml, load_located
from gpustack_render.core import naming
from gpustack_render.core.settings import (
    CONFIGMAP_NAME,
    DEFAULT_SYSTEM_NAMESPACE,
    Settings,
    settings_of_config_map,
    settings_to_data,
)
from gpustack_render.reconcile.inputs import InputGraph, Read
from gpustack_render.reconcile.keys import deployment_selector
from gpustack_render.reconcile.observed import observe_pod
from gpustack_render.reconcile.queues import cluster_queue_of
from gpustack_render.reconcile.workloads import deployment_groups, deployment_workloads
from gpustack_render.schema.decoding import decode_deployment
from gpustack_render.schema.resources import (
    CLUSTER_QUEUES,
    CONFIGMAPS,
    LOCAL_QUEUES,
    MODEL_DEPLOYMENTS,
    NODE_MODEL_STORES,
    PODS,
    READ_RESOURCES,
    SERVICES,
    WORKLOADS,
    Resource,
)
from gpustack_render.weights.nodes import listed_digests

if TYPE_CHECKING:
    from gpustack_kube.client import Kube

#: Where the objects are read from, and the way out named by the errors.
DOCS: Final = "docs/explain.md, 'Live mode'"
#: ``md/NAME`` and the spellings kubectl accepts for the kind.
_TARGET = re.compile(
    r"^(?:md|modeldeployments?)(?:\.worker\.gpustack\.ai)?/"
    r"(?P<name>[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?)$"
)
_REQUEST_TIMEOUT: Final = 30.0


def user_agent() -> str:
    """``gpustack-render-explain/<version>``: every request of the live reader carries it."""
    from gpustack_render import __version__

    return f"gpustack-render-explain/{__version__}"


class LiveError(Exception):
    """A cluster that cannot be read as asked; ``str()`` is the one line to print (exit 2)."""


@dataclass(frozen=True)
class LiveInputs:
    """What a cluster holds for one deployment, as plain dicts."""

    #: The stored ModelDeployment.
    deployment: dict[str, Any]
    #: The objects its render reads (InstanceTypes, Binding, pool, backend) and the Settings
    #: ConfigMap when there is one, in that order.
    inputs: list[dict[str, Any]]
    #: Pods, Workloads, Services, LocalQueues, ClusterQueues (the items of a ``List``).
    observed: list[dict[str, Any]]
    #: What could not be read and what was assumed instead, one line each.
    warnings: list[str] = field(default_factory=list)
    #: The Settings the controller works with (the ConfigMap's, else the defaults).
    settings: Settings = field(default_factory=Settings)
    #: Every request sent, ``"<VERB> <path>[?<query>]"``, in the order sent.
    requests: tuple[str, ...] = ()


@dataclass(frozen=True)
class LiveDocuments:
    """What ``explain`` judges in live mode, as the offline mode's documents."""

    #: The object explained: the edited file's ModelDeployment, else the stored one.
    new: dict[str, Any]
    #: The stored object when an edited file is given (``--old``), else ``None``.
    old: dict[str, Any] | None
    #: As ``INPUTS…``: the objects the render reads and the Settings ConfigMap.
    inputs: list[dict[str, Any]]
    #: As ``--observed``: the items of the List.
    observed: list[dict[str, Any]]
    warnings: list[str]
    #: The Settings in force, the system namespace included (``read_bundle`` of the ConfigMap
    #: alone would give the default system namespace).
    settings: Settings

    def input_sources(self) -> list[tuple[str, str]]:
        """:attr:`inputs` as the ``(name, text)`` sources ``documents.read_bundle`` reads."""
        return [("<cluster>", dump_yaml(self.inputs))] if self.inputs else []


def add_live_arguments(parser: argparse.ArgumentParser) -> None:
    """``--kubeconfig``, ``--context`` and ``--system-namespace`` on an argparse parser (``-n``
    is the verb's own)."""
    parser.add_argument(
        "--kubeconfig",
        metavar="PATH",
        help="live mode (md/NAME): the kubeconfig (default: $KUBECONFIG, else ~/.kube/config)",
    )
    parser.add_argument(
        "--context", help="live mode: the kubeconfig context (default: the current one)"
    )
    parser.add_argument(
        "--system-namespace",
        default=DEFAULT_SYSTEM_NAMESPACE,
        metavar="NS",
        help="live mode: the controller's namespace, whose gpustack-settings ConfigMap holds "
        f"the Settings (default: {DEFAULT_SYSTEM_NAMESPACE})",
    )


# ---- targets and kubeconfig -----------------------------------------------------------------


def live_target(operand: str) -> str | None:
    """The deployment name of ``md/NAME`` (or ``modeldeployment[s][.worker.gpustack.ai]/NAME``),
    ``None`` for anything else, a file that exists by that name included."""
    found = _TARGET.match(operand)
    if found is None or os.path.exists(operand):
        return None
    return found.group("name")


def kubeconfig_files(flag: str | None, environ: Mapping[str, str] | None = None) -> str:
    """The kubeconfig path list kubectl would read: ``--kubeconfig``, else ``$KUBECONFIG`` (a
    ``:``-separated list, merged), else ``~/.kube/config``. Raises :class:`LiveError` when no
    file of it exists."""
    from gpustack_kube.config import default_kubeconfig

    if flag:
        if not os.path.isfile(flag):
            raise LiveError(f"--kubeconfig {flag}: no such file")
        return flag
    paths = default_kubeconfig(environ)
    if not any(os.path.isfile(p) for p in paths):
        listed = (os.environ if environ is None else environ).get("KUBECONFIG", "")
        if listed:
            raise LiveError(
                f"KUBECONFIG={listed}: no such file (set KUBECONFIG or pass --kubeconfig)"
            )
        raise LiveError(f"no kubeconfig: {paths[0]} does not exist (pass --kubeconfig PATH)")
    return os.pathsep.join(paths)


# ---- what to read ---------------------------------------------------------------------------


def kubectl_form(obj: Mapping[str, Any], kind: Resource) -> dict[str, Any]:
    """``obj`` as ``kubectl get -o yaml`` prints it: ``apiVersion`` and ``kind`` set (list
    items lack them), ``metadata.managedFields`` left out."""
    out = dict(obj)
    out.setdefault("apiVersion", kind.api_version)
    out.setdefault("kind", kind.kind)
    meta = out.get("metadata")
    if isinstance(meta, Mapping) and "managedFields" in meta:
        out["metadata"] = {k: v for k, v in meta.items() if k != "managedFields"}
    return out


def _decoded(raw: Mapping[str, Any] | None, namespace: str) -> ModelDeployment | None:
    if raw is None:
        return None
    meta = raw.get("metadata")
    if isinstance(meta, Mapping) and not meta.get("namespace"):
        raw = {**raw, "metadata": {**meta, "namespace": namespace}}
    md, _ = decode_deployment(dict(raw))
    return md


def workloads_of(
    workloads: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    deployments: Iterable[ModelDeployment],
) -> list[dict[str, Any]]:
    """The namespace's Workloads that are the deployments', by the controller's own rule
    (:mod:`gpustack_render.reconcile.workloads`): owning one of ``pods`` or named after the group
    of a replica a deployment runs now (its status's count, which follows an autoscaler above
    ``roles[].replicas``)."""
    listed = list(workloads)
    uids = {observe_pod(p).uid for p in pods}
    found: dict[str, dict[str, Any]] = {}
    for md in deployments:
        for raw in deployment_workloads(
            listed,
            namespace=md.metadata.namespace,
            pod_uids=uids,
            groups=deployment_groups(md),
        ):
            found.setdefault(str(raw["metadata"]["name"]), dict(raw))
    return [found[n] for n in sorted(found)]


def settings_document(
    config_map: Mapping[str, Any] | None, system_namespace: str
) -> tuple[dict[str, Any] | None, Settings, list[str]]:
    """The Settings ConfigMap as the controller reads it: absent → the defaults; a bad value
    keeps its default and is a warning. Returns the ConfigMap carrying exactly the Settings in
    force (``None`` when absent), those Settings, and the warnings."""
    settings, errs = settings_of_config_map(config_map, system_namespace=system_namespace)
    if config_map is None:
        return None, settings, []
    warnings = [
        f"ConfigMap {system_namespace}/{CONFIGMAP_NAME}: {e.message()} (the controller keeps "
        "the default; so does explain)"
        for e in errs
    ]
    doc = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CONFIGMAP_NAME, "namespace": system_namespace},
        "data": settings_to_data(settings),
    }
    return doc, settings, warnings


# ---- the reader -----------------------------------------------------------------------------


@dataclass
class _Answer:
    status: int
    body: dict[str, Any]

    @property
    def message(self) -> str:
        text = str(self.body.get("message") or self.body.get("reason") or f"HTTP {self.status}")
        return " ".join(text.split())[:500]


class _Reader:
    """GET on one API server through the shared client; every other answer than 200 and 404 is
    a :class:`LiveError`, except where a caller asks for the answer itself."""

    def __init__(self, kube: Kube, *, where: str) -> None:
        self.kube = kube
        self.where = where
        self.sent: list[str] = []

    async def answer(self, path: str, query: Mapping[str, str] | None = None) -> _Answer:
        from gpustack_kube.client import ApiError

        self.sent.append(f"GET {path}" + (f"?{urlencode(dict(query))}" if query else ""))
        try:
            got = await self.kube.send("GET", path, query=query)
        except ApiError as exc:
            cause = exc.__cause__ or exc
            detail = str(cause) or type(cause).__name__
            raise LiveError(
                f"cannot reach the API server {self.where}: {detail} (check the kubeconfig's "
                "server, the --context and the network)"
            ) from exc
        try:
            body = got.json() if got.body else {}
        except ValueError:
            body = {}
        if got.status == 401:
            raise LiveError(
                f"the API server {self.where} refused the credentials (401 Unauthorized): log "
                "in again or pick another --context"
            )
        return _Answer(got.status, body if isinstance(body, dict) else {})

    def refused(self, what: str, answer: _Answer) -> LiveError:
        if answer.status == 403:
            return LiveError(
                f"cannot read {what}: {answer.message} (grant the read-only role of {DOCS})"
            )
        return LiveError(f"cannot read {what}: HTTP {answer.status}: {answer.message}")

    async def get(self, kind: Resource, name: str, namespace: str = "") -> dict[str, Any] | None:
        """The object; ``None`` when it does not exist; :class:`LiveError` otherwise."""
        answer = await self.answer(kind.path(namespace, name))
        if answer.status == 404:
            return None
        if answer.status != 200:
            where = f"{namespace}/{name}" if kind.namespaced else name
            raise self.refused(f"{kind.kind} {where}", answer)
        return kubectl_form(answer.body, kind)

    async def list(
        self, kind: Resource, namespace: str, *, selector: str = ""
    ) -> list[dict[str, Any]] | None:
        """The items; ``None`` when the API server does not serve the kind (404)."""
        query = {"labelSelector": selector} if selector else None
        answer = await self.answer(kind.path(namespace), query)
        if answer.status == 404:
            return None
        if answer.status != 200:
            raise self.refused(f"{kind.plural} in namespace {namespace}", answer)
        items = answer.body.get("items") or ()
        return [kubectl_form(i, kind) for i in items if isinstance(i, dict)]


async def _all(*awaitables: Awaitable[Any]) -> list[Any]:
    """``asyncio.gather``, but the first failure cancels the other reads and waits for them, so
    no request is left running (or reports an error) after the one line is printed."""
    import asyncio

    tasks = [asyncio.ensure_future(a) for a in awaitables]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


async def _connect(
    kubeconfig: str, context: str | None, timeout: float
) -> tuple[_Reader, str | None]:
    """A reader on the context's API server, and the context's namespace."""
    from gpustack_kube import config
    from gpustack_kube.client import Kube

    try:
        # A read-only tool never writes refreshed credentials back to the kubeconfig.
        loaded = await config.load(kubeconfig, context=context, persist=False)
    except config.ClusterConfigError as exc:
        raise LiveError(_kubeconfig_problem(kubeconfig, context, exc.__cause__ or exc)) from exc
    kube = Kube(loaded.configuration, user_agent=user_agent(), request_timeout=timeout)
    where = f"{loaded.configuration.host} (context {loaded.context or 'current'})"
    return _Reader(kube, where=where), loaded.namespace


def _kubeconfig_problem(kubeconfig: str, context: str | None, exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    listed = "`kubectl config get-contexts` lists them"
    if not context and "current-context" in text:
        return f"{kubeconfig}: no current context (pass --context; {listed})"
    if context and "contexts" in text:
        return f"{kubeconfig}: no context {context!r} ({listed})"
    return f"{kubeconfig}: cannot be used: {text}"


async def _read(
    reader: _Reader,
    *,
    namespace: str,
    name: str,
    edited: Mapping[str, Any] | None,
    system_namespace: str,
) -> tuple[dict[str, Any], list[dict[str, Any]], list[dict[str, Any]], list[str], Settings]:
    stored = await reader.get(MODEL_DEPLOYMENTS, name, namespace)
    if stored is None:
        raise LiveError(
            f"ModelDeployment {namespace}/{name} not found (check the name and -n; "
            f"`kubectl get modeldeployments -n {namespace}` lists them)"
        )
    warnings: list[str] = []
    deployments = []
    for label, raw in (("the stored", stored), ("the edited", edited)):
        md = _decoded(raw, namespace)
        if raw is not None and md is None:
            warnings.append(f"{label} ModelDeployment does not decode: its inputs are not read")
        if md is not None:
            deployments.append(md)
    selector = deployment_selector(name)
    (
        (inputs, input_warnings),
        config_map,
        pods,
        services,
        local_queues,
        workloads,
    ) = await _all(
        _inputs(reader, deployments),
        reader.answer(CONFIGMAPS.path(system_namespace, CONFIGMAP_NAME)),
        reader.list(PODS, namespace, selector=selector),
        reader.list(SERVICES, namespace, selector=selector),
        reader.list(LOCAL_QUEUES, namespace),
        reader.list(WORKLOADS, namespace),
    )
    warnings += input_warnings
    settings_doc, settings, settings_warnings = _settings(config_map, system_namespace)
    warnings += settings_warnings
    if settings_doc is not None:
        inputs.append(settings_doc)
    for kind, items in ((WORKLOADS, workloads), (LOCAL_QUEUES, local_queues)):
        if items is None:
            warnings.append(
                f"the API server does not serve {kind.plural}.{kind.api_version} (is Kueue "
                "installed?): none read"
            )
    pods = pods or []
    observed = [
        *pods,
        *workloads_of(workloads or (), pods, deployments),
        *(services or []),
        *(local_queues or []),
    ]
    queues, queue_warnings = await _cluster_queues(reader, local_queues or [])
    return stored, inputs, observed + queues, warnings + queue_warnings, settings


def _settings(
    answer: _Answer, system_namespace: str
) -> tuple[dict[str, Any] | None, Settings, list[str]]:
    if answer.status == 200:
        return settings_document(answer.body, system_namespace)
    doc, settings, warnings = settings_document(None, system_namespace)
    if answer.status != 404:
        warnings.append(
            f"cannot read ConfigMap {system_namespace}/{CONFIGMAP_NAME} ({answer.message}): "
            "the default Settings are assumed"
        )
    return doc, settings, warnings


async def _inputs(
    reader: _Reader, deployments: Sequence[ModelDeployment]
) -> tuple[list[dict[str, Any]], list[str]]:
    """Each deployment's inputs, round by round as its :class:`InputGraph` finds them; one read
    per object for all of them. A stored object that does not decode is left out (a warning):
    the render sees it as the controller does, as a failed read."""

    read: dict[Read, dict[str, Any] | None] = {}
    graphs = [InputGraph(md) for md in deployments]
    while pending := [r for g in graphs for r in g.pending()]:
        todo = list(dict.fromkeys(r for r in pending if r not in read))
        answers = await _all(*(_fetch(reader, r) for r in todo))
        read.update(zip(todo, answers, strict=True))
        for graph in graphs:
            for r in graph.pending():
                graph.answer(r, read[r])
    warnings: list[str] = []
    stores = await _node_stores(reader, graphs, warnings)
    unreadable = {bad.read: bad for g in graphs for bad in g.unreadable}
    warnings += [
        f"{r.kind.__name__} {r.name} does not decode ({bad.failure.reason[:200]}): left out"
        for r, bad in unreadable.items()
    ]
    objects = [obj for r, obj in read.items() if obj is not None and r not in unreadable]
    return objects + [s for s in stores if Read.of(NodeModelStore, s) not in unreadable], warnings


async def _node_stores(
    reader: _Reader, graphs: Sequence[InputGraph], warnings: list[str]
) -> list[dict[str, Any]]:
    """The NodeModelStores listing a digest a graph reads (one LIST, only when one does): the
    nodes a node-delivered Pod prefers. Not served or not readable: none (a warning)."""
    wanted = {d for g in graphs for d in g.node_store_digests()}
    if not wanted:
        return []
    answer = await reader.answer(NODE_MODEL_STORES.path(None))
    if answer.status != 200:
        warnings.append(
            f"cannot list nodemodelstores ({answer.message}): the Pods' node preference is left out"
        )
        return []
    items = [
        kubectl_form(i, NODE_MODEL_STORES)
        for i in answer.body.get("items") or ()
        if isinstance(i, dict)
    ]
    stores = [i for i in items if wanted & set(listed_digests(i))]
    for graph in graphs:
        graph.answer_node_stores(stores)
    return stores


async def _fetch(reader: _Reader, read: Read) -> dict[str, Any] | None:
    return await reader.get(READ_RESOURCES[read.kind.__name__], read.name, read.namespace)


async def _cluster_queues(
    reader: _Reader, local_queues: Sequence[Mapping[str, Any]]
) -> tuple[list[dict[str, Any]], list[str]]:
    """The ClusterQueue each LocalQueue points at; one that cannot be read is a warning."""
    names = sorted({cluster_queue_of(q) for q in local_queues} - {""})
    answers = await _all(*(reader.answer(CLUSTER_QUEUES.path(None, n)) for n in names))
    queues, warnings = [], []
    for queue, answer in zip(names, answers, strict=True):
        if answer.status == 200:
            queues.append(kubectl_form(answer.body, CLUSTER_QUEUES))
        elif answer.status == 404:
            warnings.append(f"ClusterQueue {queue} (a LocalQueue points at it) does not exist")
        else:
            warnings.append(f"cannot read ClusterQueue {queue}: {answer.message}")
    return queues, warnings


def read_live(
    *,
    kubeconfig: str | None,
    context: str | None,
    namespace: str | None,
    name: str,
    edited: Mapping[str, Any] | None = None,
    system_namespace: str = DEFAULT_SYSTEM_NAMESPACE,
    timeout: float = _REQUEST_TIMEOUT,
    environ: Mapping[str, str] | None = None,
) -> LiveInputs:
    """Read deployment ``namespace/name`` with its inputs, Settings and observed state.

    ``kubeconfig`` and ``context`` as kubectl takes them (``None``: ``$KUBECONFIG``, else
    ``~/.kube/config``; the current context); ``namespace`` ``None`` is the context's
    namespace, else ``default``. ``edited``: the edited ModelDeployment, whose inputs are read
    too (an edit may name another InstanceType). ``system_namespace``: where the controller
    runs (its Settings ConfigMap). Raises :class:`LiveError`. Not to be called from a running
    event loop (it runs its own).
    """
    import asyncio

    files = kubeconfig_files(kubeconfig, environ)

    async def run() -> LiveInputs:
        reader, context_namespace = await _connect(files, context, timeout)
        ns = namespace or context_namespace or naming.DEFAULT_NAMESPACE
        try:
            stored, inputs, observed, warnings, settings = await _read(
                reader,
                namespace=ns,
                name=name,
                edited=edited,
                system_namespace=system_namespace,
            )
        finally:
            await reader.kube.close()
        return LiveInputs(stored, inputs, observed, warnings, settings, tuple(reader.sent))

    return asyncio.run(run())


# ---- the command line's entry ---------------------------------------------------------------


def edited_deployment(
    path: str,
    stdin: TextIO,
    *,
    namespace: str,
    name: str,
    warnings: list[str] | None = None,
) -> dict[str, Any]:
    """The one ModelDeployment of the edited file ``path`` (``-`` for stdin), in ``namespace``
    when it names none. A document of a kind the command line does not read (a Namespace...,
    :func:`~gpustack_render.cli.documents.skipped_kind`) is skipped, with a line appended to
    ``warnings``. Raises :class:`LiveError` when the file cannot be read, holds anything else,
    or names another deployment."""
    try:
        source, text = read_source(path, stdin)
        located = load_located(text, source=source)
    except (ValueError, DocumentError) as exc:
        raise LiveError(str(exc)) from exc
    docs = []
    for position, doc in located:
        typed = isinstance(doc.get("apiVersion"), str) and isinstance(doc.get("kind"), str)
        skipped = skipped_kind(doc) if typed else None
        if skipped is None:
            docs.append(doc)
        elif warnings is not None:
            warnings.append(f"{source}: {position}: {skipped}")
    kinds = [f"{d.get('apiVersion')}/{d.get('kind')}" for d in docs]
    if kinds != [f"{API_VERSION}/ModelDeployment"]:
        raise LiveError(
            f"{source}: holds {', '.join(kinds) or 'nothing'}; in live mode the edited file "
            "holds exactly the ModelDeployment (its inputs are read from the cluster)"
        )
    (doc,) = docs
    meta = doc.get("metadata")
    if not isinstance(meta, dict):
        raise LiveError(f"{source}: the ModelDeployment has no metadata")
    theirs = (str(meta.get("namespace") or namespace), str(meta.get("name") or ""))
    if theirs != (namespace, name):
        raise LiveError(
            f"{source}: names ModelDeployment {theirs[0]}/{theirs[1]}, not {namespace}/{name}"
        )
    return {**doc, "metadata": {**meta, "namespace": namespace}}


def explain_live_documents(
    target: str,
    *,
    namespace: str | None,
    kubeconfig: str | None = None,
    context: str | None = None,
    edited_path: str | None = None,
    stdin: TextIO | None = None,
    system_namespace: str = DEFAULT_SYSTEM_NAMESPACE,
) -> LiveDocuments:
    """``explain md/NAME -n NS [edited.yaml]`` as the offline mode's documents.

    Without ``edited_path`` the stored object is explained (``old`` is ``None``); with it the
    edited object is explained against the stored one (``old``). Raises :class:`LiveError`
    (print it, exit 2) for a target that is not ``md/NAME`` and for anything
    :func:`read_live` or :func:`edited_deployment` refuses.
    """
    from gpustack_kube.config import context_namespace

    name = live_target(target)
    if name is None:
        raise LiveError(f"{target}: not md/NAME")
    files = kubeconfig_files(kubeconfig)
    ns = namespace or context_namespace(files, context) or naming.DEFAULT_NAMESPACE
    edited = None
    skipped: list[str] = []
    if edited_path is not None:
        edited = edited_deployment(
            edited_path, stdin or sys.stdin, namespace=ns, name=name, warnings=skipped
        )
    live = read_live(
        kubeconfig=kubeconfig,
        context=context,
        namespace=ns,
        name=name,
        edited=edited,
        system_namespace=system_namespace,
    )
    return LiveDocuments(
        new=edited if edited is not None else live.deployment,
        old=live.deployment if edited is not None else None,
        inputs=live.inputs,
        observed=live.observed,
        warnings=[*skipped, *live.warnings],
        settings=live.settings,
    )
