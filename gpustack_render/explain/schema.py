"""The JSON Schema (draft 2020-12) of ``explain -o json``: the stable, documented form of an
explanation (docs/explain.md). ``docs/explain.schema.json`` is this dict written out; a test
keeps the two equal and validates every golden output against it.

Compatibility: within one ``schemaVersion`` keys are only ever added, never renamed, removed or
given another meaning; every object allows keys it does not list so that a reader written
against this version keeps working.
"""

from __future__ import annotations

import json
from typing import Any, Final

from gpustack_render.explain.observed import OBSERVED_JSON_SCHEMA

_STRING: Final = {"type": "string"}
_STRINGS: Final = {"type": "array", "items": _STRING}
_ORDINALS: Final = {"type": "array", "items": {"type": "integer", "minimum": 0}}
_QUANTITIES: Final = {
    "type": "object",
    "description": "resource name -> Kubernetes quantity",
    "additionalProperties": _STRING,
}


def _object(properties: dict[str, Any], required: list[str], description: str) -> dict[str, Any]:
    return {
        "type": "object",
        "description": description,
        "properties": properties,
        "required": required,
    }


_CAUSE: Final = _object(
    {"field": _STRING, "type": _STRING, "origin": _STRING, "message": _STRING},
    ["field", "type", "origin", "message"],
    "one reason admission refuses: the field path, the error type, the rule id, the message",
)

_ADMISSION: Final = _object(
    {
        "allowed": {"type": "boolean"},
        "code": {"type": "integer", "enum": [200, 403, 422, 500]},
        "reason": _STRING,
        "message": _STRING,
        "causes": {"type": "array", "items": _CAUSE},
        "warnings": _STRINGS,
    },
    ["allowed", "code", "reason", "message", "causes", "warnings"],
    "the admission verdict of the create or update",
)

_PROBLEM: Final = _object(
    {
        "side": {"enum": ["new", "old"]},
        "message": _STRING,
        "field": _STRING,
        "origin": _STRING,
    },
    ["side", "message", "field", "origin"],
    "why the new or the stored object cannot be rendered",
)

_CHANGE: Final = _object(
    {
        "source": {
            **_STRING,
            "description": "ModelDeployment, InstanceType/<name>, KVCachePoolBinding/<name>, "
            "KVCachePool/<name>, or resolved",
        },
        "path": _STRING,
        "old": {"description": "the value before (any JSON value; null when absent)"},
        "new": {"description": "the value after (any JSON value; null when absent)"},
    },
    ["source", "path", "old", "new"],
    "one input of the role's pod-spec-hash that moved",
)

_COST: Final = _object(
    {"id": {**_STRING, "pattern": "^explain\\."}, "message": _STRING},
    ["id", "message"],
    "a consequence of the edit (ids listed in docs/explain.md)",
)

_ROLE: Final = _object(
    {
        "name": _STRING,
        "kind": _STRING,
        "engine": _STRING,
        "action": {"enum": ["create", "unchanged", "scale", "roll", "floor"]},
        "replicas": {"type": "integer", "minimum": 0},
        "size": {"type": "integer", "minimum": 1},
        "instanceType": _STRING,
        "entrance": _STRING,
        "groups": _STRINGS,
        "replicaRequests": _QUANTITIES,
        "old": _object(
            {
                "replicas": {"type": "integer", "minimum": 0},
                "size": {"type": "integer", "minimum": 1},
                "instanceType": _STRING,
                "entrance": _STRING,
            },
            ["replicas", "size", "instanceType", "entrance"],
            "the role as the stored object renders it (updates only)",
        ),
        "added": _ORDINALS,
        "removed": _ORDINALS,
        "untouched": _ORDINALS,
        "replaced": _ORDINALS,
        "changes": {"type": "array", "items": _CHANGE},
        "costs": {"type": "array", "items": _COST},
    },
    [
        "name",
        "kind",
        "engine",
        "action",
        "replicas",
        "size",
        "instanceType",
        "entrance",
        "groups",
        "replicaRequests",
        "added",
        "removed",
        "untouched",
        "replaced",
        "changes",
        "costs",
    ],
    "what happens to one role",
)

_ENTRANCE: Final = _object(
    {
        "entrance": _STRING,
        "localQueue": {**_STRING, "description": "<namespace>/<name>"},
        "roles": _STRINGS,
        "before": _QUANTITIES,
        "after": _QUANTITIES,
        "peak": _QUANTITIES,
    },
    ["entrance", "localQueue", "roles", "after"],
    "what the deployment holds on one entrance (ClusterQueue of the same name)",
)

