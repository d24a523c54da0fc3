"""The ModelDeployment admission as the API server runs it: schema, mutating half, validating
half (``docs/contract/admission.md`` §1–§4, §16).

- :func:`review_deployment` answers the whole question "would the API server accept this?":
  schema decoding (a schema error is a 422 refusal with field causes), the mutating default,
  then the validating rules on the mutated object; an admitted request carries the JSON Patch
  of the mutation (``jsonpatch.make_patch``, D18).
- :func:`mutate_deployment` and :func:`validate_deployment` are the two webhooks, for a server
  that receives objects the API server has already decoded and defaulted.
- :func:`validate_model_deployment` is the validating half on decoded objects, as an
  :class:`ErrorList`.

DELETE (and CONNECT) are always allowed. Lookups are memoised per object within one request.
"""

from __future__ import annotations

import re
from typing import Any

from gpustack_render.admission.arguments import validate_kv_cache_dtype, validate_served_name
from gpustack_render.admission.cache import validate_interfaces, validate_pool_transport
from gpustack_render.admission.context import GROUP_KIND, memoised, request_context
from gpustack_render.admission.elastic import validate_elastic_update
from gpustack_render.admission.hostaccess import validate_host_access
from gpustack_render.admission.identity import validate_identity
from gpustack_render.admission.instancetypes import validate_instance_types
from gpustack_render.admission.objectrules import qualified_name_problems, validate_object
from gpustack_render.admission.ports import validate_port_flag, validate_reserved_port_flag
from gpustack_render.admission.warnings import deployment_warnings
from gpustack_render.api.inputs import InputObject
from gpustack_render.api.modeldeployment import ModelDeployment
from gpustack_render.core import errors
from gpustack_render.core.errors import ErrorList, Verdict
from gpustack_render.core.naming import MAX_LABEL_LENGTH
from gpustack_render.core.paths import METADATA, ROLES
from gpustack_render.core.review import AdmissionRequest
from gpustack_render.core.settings import Settings
from gpustack_render.deployment.defaulting import default_accelerators
from gpustack_render.schema.decoding import decode_deployment, nesting_errors
from gpustack_render.schema.lookups import Lookups

#: Operations the webhooks judge; every other one is allowed untouched.
JUDGED = ("CREATE", "UPDATE")


def validate_model_deployment(
    md: ModelDeployment,
    *,
    old: ModelDeployment | None,
    lookups: Lookups,
    settings: Settings,
    name: str = "",
    namespace: str = "",
) -> ErrorList:
    """Every validating rule, in the order of docs/contract/admission.md §4, on the (mutated)
    ``md``.

    ``old`` is the stored object on UPDATE (``None`` on CREATE); ``name`` and ``namespace``
    stand in when the object's metadata lacks them. Never raises.
    """
    memo = memoised(lookups)
    ctx = request_context(md, lookups=memo, settings=settings, name=name, namespace=namespace)
    old_ctx = (
        request_context(old, lookups=memo, settings=settings, name=name, namespace=namespace)
        if old is not None
        else None
    )
    old_roles = {r.name: r for r in old.spec.roles} if old is not None else {}
    out = ErrorList()
    out.extend(validate_object(ctx, existing=frozenset(old_roles), old_ctx=old_ctx))
    out.extend(validate_host_access(ctx, old_roles=old_roles))
    roles = list(enumerate(md.spec.roles))
    for i, role in roles:
        out.extend(validate_port_flag(ctx, i, role, ROLES.index(i), old=old_roles.get(role.name)))
    for i, role in roles:
        out.extend(validate_reserved_port_flag(ctx, i, role, ROLES.index(i), old_ctx=old_ctx))
    for i, role in roles:
        out.extend(
            validate_served_name(
                ctx, role, ROLES.index(i), old=old_roles.get(role.name), old_ctx=old_ctx
            )
        )
    for i, role in roles:
        out.extend(validate_kv_cache_dtype(ctx, role, ROLES.index(i)))
    if old is not None:
        out.extend(validate_identity(md, old))
        out.extend(validate_elastic_update(md, old))
    out.extend(validate_instance_types(ctx))
    if not out:
        out.extend(validate_interfaces(ctx, old_ctx=old_ctx))
    if not out:
        out.extend(validate_pool_transport(ctx, old_ctx=old_ctx))
    return out


