"""Names a deployment's objects take (``names.*``, ``roles.duplicate-name``;
``docs/contract/admission.md`` §5 R11–R14): unique role names, Service names that are DNS-1035
labels and claimed once, member hostnames that are DNS-1123 labels, qualified label keys."""

from __future__ import annotations

import re
from typing import Final

from gpustack_render.admission.context import Context
from gpustack_render.core import errors
from gpustack_render.core.errors import ErrorList
from gpustack_render.core.naming import (
    MAX_LABEL_LENGTH,
    deployment_service_name,
    instance_name,
    is_dns1035_label,
    is_dns1123_label,
    member_name,
    role_service_name,
    router_service_name,
)
from gpustack_render.core.paths import ROLES
from gpustack_render.deployment.scaling import most_replicas

# Matched whole (``fullmatch``): ``$`` alone also matches before a trailing newline.
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_DNS1035_MESSAGE: Final = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character"
)
_DNS1123_MESSAGE: Final = (
    "a DNS-1123 label must consist of lower case alphanumeric characters or '-', and must start "
    "and end with an alphanumeric character"
)


def validate_unique_names(ctx: Context) -> ErrorList:
    """``roles.duplicate-name``: a later duplicate role name (the schema refuses it first; this
    is the backstop)."""
    out = ErrorList()
    first: dict[str, int] = {}
    for i, role in enumerate(ctx.md.spec.roles):
        if role.name in first:
            out.append(
                errors.duplicate(
                    ROLES.index(i).child("name"),
                    role.name,
                    f"already the name of {ROLES.index(first[role.name])}; replicas of two "
                    f"roles of one name would join the same Kueue pod groups",
                    origin="roles.duplicate-name",
                )
            )
        else:
            first[role.name] = i
    return out


def validate_service_names(ctx: Context, *, existing: frozenset[str]) -> ErrorList:
    """``names.invalid-service-name``: ``<md>-<role>`` must be a DNS-1035 label (roles of the stored
    object exempt)."""
    out = ErrorList()
    for i, role in enumerate(ctx.md.spec.roles):
        if role.name in existing:
            continue
        service = role_service_name(ctx.name, role.name)
        if is_dns1035_label(service):
            continue
        problems = []
        if len(service) > MAX_LABEL_LENGTH:
            problems.append(f"must be no more than {MAX_LABEL_LENGTH} characters")
        if not re.match(r"^[a-z]([-a-z0-9]*[a-z0-9])?$", service):
            problems.append(_DNS1035_MESSAGE)
        out.append(
            errors.invalid(
                ROLES.index(i).child("name"),
                role.name,
                f"the role's Service would be named {service!r} ({len(service)} characters), "
                f"which is not a valid Service name: {'; '.join(problems)}. Shorten or rename "
                f"the role or the deployment",
                origin="names.invalid-service-name",
            )
        )
    return out


#: A role name of the shape ``<role>-r<ordinal>`` (canonical decimal ordinal), the only shape
#: whose role Service can equal an instance Service ``<md>-<role>-r<ordinal>`` of another role.
_INSTANCE_SHAPED = re.compile(r"(?P<role>.+)-r(?P<ordinal>0|[1-9][0-9]*)")


def _contested_ordinals(ctx: Context) -> dict[str, set[int]]:
    """Per role name, the ordinals whose instance Service another claim can also produce.

    An instance Service ``<md>-<role>-r<o>`` is longer than ``<md>``, cannot be ``<md>-router``,
    and equals another role's instance Service only for a repeated role name (whose role Service
    is claimed twice first); so only a role named ``<role>-r<o>`` can contest it. Claiming just
    these keeps ``names.service-name-claimed-twice`` linear in the number of roles instead of in
    Σ replicas: a request with thousands of roles must be answered within the webhook's timeout
    too.
    """
    out: dict[str, set[int]] = {}
    for role in ctx.md.spec.roles:
        m = _INSTANCE_SHAPED.fullmatch(role.name)
        if m is not None:
            out.setdefault(m["role"], set()).add(int(m["ordinal"]))
    return out


def validate_service_collisions(ctx: Context) -> ErrorList:
    """``names.service-name-claimed-twice``: a Service name claimed twice; the later claimant (a
    role) is refused."""
    out = ErrorList()
    claims: dict[str, str] = {deployment_service_name(ctx.name): "the deployment's Service"}
    if ctx.router is not None:
        claims.setdefault(router_service_name(ctx.name), "the router's Service")
    contested = _contested_ordinals(ctx)
    for i, role in enumerate(ctx.md.spec.roles):
        mine = [(role_service_name(ctx.name, role.name), f"the Service of role {role.name!r}")]
        if role.size > 1:
            mine.extend(
                (
                    instance_name(ctx.name, role.name, o),
                    f"the instance {o} Service of role {role.name!r}",
                )
                for o in sorted(contested.get(role.name, ()))
                if o < role.replicas
            )
        reported = False
        for service, claimant in mine:
            other = claims.get(service)
            if other is None:
                claims[service] = claimant
                continue
            if not reported:
                reported = True
                out.append(
                    errors.invalid(
                        ROLES.index(i).child("name"),
                        role.name,
                        f"the Service name {service!r} is claimed by {other} and by "
                        f"{claimant}; rename this role",
                        origin="names.service-name-claimed-twice",
                    )
                )
    return out


def validate_member_names(ctx: Context) -> ErrorList:
    """``names.member-name-too-long``: above size 1 the longest member name must be a DNS-1123 label
    (a hostname)."""
    out = ErrorList()
    for i, role in enumerate(ctx.md.spec.roles):
        if role.size <= 1:
            continue
        # An autoscaled role may reach its upper bound: its names must fit there too.
        highest = max(most_replicas(ctx.md, role) - 1, 0)
        longest = member_name(ctx.name, role.name, highest, role.size - 1)
        if is_dns1123_label(longest):
            continue
        bound = " (or a lower scaling bound)" if highest >= role.replicas else ""
        why = (
            f"longer than {MAX_LABEL_LENGTH} characters"
            if len(longest) > MAX_LABEL_LENGTH
            else _DNS1123_MESSAGE
        )
        out.append(
            errors.invalid(
                ROLES.index(i),
                longest,
                f"the longest member name {longest!r} ({len(longest)} characters) is not a "
                f"hostname: {why}. Shorten the role, shorten the deployment, or declare fewer "
                f"replicas{bound}",
                origin="names.member-name-too-long",
            )
        )
    return out


def qualified_name_problems(value: str) -> list[str]:
    """Why ``value`` is not a qualified label key (Kubernetes ``IsQualifiedName``)."""
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            return ["prefix part must be non-empty"]
        problems = []
        if len(prefix) > 253:
            problems.append("prefix part must be no more than 253 characters")
        if not _DNS1123_SUBDOMAIN.fullmatch(prefix):
            problems.append(
                "prefix part a lowercase RFC 1123 subdomain must consist of lower case "
                "alphanumeric characters, '-' or '.', and must start and end with an "
                "alphanumeric character"
            )
        if problems:
            return problems + _name_problems(name)
    else:
        return [
            "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and "
            "must start and end with an alphanumeric character, with an optional DNS subdomain "
            "prefix and '/'"
        ]
    return _name_problems(name)


def _name_problems(name: str) -> list[str]:
    if not name:
        return ["name part must be non-empty"]
    problems = []
    if len(name) > MAX_LABEL_LENGTH:
        problems.append(f"name part must be no more than {MAX_LABEL_LENGTH} characters")
    if not _QUALIFIED_NAME.fullmatch(name):
        problems.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
            "and end with an alphanumeric character"
        )
    return problems