_SCALING: Final = _object(
    {
        "target": {**_STRING, "description": "the role or ratio group asked for"},
        "group": {"type": "boolean", "description": "replicas counts units of a ratio group"},
        "replicas": {"type": "integer", "minimum": 0},
        "scaler": {
            "type": ["string", "null"],
            "description": "the ModelDeploymentScaler carrying the count; null for a role its "
            "own roles[].replicas sets",
        },
        "bounds": _object(
            {"min": {"type": "integer", "minimum": 0}, "max": {"type": "integer", "minimum": 0}},
            ["min", "max"],
            "the counts the scaler accepts",
        ),
        "refused": {**_STRING, "description": "why the count cannot be set; empty when it can"},
        "roles": {
            "type": "array",
            "items": _object(
                {
                    "name": _STRING,
                    "before": {"type": "integer", "minimum": 0},
                    "after": {"type": "integer", "minimum": 0},
                    "entrance": _STRING,
                },
                ["name", "before", "after", "entrance"],
                "a role the count moves: its replicas now and at the asked count",
            ),
        },
        "entrances": {"type": "array", "items": _ENTRANCE},
        "queues": {
            "type": "array",
            "items": _object(
                {
                    "clusterQueue": _STRING,
                    "fits": {"type": "boolean"},
                    "needed": _QUANTITIES,
                    "free": _QUANTITIES,
                    "short": _QUANTITIES,
                    "uncovered": _STRINGS,
                },
                ["clusterQueue", "fits", "needed", "free", "short", "uncovered"],
                "whether what the asked count needs beyond the deployment now (needed) fits what "
                "the ClusterQueue has free now (its nominal quota less its flavorsReservation; "
                "borrowing not counted); short: by how much per resource. Present only when the "
                "ClusterQueues were read (live mode, or --observed holding them)",
            ),
        },
    },
    ["target", "group", "replicas", "scaler", "refused", "roles", "entrances"],
    "what --replicas TARGET=N needs from the queue: per entrance the deployment now (before) "
    "and at the asked count (after)",
)

EXPLAIN_JSON_SCHEMA: Final[dict[str, Any]] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "gpustack-render explain",
    **_object(
        {
            "schemaVersion": {"const": 1},
            "kind": {"const": "Explanation"},
            "deployment": _object(
                {"namespace": _STRING, "name": _STRING},
                ["namespace", "name"],
                "the deployment explained",
            ),
            "operation": {"enum": ["CREATE", "UPDATE"]},
            "admission": _ADMISSION,
            "problems": {"type": "array", "items": _PROBLEM},
            "roles": {"type": "array", "items": _ROLE},
            "entrances": {"type": "array", "items": _ENTRANCE},
            "jointAdmission": _object(
                {
                    "joint": {"type": "boolean"},
                    "roles": _STRINGS,
                    "groups": {"type": "integer", "minimum": 0},
                },
                ["joint", "roles", "groups"],
                "the groups admitted as one set",
            ),
            "renderVersion": _object(
                {
                    "current": {"type": "integer", "minimum": 1},
                    "floor": {"type": "integer", "minimum": 1},
                    "oldFloor": {"type": "integer", "minimum": 1},
                    "requested": _STRING,
                },
                ["current", "floor"],
                "this renderer's baseline and the deployment's render-version floor",
            ),
            "router": _object(
                {
                    "name": _STRING,
                    "removed": {"type": "boolean"},
                    "changes": {
                        "type": "array",
                        "items": _object(
                            {"kind": _STRING, "name": _STRING, "change": _STRING},
                            ["kind", "name", "change"],
                            "one router object the edit creates, deletes, updates or scales",
                        ),
                    },
                    "failure": {
                        **_STRING,
                        "description": "why the router's objects are not rendered; empty when "
                        "they are",
                    },
                    "enginePodsRoll": {
                        "type": "boolean",
                        "description": "whether the edit rolls any engine replica (the "
                        "router's own fields never do)",
                    },
                },
                ["name", "removed", "changes", "failure", "enginePodsRoll"],
                "what the edit does to the router's objects; present when either side declares "
                "a router",
            ),
            "notes": _STRINGS,
            "replaced": {"type": "integer", "minimum": 0},
            "rolls": {"type": "boolean"},
            "gates": _object(
                {
                    "maxReplaced": {"type": ["integer", "null"], "minimum": 0},
                    "failOn": _STRINGS,
                    "failed": _STRINGS,
                },
                ["maxReplaced", "failOn", "failed"],
                "the command line's CI gates and the ones that tripped",
            ),
            "observed": OBSERVED_JSON_SCHEMA,
            "scaling": {"type": "array", "items": _SCALING},
        },
        [
            "schemaVersion",
            "kind",
            "deployment",
            "operation",
            "admission",
            "problems",
            "roles",
            "entrances",
            "notes",
            "replaced",
            "rolls",
        ],
        "what creating or editing a ModelDeployment will do, and why",
    ),
}


def schema_text() -> str:
    """:data:`EXPLAIN_JSON_SCHEMA` as ``docs/explain.schema.json`` holds it."""
    return json.dumps(EXPLAIN_JSON_SCHEMA, indent=2, ensure_ascii=False) + "\n"
