"""Sorting the objects of the command line's input files into a request and its lookups."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any, Final

from gpustack_render.api.common import API_VERSION, GROUP
from gpustack_render.api.inputs import InputObject
from gpustack_render.api.scaler import KIND as SCALER_KIND
from gpustack_render.cli.yamlio import DocumentError, load_located
from gpustack_render.core import errors
from gpustack_render.core.settings import CONFIGMAP_NAME, Settings, settings_from_data
from gpustack_render.schema.decoding import decode_model
from gpustack_render.schema.kinds import KINDS, MODELS, STORAGE_MODELS, STORAGE_NAMESPACED
from gpustack_render.schema.lookups import StaticLookups

#: The kind ``admit`` also judges (docs/weights.md "Admission").
ARTIFACT_KIND: Final = "ModelArtifact"


@dataclass
class Bundle:
    """Every object of the input files, by role."""

    deployments: list[dict[str, Any]] = field(default_factory=list)
    #: Every ModelArtifact as written, in file order (``admit`` judges them when the files hold
    #: no deployment; a deployment reads them through :attr:`inputs`).
    artifacts: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    inputs: list[InputObject] = field(default_factory=list)
    settings: Settings = field(default_factory=Settings)
    #: The files carried a ``gpustack-settings`` ConfigMap (``settings`` is not only defaults).
    has_settings: bool = False
    #: One line per document of a kind the command line does not read (a Namespace, a
    #: Deployment...), naming the file, the document and the kind: skipped, printed as a
    #: warning, never an error.
    skipped: list[str] = field(default_factory=list)

    def lookups(self, *, default_namespace: str = "default") -> StaticLookups:
        return StaticLookups.of(self.inputs, default_namespace=default_namespace)


def read_bundle(
    sources: list[tuple[str, str]], *, namespace: str = "", judged: Collection[str] = ()
) -> Bundle:
    """Classify the documents of ``sources`` ((name, text) pairs).

    ``judged`` names the input kinds the caller judges as requests (``admit``: ModelArtifact):
    one of them that does not decode is kept as written in its list (:attr:`Bundle.artifacts`)
    for the verdict to name the field, instead of ending the read, as long as the files hold no
    deployment (beside one it is an input, which must decode).

    ``namespace`` (``-n``) is given to every namespaced object that names none, as kubectl
    does; without it such an object is in ``default``.

    A document of a kind the command line does not read (:func:`skipped_kind`: a Namespace, a
    Deployment, a Secret, a ConfigMap other than ``gpustack-settings``...) is left out and
    listed in :attr:`Bundle.skipped`, as manifests kept for ``kubectl apply`` hold them.

    Raises :class:`DocumentError` naming the file and document for anything unreadable: a
    document without apiVersion/kind, a kind of the project's group it does not know (or one of
    its kinds under another apiVersion), a ModelDeploymentScaler, an input object that does
    not decode, or a bad Settings value.
    """
    bundle = Bundle()
    held = ""  # the first judged object that does not decode
    for source, text in sources:
        for position, doc in load_located(text, source=source):
            where = f"{source}: {position}"
            api_version = doc.get("apiVersion")
            kind = doc.get("kind")
            if not isinstance(api_version, str) or not isinstance(kind, str):
                raise DocumentError(f"{where}: has no apiVersion and kind")
            skipped = skipped_kind(doc)
            if skipped is not None:
                bundle.skipped.append(f"{where}: {skipped}")
                continue
            if api_version == "v1" and kind == "ConfigMap":
                bundle.settings = _settings(doc, where)
                bundle.has_settings = True
                continue
            storage = STORAGE_MODELS.get((api_version, kind))
            if namespace and (
                (api_version == "v1" and kind == "Pod")
                or (api_version == API_VERSION and kind in _NAMESPACED)
                or (storage is not None and kind in STORAGE_NAMESPACED)
            ):
                doc = _in_namespace(doc, namespace, where)
            if api_version == "v1" and kind == "Pod":
                bundle.pods.append(doc)
                continue
            if storage is not None:
                bundle.inputs.append(_decoded(storage, kind, doc, where))
                continue
            if api_version != API_VERSION or kind not in MODELS:
                raise DocumentError(f"{where}: {_not_ours(api_version, kind)}")
            if kind == "ModelDeployment":
                bundle.deployments.append(doc)
                continue
            if kind == SCALER_KIND:
                raise DocumentError(
                    f"{where}: a {SCALER_KIND} is not an input: the controller creates it from "
                    "the deployment's roles[].scaling or spec.scalingGroups and an autoscaler "
                    "sets its count; leave it out (explain --replicas ROLE=N says what a count "
                    "needs)"
                )
            held = held or _read_input(bundle, kind, doc, where, judged=judged)
    if held and bundle.deployments:
        raise DocumentError(held)  # beside a deployment it is an input, and must decode
    return bundle


def _read_input(
    bundle: Bundle, kind: str, doc: dict[str, Any], where: str, *, judged: Collection[str]
) -> str:
    """Add the input object ``doc`` of the project's ``kind`` to ``bundle`` (an artifact also to
    the ones ``admit`` judges). One that does not decode is refused (:class:`DocumentError`),
    unless ``admit`` judges its kind: then the refusal's words are returned, held until the
    bundle proves to hold no deployment."""
    if kind == ARTIFACT_KIND:
        bundle.artifacts.append(doc)
    model, errs = decode_model(MODELS[kind], doc)
    if model is None or not isinstance(model, InputObject):
        msgs = "; ".join(e.message() for e in errs)
        unreadable = f"{where}: {kind} cannot be read: {msgs}"
        if kind not in judged:
            raise DocumentError(unreadable)
        return unreadable
    bundle.inputs.append(model)
    return ""


def _decoded(model_type: type[Any], kind: str, doc: dict[str, Any], where: str) -> InputObject:
    """``doc`` as the read kind ``model_type``, or a :class:`DocumentError` naming it."""
    model, errs = decode_model(model_type, doc)
    if model is None or not isinstance(model, InputObject):
        msgs = "; ".join(e.message() for e in errs)
        raise DocumentError(f"{where}: {kind} cannot be read: {msgs}")
    return model


def skipped_kind(doc: dict[str, Any]) -> str | None:
    """Why the command line skips ``doc`` (a warning's words, naming its kind and name), or
    None when it reads the document or refuses it.

    Read: the project's kinds (``worker.gpustack.ai``), a ``v1`` Pod, the ``v1`` ConfigMap
    ``gpustack-settings``, and the storage kinds weight delivery reads (``v1``
    PersistentVolumeClaim and PersistentVolume, ``storage.k8s.io/v1`` StorageClass and
    CSIDriver; docs/weights.md). Refused, not skipped (:func:`read_bundle` says why): any other kind
    or version of the project's group, and a kind of the project's under another apiVersion
    (a typo there would drop the deployment or an input it names without a word). Skipped:
    every other kind, a ConfigMap of another name included.
    """
    api_version, kind = str(doc.get("apiVersion")), str(doc.get("kind"))
    meta = doc.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if api_version == "v1" and kind == "ConfigMap":
        if (meta is not None and not isinstance(meta, dict)) or name == CONFIGMAP_NAME:
            return None  # the Settings, or refused as unreadable
        return (
            f"skipped ConfigMap {name or '(no name)'}: only the ConfigMap {CONFIGMAP_NAME} "
            "carries Settings"
        )
    if (api_version == "v1" and kind == "Pod") or kind in MODELS:
        return None
    if (api_version, kind) in STORAGE_MODELS:
        return None
    if api_version.partition("/")[0] == GROUP:
        return None
    shown = f"{kind} {name}" if isinstance(name, str) and name else kind
    return f"skipped {shown} ({api_version}): gpustack-render does not read this kind"


def _not_ours(api_version: str, kind: str) -> str:
    """Why a document of the project's group, or of one of its kinds, is refused."""
    if kind in MODELS:
        return (
            f"{api_version}/{kind}: {kind} is a kind of {API_VERSION}; correct the apiVersion "
            "(the command line reads only that version)"
        )
    known = ", ".join(sorted(MODELS))
    return (
        f"unknown kind {api_version}/{kind}; the kinds of {GROUP} are {known} ({API_VERSION}) "
        "(a kind of another group is skipped; one of this group must be spelled as these)"
    )


def _settings(doc: dict[str, Any], where: str) -> Settings:
    """The Settings of the ``gpustack-settings`` ConfigMap ``doc`` (:func:`skipped_kind` skips
    a ConfigMap of another name); one whose ``metadata`` or ``data`` is no object is a
    :class:`DocumentError`."""
    meta, data = doc.get("metadata"), doc.get("data")
    for field_name, value in (("metadata", meta), ("data", data)):
        if value is not None and not isinstance(value, dict):
            err = errors.invalid(field_name, value, "must be an object")
            raise DocumentError(f"{where}: ConfigMap cannot be read: {err.message()}")
    settings, errs = settings_from_data(data or {})
    if errs:
        msgs = "; ".join(e.message() for e in errs)
        raise DocumentError(f"{where}: ConfigMap {CONFIGMAP_NAME}: {msgs}")
    return settings


#: The project's namespaced kinds.
_NAMESPACED = frozenset(info.kind for info in KINDS if info.namespaced)


def _in_namespace(doc: dict[str, Any], namespace: str, where: str) -> dict[str, Any]:
    """``doc`` in ``namespace`` (``-n``); one that names another namespace is refused, as
    kubectl refuses it (``the namespace from the provided object does not match``)."""
    meta = doc.get("metadata")
    if not isinstance(meta, dict):
        return doc
    own = meta.get("namespace")
    if not own:
        return {**doc, "metadata": {**meta, "namespace": namespace}}
    if own != namespace:
        raise DocumentError(
            f"{where}: {doc.get('kind')} {meta.get('name') or meta.get('generateName') or ''!s} "
            f"names the namespace {own!r}, not {namespace!r} as -n asks; pass -n {own} or "
            "drop -n (kubectl refuses the same)"
        )
    return doc