def mutation_patch(original: dict[str, Any], mutated: dict[str, Any]) -> list[dict[str, Any]]:
    """``jsonpatch.make_patch(original, mutated)`` as a list (D18).

    The mutation only ever touches ``spec.roles``, so the diff is taken over that subtree alone,
    kept at its place in the document (paths are unchanged); no mutation, no patch.
    """
    if mutated == original:
        return []
    spec, new_spec = original.get("spec"), mutated.get("spec")
    if (
        isinstance(spec, dict)
        and isinstance(new_spec, dict)
        and {k: v for k, v in original.items() if k != "spec"}
        == {k: v for k, v in mutated.items() if k != "spec"}
        and {k: v for k, v in spec.items() if k != "roles"}
        == {k: v for k, v in new_spec.items() if k != "roles"}
    ):
        original = {"spec": {"roles": spec.get("roles")}}
        mutated = {"spec": {"roles": new_spec.get("roles")}}
    import jsonpatch  # only a mutation needs it: an unchanged object imports nothing

    patch: list[dict[str, Any]] = jsonpatch.make_patch(original, mutated).patch
    return patch


def _name_of(obj: Any, request: AdmissionRequest) -> str:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) and name else request.name


def _refuse(errs: ErrorList, name: str) -> Verdict:
    return Verdict.from_errors(errs, group_kind=GROUP_KIND, name=name)


def _decode_old(request: AdmissionRequest) -> ModelDeployment | None:
    """The stored object on UPDATE; one that no longer decodes is treated as absent (its
    grandfathering and identity comparisons are then skipped rather than blocking an edit)."""
    if request.operation != "UPDATE" or request.old_object is None:
        return None
    old, _ = decode_deployment(request.old_object)
    return old


def _no_object(name: str) -> Verdict:
    errs = ErrorList(
        [errors.required("", "the request carries no object", origin="schema.violation")]
    )
    return _refuse(errs, name)


def _judged(request: AdmissionRequest) -> ModelDeployment | Verdict:
    """The request's object decoded, or the verdict that ends its review before any rule: an
    operation not judged, no object, or a schema refusal."""
    if request.operation not in JUDGED:
        return Verdict.allow()
    obj = request.object
    name = _name_of(obj, request)
    if obj is None:
        return _no_object(name)
    md, errs = decode_deployment(obj)
    if md is None:
        return _refuse(errs, name)
    return md


def review_deployment(
    request: AdmissionRequest, *, lookups: Lookups, settings: Settings
) -> Verdict:
    """Schema decoding, the mutating default, the API server's own check that a create names
    its object (``name`` or ``generateName``), then the validating rules on the mutated object.

    Allowed requests carry the patch from the schema-defaulted object to the mutated one.
    """
    md = _judged(request)
    if isinstance(md, Verdict):
        return md
    name = _name_of(request.object, request)
    memo = memoised(lookups)
    original = md.to_dict()
    mutated, errs = default_accelerators(original, lookups=memo)
    if errs:
        return _refuse(errs, name)
    if request.operation == "CREATE" and not name and not md.metadata.generate_name:
        return _refuse(NAME_REQUIRED, name)
    meta = metadata_errors(md)
    if meta:
        return _refuse(meta, name)
    if mutated != original:
        md = ModelDeployment.model_validate(mutated)
    errs = validate_model_deployment(
        md,
        old=_decode_old(request),
        lookups=memo,
        settings=settings,
        name=request.name,
        namespace=request.namespace,
    )
    return Verdict.from_errors(
        errs,
        group_kind=GROUP_KIND,
        name=name,
        patch=mutation_patch(original, mutated),
        warnings=deployment_warnings(
            md, lookups=memo, settings=settings, namespace=request.namespace
        ),
    )


