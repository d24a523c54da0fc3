"""Resource totals: what a replica asks Kueue for, the resource requests of its Pods summed as
the scheduler counts them, and written back as quantities.

A Pod requests the sum of its containers and of its sidecars (init containers that keep
running), or the largest plain init container if that is more, per resource: the figure Kueue
charges a ClusterQueue for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any

from gpustack_render.core.quantity import (
    QuantityError,
    format_binary,
    format_cpu,
    format_decimal,
    parse_quantity,
)

#: Resources written in binary units (bytes).
_BYTES = ("memory", "ephemeral-storage")
#: The order resource names are listed in; the rest follow by name.
_FIRST = ("cpu", "memory", "ephemeral-storage")

Amounts = dict[str, Fraction]


def _requests(container: Mapping[str, Any]) -> Amounts:
    resources = container.get("resources") or {}
    out: Amounts = {}
    for name, value in (resources.get("requests") or {}).items():
        try:
            out[str(name)] = parse_quantity(value)
        except QuantityError:
            continue  # admission refuses it; a total is no place to report it
    return out


def add(total: Amounts, more: Mapping[str, Fraction], *, times: int = 1) -> Amounts:
    """``total + times × more``, as a new mapping."""
    out = dict(total)
    for name, amount in more.items():
        out[name] = out.get(name, Fraction(0)) + amount * times
    return out


def pod_requests(pod: Mapping[str, Any]) -> Amounts:
    """What one Pod requests (the effective requests of its containers)."""
    spec = pod.get("spec") or {}
    running: Amounts = {}
    for container in spec.get("containers") or ():
        running = add(running, _requests(container))
    largest_init: Amounts = {}
    for init in spec.get("initContainers") or ():
        if init.get("restartPolicy") == "Always":
            running = add(running, _requests(init))
            continue
        for name, amount in _requests(init).items():
            largest_init[name] = max(largest_init.get(name, Fraction(0)), amount)
    for name, amount in largest_init.items():
        running[name] = max(running.get(name, Fraction(0)), amount)
    return running


def pods_requests(pods: Iterable[Mapping[str, Any]]) -> Amounts:
    """The sum over ``pods``."""
    total: Amounts = {}
    for pod in pods:
        total = add(total, pod_requests(pod))
    return total


def peak(*amounts: Mapping[str, Fraction]) -> Amounts:
    """Per resource, the largest of ``amounts``."""
    out: Amounts = {}
    for one in amounts:
        for name, amount in one.items():
            out[name] = max(out.get(name, Fraction(0)), amount)
    return out


def formatted(amounts: Mapping[str, Fraction]) -> dict[str, str]:
    """Quantities in the project's spelling (cores or millicores, binary units for bytes),
    ``cpu``, ``memory`` and ``ephemeral-storage`` first, then by name."""
    names = [n for n in _FIRST if n in amounts] + sorted(n for n in amounts if n not in _FIRST)
    out: dict[str, str] = {}
    for name in names:
        amount = amounts[name]
        if name == "cpu":
            out[name] = format_cpu(amount)
        elif name in _BYTES or name.startswith("hugepages-"):
            out[name] = format_binary(amount)
        else:
            out[name] = format_decimal(amount)
    return out
