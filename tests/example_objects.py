"""What the controller renders from the bundled examples, for the tests that check names
against them (docs/autoscaling.md's objects, the autoscaling examples' targets)."""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from gpustack_render.api.inputs import InputObject
from gpustack_render.core.settings import Settings
from gpustack_render.rendering.renderer import render
from gpustack_render.schema.decoding import decode_deployment, decode_model
from gpustack_render.schema.kinds import INPUT_MODELS, STORAGE_MODELS
from gpustack_render.schema.lookups import StaticLookups


def rendered_scalers(docs: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ModelDeploymentScalers the ModelDeployments among ``docs`` render, with the input
    objects among ``docs`` (InstanceTypes, artifacts, claims …) as their inputs."""
    docs = list(docs)
    types: list[InputObject] = []
    for doc in docs:
        model = INPUT_MODELS.get(doc["kind"]) or STORAGE_MODELS.get(
            (doc.get("apiVersion", ""), doc["kind"])
        )
        if model is not None:
            found, errs = decode_model(model, doc)
            assert isinstance(found, InputObject), errs
            types.append(found)
    out: list[dict[str, Any]] = []
    for doc in docs:
        if doc["kind"] != "ModelDeployment":
            continue
        md, errs = decode_deployment(copy.deepcopy(doc))
        assert md is not None, errs
        out += render(md, lookups=StaticLookups.of(types), settings=Settings()).scalers
    return out