#: What the API server answers a create that names no object, after the mutating webhooks and
#: before the validating ones (it generates a name from ``generateName`` at the same point, so
#: a validating webhook always sees a name).
NAME_REQUIRED = ErrorList(
    [
        errors.required(
            "metadata.name", "name or generateName is required", origin="metadata.name-required"
        )
    ]
)


#: A label value (Kubernetes ``IsValidLabelValue``), at most 63 characters.
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
#: The total size of an object's annotations, keys and values (``TotalAnnotationSizeLimitB``).
ANNOTATIONS_LIMIT = 256 * 1024


def metadata_errors(md: ModelDeployment | InputObject) -> ErrorList:
    """What the API server's own ObjectMeta validation refuses in the labels and annotations,
    after the mutating webhooks and before the validating ones (the ``review_deployment``
    question is the API server's as a whole): keys that are not qualified names, label values
    that are not label values, annotations over 256 KiB in total."""
    out = ErrorList()
    labels = METADATA.child("labels")
    for key, value in md.metadata.labels.items():
        problems = qualified_name_problems(key)
        if problems:
            out.append(errors.invalid(labels, key, "; ".join(problems), origin="metadata.invalid"))
        if len(value) > MAX_LABEL_LENGTH or not _LABEL_VALUE.fullmatch(value):
            out.append(
                errors.invalid(
                    labels,
                    value,
                    f"a valid label value must be empty or at most {MAX_LABEL_LENGTH} "
                    f"alphanumeric characters, '-', '_' or '.', starting and ending with an "
                    f"alphanumeric character",
                    origin="metadata.invalid",
                )
            )
    annotations = METADATA.child("annotations")
    total = 0
    for key, value in md.metadata.annotations.items():
        problems = qualified_name_problems(key.lower())
        if problems:
            out.append(
                errors.invalid(annotations, key, "; ".join(problems), origin="metadata.invalid")
            )
        total += len(key.encode()) + len(value.encode())
    if total > ANNOTATIONS_LIMIT:
        out.append(errors.too_long(annotations, ANNOTATIONS_LIMIT, origin="metadata.invalid"))
    return out


def mutate_deployment(
    request: AdmissionRequest, *, lookups: Lookups, settings: Settings
) -> Verdict:
    """The mutating webhook: the accelerator default as a JSON Patch of ``request.object``.

    An object the schema refuses is refused here, with the schema's causes in words (a role
    name with a capital is told what a name may hold, not the regular expression): the API
    server runs the mutating webhooks before the CRD's own schema check, whose message is the
    bare pattern, and the validating webhook would refuse the same object after it. ``settings``
    is accepted for symmetry with the validating webhook; no Setting applies.
    """
    del settings
    if request.operation not in JUDGED or request.object is None:
        return Verdict.allow()
    obj = request.object
    deep = nesting_errors(obj)  # compared and diffed below: bounded first, as decoding does
    if deep:
        return _refuse(deep, _name_of(obj, request))
    md, schema_errors = decode_deployment(obj)
    if md is None:
        return _refuse(schema_errors, _name_of(obj, request))
    mutated, errs = default_accelerators(obj, lookups=memoised(lookups))
    if errs:
        return _refuse(errs, _name_of(obj, request))
    return Verdict.allow(patch=mutation_patch(obj, mutated))


def validate_deployment(
    request: AdmissionRequest, *, lookups: Lookups, settings: Settings
) -> Verdict:
    """The validating webhook on an object the API server has decoded, defaulted and mutated."""
    md = _judged(request)
    if isinstance(md, Verdict):
        return md
    name = _name_of(request.object, request)
    errs = validate_model_deployment(
        md,
        old=_decode_old(request),
        lookups=lookups,
        settings=settings,
        name=request.name,
        namespace=request.namespace,
    )
    warnings = deployment_warnings(
        md, lookups=lookups, settings=settings, namespace=request.namespace
    )
    return Verdict.from_errors(errs, group_kind=GROUP_KIND, name=name, warnings=warnings)
