"""The compilation cache of a managed role (D7, D25; docs/contract/render.md §20).

A ``DirectoryOrCreate`` hostPath volume ``gpustack-compile-cache`` mounted at
``/var/lib/gpustack/cache`` on ``main``, backed on the node by

``/var/lib/gpustack/cache/<manufacturer>-<engine>/<model-identity>/tp<TP>-pp<PP>-dp<DP>-ep<EP>-cp<PCP>_<DCP>-<hash8>``

so replicas sharing an image, a model and a layout share compiled graphs, and nothing else does.
The engine finds it through ``VLLM_CACHE_ROOT`` / ``SGLANG_CACHE_DIR`` (defaulted env, owned.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, Final

from gpustack_render.core.vocabulary import EngineFamily
from gpustack_render.engines import owned
from gpustack_render.rendering.hashing import canonical_json

#: The hostPath volume's name.
VOLUME_NAME: Final = "gpustack-compile-cache"
#: The hostPath type: the kubelet creates the directory on first use.
HOST_PATH_TYPE: Final = "DirectoryOrCreate"
#: The manufacturer segment of a type that reports none (a CPU-only type).
CPU_MANUFACTURER: Final = "cpu"
#: The degree keys of the path and the hash input (D25).
DEGREE_KEYS: Final = ("tp", "pp", "dp", "ep", "pcp", "dcp")


def model_identity(model_name: str) -> str:
    """``model.name`` lowercased with every ``/`` replaced by ``--``."""
    return model_name.lower().replace("/", "--")


def cache_hash_input(
    *, image: str, model: str, engine: EngineFamily, degrees: Mapping[str, int]
) -> dict[str, Any]:
    """The object whose canonical JSON ``<hash8>`` is taken over (D25)."""
    return {
        "degrees": {key: int(degrees.get(key, 1)) for key in DEGREE_KEYS},
        "engine": engine,
        "image": image,
        "model": model,
    }


def hash8(*, image: str, model: str, engine: EngineFamily, degrees: Mapping[str, int]) -> str:
    """The first 8 hex digits of SHA-256 over the canonical JSON of :func:`cache_hash_input`."""
    data = cache_hash_input(image=image, model=model, engine=engine, degrees=degrees)
    return hashlib.sha256(canonical_json(data)).hexdigest()[:8]


def cache_path(
    *,
    manufacturer: str | None,
    engine: EngineFamily,
    model: str,
    image: str,
    degrees: Mapping[str, int],
) -> str:
    """The node path of the cache for one role (``engine`` is the engine's family: both vLLM
    backends share ``vllm``)."""
    d = {key: int(degrees.get(key, 1)) for key in DEGREE_KEYS}
    layout = f"tp{d['tp']}-pp{d['pp']}-dp{d['dp']}-ep{d['ep']}-cp{d['pcp']}_{d['dcp']}"
    digest = hash8(image=image, model=model, engine=engine, degrees=d)
    return (
        f"{owned.COMPILE_CACHE_MOUNT_PATH}/{manufacturer or CPU_MANUFACTURER}-{engine}/"
        f"{model_identity(model)}/{layout}-{digest}"
    )


def cache_volume(path: str) -> dict[str, Any]:
    """The Pod volume backing the cache at ``path`` on the node."""
    return {"name": VOLUME_NAME, "hostPath": {"path": path, "type": HOST_PATH_TYPE}}


def cache_mount() -> dict[str, Any]:
    """``main``'s mount of the cache volume."""
    return {"name": VOLUME_NAME, "mountPath": owned.COMPILE_CACHE_MOUNT_PATH}
