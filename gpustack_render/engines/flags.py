"""How each engine reads one flag from its command line (``docs/contract/admission.md`` §13).

One rule decides whether a token is a given flag, for admission (owned keys, ``--port``,
``--served-model-name``, ``--kv-cache-dtype``), for the renderer (does ``extraArgs`` already
carry ``--port``/``--host``/``--served-model-name``/a defaulted connector flag, D17) and for the
Pod injection webhook (docs/contract/injection-notes.md §8):

1. the name is the token up to its first ``=`` (a split value token is judged on its own and,
   not starting with ``--``, is never a flag);
2. vLLM family only: ``_`` becomes ``-`` between the leading ``--`` and the first ``.``, then
   everything from the first ``.`` is dropped (``--kv_transfer_config.kv_role=x`` reads as
   ``--kv-transfer-config``: vLLM merges dotted members into the whole document);
3. the name starts with ``--`` and is longer than ``--`` (single-dash tokens never match);
4. an exact match with a key is that key;
5. a name exactly equal to another flag the engine knows (``owned.known_flags``) matches
   nothing, so ``--hicache-storage-backend`` is not an abbreviation of ``…-extra-config``;
6. a name that is a prefix of a key is that key (first in the given order), however short
   (``--kv-transfer-conf``, ``--disaggregation-mo``) — the conservative reading of argparse's
   unique-prefix abbreviation (D22). A longer flag of the same stem never matches.

Engines are :class:`~gpustack_render.core.vocabulary.Engine` members; the spelling follows the
engine's family. Nothing here raises on odd input. Resolutions are pure and memoised (bounded LRU),
since one review asks about the same tokens many times.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from functools import lru_cache
from typing import Final, NamedTuple, assert_never

from gpustack_render.api.modeldeployment import EngineName
from gpustack_render.core.vocabulary import Engine, EngineFamily
from gpustack_render.engines.owned import known_flags

#: A token argparse reads as a negative number (a value, not an option): ``-3``, ``-.5``, ``-1.5``.
NEGATIVE_NUMBER = re.compile(r"^-\d+$|^-\d*\.\d+$")
#: The manufacturer that turns ``vLLM`` into ``vllm-ascend``.
MANUFACTURER_ASCEND: Final = "ascend"


class FlagHit(NamedTuple):
    """One occurrence of a flag: the token's position in argv and its value.

    ``value`` is the text after ``=``, else the next token when it can be a value (see
    :func:`is_value_token`), else ``None`` (the flag ends the line or is followed by a flag).
    """

    position: int
    value: str | None


def engine_of(engine_name: EngineName, manufacturer: str | None = None) -> Engine:
    """The internal engine for an API engine name (``vLLM``/``SGLang``) and a manufacturer
    (the InstanceType's, or a Pod's annotation).

    ``vLLM`` on manufacturer ``ascend`` is ``vllm-ascend`` (docs/contract/api-notes.md §13);
    SGLang never reads the manufacturer.
    """
    match engine_name:
        case "vLLM":
            return Engine.VLLM_ASCEND if manufacturer == MANUFACTURER_ASCEND else Engine.VLLM
        case "SGLang":
            return Engine.SGLANG
        case _:
            assert_never(engine_name)


def is_value_token(token: str) -> bool:
    """True when argparse would take ``token`` as an option's value (not another option)."""
    return not token.startswith("-") or NEGATIVE_NUMBER.match(token) is not None


def flag_name(token: str, engine: Engine) -> str | None:
    """Steps 1–3: the long-flag name ``engine`` reads ``token`` as, or ``None`` for no flag."""
    if not token.startswith("--"):
        return None
    name = token.partition("=")[0]
    if engine.family is EngineFamily.VLLM:
        head = name[2:].partition(".")[0]
        name = "--" + (head.replace("_", "-") if "_" in head else head)
    if len(name) <= 2:
        return None
    return name


