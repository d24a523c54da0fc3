"""Which flag a command-line token is read as (admission.md §13, kv-injection.md §8).

A self-contained copy of the shared token rule, used by injection until the project-wide flag
module (``gpustack_render.flags``) lands; its one entry point, :func:`find_flag`, is what the
injection checks call, so swapping the implementation touches this module only.

The rule, for one token against an ordered key set:

1. the name is the token up to its first ``=``;
2. vLLM family only: ``_`` → ``-`` between the leading ``--`` and the first ``.``, then
   everything from the first ``.`` is dropped (a dotted member names the whole document);
3. the name must start with ``--`` and be longer than ``--``;
4. an exact match with a key is that key;
5. a name exactly equal to another flag of the engine's owned set matches nothing (so
   ``--hicache-storage-backend`` is not an abbreviation of ``…-extra-config``);
6. a name that is a prefix of a key is that key (first in order), however short.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class FlagHit:
    """A token read as one of the searched keys."""

    #: The key the engine reads the token as.
    key: str
    #: The token's name as written (cut at ``=``).
    written: str

    def spelled(self) -> str:
        """The flag itself when written exactly, else the written name and what it reads as."""
        if self.written == self.key:
            return self.key
        return f"{self.written} (read as {self.key})"


def flag_name(token: str, *, vllm_family: bool) -> str:
    """Steps 1–2: the name a token spells, before matching."""
    name = token.split("=", 1)[0]
    if vllm_family and name.startswith("--"):
        head = name[2:].split(".", 1)[0]
        name = "--" + head.replace("_", "-")
    return name


def resolve_token(
    token: str, keys: Sequence[str], *, owned: Iterable[str], vllm_family: bool
) -> FlagHit | None:
    """The key of ``keys`` that ``token`` is read as, or ``None`` (steps 1–6)."""
    name = flag_name(token, vllm_family=vllm_family)
    if not name.startswith("--") or len(name) <= 2:
        return None
    written = token.split("=", 1)[0]
    if name in keys:
        return FlagHit(name, written)
    if name in owned:
        return None
    for key in keys:
        if key.startswith(name):
            return FlagHit(key, written)
    return None


def find_flag(
    tokens: Iterable[object], keys: Sequence[str], *, owned: Iterable[str], vllm_family: bool
) -> FlagHit | None:
    """The first token (value tokens included) read as one of ``keys``."""
    owned_set = frozenset(owned)
    for token in tokens:
        if isinstance(token, str):
            hit = resolve_token(token, keys, owned=owned_set, vllm_family=vllm_family)
            if hit is not None:
                return hit
    return None
