"""The opt-in contract of a Pod: the label, the annotations and their accepted values.

``docs/contract/injection-notes.md`` §1. Values are exact and case-sensitive; nothing is trimmed or
case-folded. Steps 2–6 of the CREATE processing order (§2) live here: the annotation
vocabulary, the refused domain key, and the engine, manufacturer and role values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final, get_args

from gpustack_render.api.modeldeployment import EngineName
from gpustack_render.core import labels as keys
from gpustack_render.core.vocabulary import Engine, RoleKind
from gpustack_render.engines.flags import MANUFACTURER_ASCEND, engine_of
from gpustack_render.injection import refusal as r
from gpustack_render.injection.refusal import Refusal

#: Every key of the contract starts with this prefix.
PREFIX: Final = "kvcache.gpustack.ai/"

#: The only label value that opts in.
INJECT_TRUE: Final = "true"

#: Annotation, set by the author: the ``KVCachePoolBinding`` name in the Pod's namespace.
ANNOTATION_BINDING: Final = "kvcache.gpustack.ai/binding"
#: Annotation, set by the author: ``vLLM`` or ``SGLang``; never guessed from the image.
ANNOTATION_ENGINE: Final = "kvcache.gpustack.ai/engine"
#: Annotation, set by the author: ``ascend`` beside ``vLLM`` selects vLLM-Ascend.
ANNOTATION_MANUFACTURER: Final = "kvcache.gpustack.ai/manufacturer"
#: Annotation, set by the author: ``Prefill`` or ``Decode``; read by the vLLM family only.
ANNOTATION_ROLE: Final = "kvcache.gpustack.ai/role"
#: Annotation, set by the author: the target app container (required with several).
ANNOTATION_CONTAINER: Final = "kvcache.gpustack.ai/container"
#: Annotation, set by the author: ``"true"`` declares that the launch forwards appended args.
ANNOTATION_LAUNCH_ARGS_FORWARDED: Final = "kvcache.gpustack.ai/launch-args-forwarded"
#: Annotation refused whatever its value (``inject.domain-annotation``): the domain comes only
#: from the Binding.
ANNOTATION_DOMAIN: Final = "kvcache.gpustack.ai/domain"
#: Annotation written by the webhook (the injection record, §9); refused at CREATE, frozen.
ANNOTATION_INJECTED: Final = "kvcache.gpustack.ai/injected"

#: The accepted author keys, in the order messages list them (§1).
ACCEPTED_KEYS: Final[tuple[str, ...]] = (
    ANNOTATION_BINDING,
    ANNOTATION_ENGINE,
    ANNOTATION_MANUFACTURER,
    ANNOTATION_ROLE,
    ANNOTATION_CONTAINER,
    ANNOTATION_LAUNCH_ARGS_FORWARDED,
)
#: The keys only the webhook writes.
WRITTEN_KEYS: Final[tuple[str, ...]] = (keys.KV_CLIENT_CONFIG, ANNOTATION_INJECTED)

#: The engine annotation values: the API's engine names (``engines.flags.engine_of`` maps them).
ENGINE_VALUES: Final[tuple[EngineName, ...]] = get_args(EngineName)
#: The internal spelling an author sometimes writes instead of vLLM + ascend
#: (``inject.engine-ascend-spelled``).
ENGINE_ASCEND_MISSPELLING: Final = Engine.VLLM_ASCEND.value
#: Role annotation values → the internal role kind.
ROLE_VALUES: Final[dict[str, RoleKind]] = {"Prefill": RoleKind.PREFILL, "Decode": RoleKind.DECODE}
#: The only accepted forwarding declaration.
FORWARDED_TRUE: Final = "true"


@dataclass(frozen=True, slots=True)
class Contract:
    """What the Pod's annotations asked for, after steps 2–6 of §2 passed."""

    #: ``vllm`` | ``vllm-ascend`` | ``sglang``.
    engine: Engine
    #: None (no role annotation) | ``prefill`` | ``decode``; kept even on SGLang, which ignores
    #: it.
    role: RoleKind | None
    #: The raw binding annotation (``""`` when absent; ``inject.binding-required``
    #: refuses it later).
    binding: str
    #: The container annotation (``""`` = unset).
    container: str
    #: The forwarding annotation's raw value, or ``None`` when absent
    #: (``launch.forwarding-value`` is a launch step).
    forwarded: str | None


def text(value: object) -> str:
    """An annotation or label value as text (a malformed non-string is read as its ``str``)."""
    return value if isinstance(value, str) else str(value)


def opted_in(labels: Mapping[str, object]) -> bool:
    """Step 1: only the label value ``"true"`` opts a Pod in."""
    return labels.get(keys.KV_INJECT) == INJECT_TRUE