def resolves_to(
    token: str,
    keys: Sequence[str],
    engine: Engine,
    *,
    exclude: Iterable[str] | None = None,
) -> str | None:
    """The key of ``keys`` that ``engine`` reads ``token`` as, or ``None`` (steps 1–6).

    ``exclude`` replaces the step-5 set (default: ``owned.known_flags(engine)``).
    """
    if not token.startswith("--"):
        return None
    return _resolve(token, tuple(keys), engine, None if exclude is None else frozenset(exclude))


def owned_hits(
    tokens: Iterable[str], keys: Sequence[str], engine: Engine
) -> Iterator[tuple[int, str, str]]:
    """``(index, token, key)`` for each token of ``tokens`` (a role's ``extraArgs``) that
    ``engine`` reads as one of ``keys``: what an owned-flag rule refuses."""
    for index, token in enumerate(tokens):
        key = resolves_to(token, keys, engine)
        if key is not None:
            yield index, token, key


@lru_cache(maxsize=8192)
def _resolve(
    token: str, keys: tuple[str, ...], engine: Engine, exclude: frozenset[str] | None
) -> str | None:
    name = flag_name(token, engine)
    if name is None:
        return None
    if name in keys:
        return name
    match = next((key for key in keys if key.startswith(name)), None)
    if match is None:
        return None
    others = known_flags(engine) if exclude is None else exclude
    return None if name in others else match


def find_flag(
    argv: Sequence[str],
    canonical: str,
    engine: Engine,
    *,
    exclude: Iterable[str] | None = None,
) -> list[FlagHit]:
    """Every token of ``argv`` that ``engine`` reads as ``canonical``, in order.

    The last hit is the one argparse keeps. Every token is judged, value tokens included (a
    value never starts with ``--`` in a line the engine accepts).
    """
    if not argv:
        return []
    excluded = None if exclude is None else frozenset(exclude)
    return list(_find(tuple(argv), canonical, engine, excluded))


@lru_cache(maxsize=4096)
def _find(
    argv: tuple[str, ...], canonical: str, engine: Engine, exclude: frozenset[str] | None
) -> tuple[FlagHit, ...]:
    keys = (canonical,)
    hits: list[FlagHit] = []
    for i, token in enumerate(argv):
        if not token.startswith("--") or _resolve(token, keys, engine, exclude) is None:
            continue
        if "=" in token:
            value: str | None = token.split("=", 1)[1]
        elif i + 1 < len(argv) and is_value_token(argv[i + 1]):
            value = argv[i + 1]
        else:
            value = None
        hits.append(FlagHit(i, value))
    return tuple(hits)


def has_flag(argv: Sequence[str], canonical: str, engine: Engine) -> bool:
    """True when ``argv`` carries ``canonical`` in any spelling ``engine`` reads."""
    return bool(find_flag(argv, canonical, engine))


def last_value(argv: Sequence[str], canonical: str, engine: Engine) -> str | None:
    """The value argparse keeps for a single-valued flag (the last occurrence), or ``None``."""
    hits = find_flag(argv, canonical, engine)
    return hits[-1].value if hits else None


def values_at(argv: Sequence[str], index: int, *, many: bool) -> list[str]:
    """The values of the flag at ``argv[index]``.

    ``--flag=v`` gives ``[v]``; otherwise the following value tokens — all of them up to the
    next option when ``many`` (argparse ``nargs="+"``, as vLLM's ``--served-model-name``),
    else at most one.
    """
    if not 0 <= index < len(argv):
        return []
    token = argv[index]
    if "=" in token:
        return [token.split("=", 1)[1]]
    out: list[str] = []
    for value in argv[index + 1 :]:
        if not is_value_token(value):
            break
        out.append(value)
        if not many:
            break
    return out


def spelled(token: str, key: str) -> str:
    """How a message names a matched token: the flag itself when written exactly, otherwise
    the as-written name (cut at ``=``) and the flag the engine reads it as."""
    name = token.split("=", 1)[0]
    if name == key:
        return key
    return f"{name} (read as {key})"