def read_contract(annotations: Mapping[str, object]) -> Contract | Refusal:
    """Steps 2–6 of §2: vocabulary (``inject.written-key-submitted``, ``inject.unknown-key``),
    domain (``inject.domain-annotation``), engine (``inject.engine-invalid``,
    ``inject.engine-ascend-spelled``), manufacturer (``inject.manufacturer-without-vllm``,
    ``inject.manufacturer-invalid``), role (``inject.role-invalid``). The first failing step wins;
    with several bad keys the first in sorted order is reported (D23)."""
    # The prefix is a DNS name, compared without regard to case (the API server accepts an
    # annotation key whose prefix has capitals): a misspelt case is refused, not ignored.
    for key in sorted(
        k for k in annotations if isinstance(k, str) and k[: len(PREFIX)].lower() == PREFIX
    ):
        if key in WRITTEN_KEYS:
            return Refusal(
                r.WRITTEN_KEY,
                f"annotation {key} is written by the KV-cache injection webhook: it records what "
                "the webhook decided, so a submitted value would record a decision nobody made; "
                "remove it",
            )
        if key not in ACCEPTED_KEYS and key != ANNOTATION_DOMAIN:
            accepted = ", ".join(ACCEPTED_KEYS)
            return Refusal(
                r.UNKNOWN_KEY,
                f"annotation {key} is not a KV-cache injection key (accepted: {accepted}); an "
                "ignored key would leave the Pod configured unlike its manifest; fix the key",
            )
    if ANNOTATION_DOMAIN in annotations:
        return Refusal(
            r.DOMAIN,
            f"annotation {ANNOTATION_DOMAIN} is refused: the reuse domain comes only from the "
            f"KVCachePoolBinding named by {ANNOTATION_BINDING}; a namespace needing two "
            "boundaries creates two Bindings",
        )
    name = _engine(annotations)
    if isinstance(name, Refusal):
        return name
    engine = engine_of(name)
    if ANNOTATION_MANUFACTURER in annotations:
        manufacturer = text(annotations[ANNOTATION_MANUFACTURER])
        if engine != Engine.VLLM:
            return Refusal(
                r.MANUFACTURER_ENGINE,
                f"annotation {ANNOTATION_MANUFACTURER} is only accepted with engine vllm "
                f'({ANNOTATION_ENGINE}="vLLM"); this Pod declares engine {engine}',
            )
        if manufacturer != MANUFACTURER_ASCEND:
            return Refusal(
                r.MANUFACTURER_VALUE,
                f"annotation {ANNOTATION_MANUFACTURER} has value {manufacturer!r}: it must be "
                f"{MANUFACTURER_ASCEND!r} with engine vllm (selects the vllm-ascend runtime), or "
                "be left off",
            )
        engine = engine_of(name, manufacturer)
    role_value = text(annotations.get(ANNOTATION_ROLE, ""))
    if role_value and role_value not in ROLE_VALUES:
        return Refusal(
            r.ROLE,
            f"annotation {ANNOTATION_ROLE} has value {role_value!r}: accepted values are "
            '"Prefill" and "Decode"; leave it off for a plain server',
        )
    forwarded = annotations.get(ANNOTATION_LAUNCH_ARGS_FORWARDED)
    return Contract(
        engine=engine,
        role=ROLE_VALUES.get(role_value),
        binding=text(annotations.get(ANNOTATION_BINDING, "")),
        container=text(annotations.get(ANNOTATION_CONTAINER, "")),
        forwarded=None if forwarded is None else text(forwarded),
    )


def _engine(annotations: Mapping[str, object]) -> EngineName | Refusal:
    if ANNOTATION_ENGINE not in annotations:
        return Refusal(
            r.ENGINE,
            f"annotation {ANNOTATION_ENGINE} is required: accepted values [vLLM SGLang]; the "
            "engine is declared, never guessed from the image",
        )
    value = text(annotations[ANNOTATION_ENGINE])
    if value == ENGINE_ASCEND_MISSPELLING:
        return Refusal(
            r.ENGINE_ASCEND,
            f"annotation {ANNOTATION_ENGINE} has value {value!r}, which is not an engine value: "
            f'set {ANNOTATION_ENGINE}="vLLM" with {ANNOTATION_MANUFACTURER}="ascend"',
        )
    name = next((n for n in ENGINE_VALUES if n == value), None)
    if name is None:
        return Refusal(
            r.ENGINE,
            f"annotation {ANNOTATION_ENGINE} has value {value!r}: accepted values [vLLM SGLang]; "
            "the engine is declared, never guessed from the image",
        )
    return name
