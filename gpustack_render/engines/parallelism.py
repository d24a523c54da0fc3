"""The parallel-degree parser (``docs/contract/admission.md`` §14).

A role's parallel degrees are not API fields: they are read from the arguments its engine reads
(``deployment.roles.role_argv``) and, on vLLM, the ``VLLM_DP_SIZE`` variable.
Admission refuses degrees that cannot be read (``degrees.unreadable``) and a width over the card
count (``degrees.cards-mismatch``); the
renderer uses the degrees for the compile-cache path (D7, D25) and the Ascend transfer leg; the
controller publishes them in ``status.roles[].parallelism``.

:func:`parse_parallelism` never raises; an unreadable line is a result with ``error`` set.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Final, Literal, assert_never

from gpustack_render.core.vocabulary import Engine, EngineFamily
from gpustack_render.engines.flags import is_value_token

INT64_MAX: Final = 2**63 - 1
INT64_MIN: Final = -(2**63)
#: vLLM reads this variable for the data-parallel size when no flag declares one.
VLLM_DP_SIZE_ENV: Final = "VLLM_DP_SIZE"

FlagKind = Literal["degree", "mode", "wiring", "switch"]
"""``degree``: an integer; ``mode``: a boolean switch that shapes the layout; ``wiring``: a
multi-node/rank flag taking a value; ``switch``: a wiring flag taking no value."""

Source = Literal["extraArgs", "command"]


@dataclass(frozen=True)
class FlagSpec:
    """One flag of the table: its canonical spelling, aliases, listed abbreviations."""

    canonical: str
    kind: FlagKind
    #: The :class:`Degrees` attribute a degree sets.
    attr: str = ""
    aliases: tuple[str, ...] = ()
    #: Single-dash abbreviations argparse accepts by unique prefix (``-t`` for ``-tp``).
    abbreviations: tuple[str, ...] = ()
    minimum: int = 1


def _deg(
    canonical: str, attr: str, *aliases: str, abbr: tuple[str, ...] = (), minimum: int = 1
) -> FlagSpec:
    return FlagSpec(canonical, "degree", attr, aliases, abbr, minimum)


_VLLM_TABLE: Final = (
    _deg("--tensor-parallel-size", "tensor_parallel", "-tp", abbr=("-t",)),
    _deg("--pipeline-parallel-size", "pipeline_parallel", "-pp"),
    _deg("--data-parallel-size", "data_parallel", "-dp"),
    _deg("--data-parallel-size-local", "data_parallel_local", "-dpl", minimum=0),
    _deg("--elastic-ep-max-dp-size", "elastic_ep_max_dp_size"),
    _deg("--prefill-context-parallel-size", "prefill_context_parallel", "-pcp", abbr=("-pc",)),
    _deg("--decode-context-parallel-size", "decode_context_parallel", "-dcp"),
    FlagSpec("--enable-expert-parallel", "mode", aliases=("-ep",), abbreviations=("-e",)),
    FlagSpec("--nnodes", "wiring", aliases=("-n",)),
    FlagSpec("--node-rank", "wiring", aliases=("-r",)),
    FlagSpec("--master-addr", "wiring"),
    FlagSpec("--master-port", "wiring"),
    FlagSpec("--data-parallel-rank", "wiring", aliases=("-dpn",)),
    FlagSpec("--data-parallel-start-rank", "wiring", aliases=("-dpr",)),
    FlagSpec("--data-parallel-address", "wiring", aliases=("-dpa",)),
    FlagSpec("--data-parallel-rpc-port", "wiring", aliases=("-dpp",)),
    FlagSpec("--data-parallel-backend", "wiring", aliases=("-dpb",)),
    FlagSpec("--headless", "switch"),
    FlagSpec("--data-parallel-hybrid-lb", "switch", aliases=("-dph",)),
    FlagSpec("--data-parallel-external-lb", "switch", aliases=("-dpe",)),
    FlagSpec("--data-parallel-multi-port-external-lb", "switch", aliases=("-dpm",)),
)

_SGLANG_TABLE: Final = (
    _deg("--tp-size", "tensor_parallel", "--tensor-parallel-size"),
    _deg("--pp-size", "pipeline_parallel", "--pipeline-parallel-size"),
    _deg("--dp-size", "data_parallel", "--data-parallel-size"),
    _deg("--ep-size", "expert_parallel", "--expert-parallel-size", "--ep"),
    _deg("--dcp-size", "decode_context_parallel", "--decode-context-parallel-size"),
    _deg("--attn-cp-size", "attention_context_parallel", "--attention-context-parallel-size"),
    _deg("--moe-dp-size", "moe_dp_size", "--moe-data-parallel-size"),
    _deg("--dwdp-size", "dwdp_size"),
    FlagSpec("--enable-dp-attention", "mode"),
    FlagSpec("--enable-prefill-cp", "mode"),
    FlagSpec("--nnodes", "wiring"),
    FlagSpec("--node-rank", "wiring"),
    FlagSpec("--dist-init-addr", "wiring", aliases=("--nccl-init-addr",)),
)

# Canonical names used by the width rule and the load-balance reading.
ENABLE_EXPERT_PARALLEL: Final = "--enable-expert-parallel"
ENABLE_DP_ATTENTION: Final = "--enable-dp-attention"
ENABLE_PREFILL_CP: Final = "--enable-prefill-cp"
NNODES: Final = "--nnodes"


@dataclass(frozen=True)
class _Table:
    exact: Mapping[str, FlagSpec]
    abbreviations: Mapping[str, FlagSpec]
    long: tuple[tuple[str, FlagSpec], ...]


def _index(specs: Iterable[FlagSpec]) -> _Table:
    exact: dict[str, FlagSpec] = {}
    abbr: dict[str, FlagSpec] = {}
    for spec in specs:
        for spelling in (spec.canonical, *spec.aliases):
            exact[spelling] = spec
        for a in spec.abbreviations:
            abbr[a] = spec
    long = tuple((s, spec) for s, spec in exact.items() if s.startswith("--"))
    return _Table(exact, abbr, long)


_VLLM_INDEX: Final = _index(_VLLM_TABLE)
_SGLANG_INDEX: Final = _index(_SGLANG_TABLE)


def flag_table(engine: Engine) -> tuple[FlagSpec, ...]:
    """The §14 flag table of ``engine`` (the vLLM table for both vLLM backends)."""
    return _tables(engine)[0]


def _tables(engine: Engine) -> tuple[tuple[FlagSpec, ...], _Table]:
    match engine.family:
        case EngineFamily.VLLM:
            return _VLLM_TABLE, _VLLM_INDEX
        case EngineFamily.SGLANG:
            return _SGLANG_TABLE, _SGLANG_INDEX
        case _:
            assert_never(engine.family)


def canonical_of(attr: str, engine: Engine) -> str:
    """The canonical flag of a :class:`Degrees` attribute on ``engine`` (``""`` if none)."""
    for spec in flag_table(engine):
        if spec.attr == attr:
            return spec.canonical
    return ""


@dataclass(frozen=True)
class Degrees:
    """Parallel degrees; 1 when undeclared, ``data_parallel_local`` 0 (= undeclared)."""

    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    data_parallel: int = 1
    data_parallel_local: int = 0
    prefill_context_parallel: int = 1
    decode_context_parallel: int = 1
    #: SGLang ``--ep-size``; on vLLM see :meth:`Parallelism.expert_parallel_degree`.
    expert_parallel: int = 1
    attention_context_parallel: int = 1
    moe_dp_size: int = 1
    dwdp_size: int = 1
    elastic_ep_max_dp_size: int = 1


@dataclass(frozen=True)
class ParallelismError:
    """Why a role's degrees cannot be read: the canonical flag (or ``VLLM_DP_SIZE``), the
    token as written, and the problem in words."""

    flag: str
    token: str
    problem: str

    def __str__(self) -> str:
        return f"{self.flag}: {self.problem} (as written: {self.token!r})"


@dataclass(frozen=True)
class Parallelism:
    """What the parser read from one role."""

    engine: Engine
    source: Source
    degrees: Degrees = field(default_factory=Degrees)
    #: Canonical flags (and ``VLLM_DP_SIZE``) the input declared, in first-seen order.
    declared: tuple[str, ...] = ()
    #: Canonical mode flags present.
    modes: frozenset[str] = frozenset()
    #: Wiring flags present: (canonical, value or ``None``), last occurrence per flag.
    wiring: tuple[tuple[str, str | None], ...] = ()
    #: ``--nnodes`` when given and an integer.
    nnodes: int | None = None
    error: ParallelismError | None = None

    @property
    def readable(self) -> bool:
        return self.error is None

    @property
    def complete(self) -> bool:
        """Readable and free of wiring flags: the degrees alone describe one member's layout."""
        return self.error is None and not self.wiring

    @property
    def unreadable_reason(self) -> str:
        return "" if self.error is None else str(self.error)

    @property
    def data_parallel_from_env(self) -> bool:
        return VLLM_DP_SIZE_ENV in self.declared

    @property
    def load_balance(self) -> Literal["Internal", "External", "Hybrid", "MultiPort", "Unknown"]:
        """The data-parallel load-balancing mode the wiring flags select (Unknown if unreadable)."""
        if self.error is not None:
            return "Unknown"
        names = {name for name, _ in self.wiring}
        if "--data-parallel-multi-port-external-lb" in names:
            return "MultiPort"
        if "--data-parallel-hybrid-lb" in names:
            return "Hybrid"
        if "--data-parallel-external-lb" in names or "--data-parallel-rank" in names:
            return "External"
        return "Internal"

    def expert_parallel_degree(self) -> int:
        """EP as the compile-cache path counts it (D7): vLLM TP×DP with expert mode, else 1;
        SGLang ``--ep-size``."""
        d = self.degrees
        if self.engine.family is EngineFamily.VLLM:
            if ENABLE_EXPERT_PARALLEL in self.modes:
                return d.tensor_parallel * d.data_parallel
            return 1
        return d.expert_parallel

    def cache_degrees(self) -> dict[str, int]:
        """The compile-cache degrees of D7/D25: ``tp``, ``pp``, ``dp``, ``ep``, ``pcp``, ``dcp``.

        SGLang has no prefill-context degree (``pcp`` = 1). ``dp`` includes ``VLLM_DP_SIZE``.
        """
        d = self.degrees
        return {
            "dcp": d.decode_context_parallel,
            "dp": d.data_parallel,
            "ep": self.expert_parallel_degree(),
            "pcp": d.prefill_context_parallel if self.engine.family is EngineFamily.VLLM else 1,
            "pp": d.pipeline_parallel,
            "tp": d.tensor_parallel,
        }

    def width_factors(self) -> list[tuple[str, int]]:
        """The degrees behind the width (§14.3) as (canonical flag or ``VLLM_DP_SIZE``, value),
        including degrees of 1 (callers name only those above 1)."""
        d = self.degrees
        vllm = self.engine.family is EngineFamily.VLLM
        out = [
            (canonical_of("tensor_parallel", self.engine), d.tensor_parallel),
            (canonical_of("pipeline_parallel", self.engine), d.pipeline_parallel),
        ]
        dp_name = (
            VLLM_DP_SIZE_ENV
            if self.data_parallel_from_env
            else canonical_of("data_parallel", self.engine)
        )
        if vllm:
            if d.prefill_context_parallel > 1:
                out.append(
                    (
                        canonical_of("prefill_context_parallel", self.engine),
                        d.prefill_context_parallel,
                    )
                )
            if d.data_parallel_local > 1:
                out.append(
                    (canonical_of("data_parallel_local", self.engine), d.data_parallel_local)
                )
            elif d.data_parallel_local == 0:
                out.append((dp_name, d.data_parallel))
        elif not self.dp_narrowed:
            out.append((dp_name, d.data_parallel))
        return out

    @property
    def dp_narrowed(self) -> bool:
        """SGLang: DP does not widen a member (DP attention, dwdp, moe-dp or attn-cp)."""
        d = self.degrees
        return (
            ENABLE_DP_ATTENTION in self.modes
            or d.dwdp_size > 1
            or d.moe_dp_size > 1
            or d.attention_context_parallel > 1
        )

    def width(self) -> int:
        """Cards one member needs by the declared degrees (an exact, unbounded integer)."""
        out = 1
        for _, value in self.width_factors():
            out *= value
        return out


_INT = re.compile(r"^[+-]?\d+(?:_\d+)*$")


def parse_int(raw: str) -> int | None:
    """``raw`` read like Python ``int()`` (trimmed, one sign, single ``_`` between digits)."""
    text = raw.strip()
    if not _INT.match(text) or not text.isascii():
        return None
    try:
        return int(text.replace("_", ""))
    except ValueError:  # past the 4300 digits int() converts: what the engine's int() refuses
        return None


def _value_problem(raw: str, minimum: int) -> tuple[int | None, str]:
    value = parse_int(raw)
    if value is None:
        return None, f"value {raw!r} is not an integer"
    if value > INT64_MAX or value < INT64_MIN:
        return None, f"value {raw!r} is out of range (beyond a 64-bit integer)"
    if value < minimum:
        return None, f"value {value} is below its minimum {minimum}"
    return value, ""


def _normalise(name: str, vllm: bool) -> str:
    if vllm and name.startswith("--"):
        body = name[2:]
        head, dot, tail = body.partition(".")
        return "--" + head.replace("_", "-") + dot + tail
    return name


def _lookup(table: _Table, name: str) -> tuple[FlagSpec | None, bool]:
    """(spec, is_abbreviation) for a name without ``=``."""
    spec = table.exact.get(name)
    if spec is not None:
        return spec, False
    spec = table.abbreviations.get(name)
    if spec is not None:
        return spec, True
    if name.startswith("--") and len(name) > 2:
        matched = {s.canonical: s for spelling, s in table.long if spelling.startswith(name)}
        if len(matched) == 1:
            return next(iter(matched.values())), False
    return None, False


def parse_parallelism(
    argv: Sequence[str] | None,
    *,
    engine: Engine,
    env: Iterable[tuple[str, str | None]] = (),
    source: Source = "extraArgs",
) -> Parallelism:
    """Read the parallel degrees ``engine`` would read from ``argv`` and ``env`` (§14.1–§14.2).

    ``argv`` is what the role's engine reads (``deployment.roles.role_argv``, with its
    ``source``); ``env`` is the role's ``env`` as (name, value) pairs. The first problem makes
    the result unreadable (the engine stops there too); degrees are then the defaults. Results
    are immutable and memoised.
    """
    dp_env = tuple((name, value) for name, value in env if name == VLLM_DP_SIZE_ENV)
    return _parse(tuple(argv or ()), engine, dp_env, source)


@lru_cache(maxsize=2048)
def _parse(  # noqa: C901 (one left-to-right scan of argv, a branch per token shape, as argparse reads it)
    tokens: tuple[str, ...],
    engine: Engine,
    env: tuple[tuple[str, str | None], ...],
    source: Source,
) -> Parallelism:
    vllm = engine.family is EngineFamily.VLLM
    table = _tables(engine)[1]
    values: dict[str, int] = {}
    declared: list[str] = []
    modes: set[str] = set()
    wiring: dict[str, str | None] = {}

    def fail(flag: str, token: str, problem: str) -> Parallelism:
        return Parallelism(
            engine=engine, source=source, error=ParallelismError(flag, token, problem)
        )

    def declare(name: str) -> None:
        if name not in declared:
            declared.append(name)

    i = 0
    while i < len(tokens):
        token = tokens[i]
        i += 1
        if token == "--":
            break
        if not token.startswith("-") or token == "-":
            continue
        raw_name, eq, inline = token.partition("=")
        has_inline = eq == "="
        name = _normalise(raw_name, vllm)
        spec, abbreviated = _lookup(table, name)
        glued: str | None = None
        if spec is None and not has_inline and not name.startswith("--") and len(name) > 2:
            head = name[:2]
            if head in table.exact:
                spec, glued = table.exact[head], name[2:]
            elif head in table.abbreviations:
                hspec = table.abbreviations[head]
                if hspec.kind == "degree":
                    return fail(
                        hspec.canonical,
                        token,
                        f"the value glued to the abbreviation {head} is refused by argparse on "
                        f"every Python; write {hspec.canonical} <n>",
                    )
                continue
        if spec is None:
            continue
        if abbreviated and has_inline:
            if spec.kind == "degree":
                return fail(
                    spec.canonical,
                    token,
                    f"argparse accepts the abbreviation {raw_name} with =value only from "
                    f"Python 3.12; write {spec.canonical}={inline}",
                )
            continue
        if spec.kind == "mode":
            if not has_inline:
                modes.add(spec.canonical)
            continue
        if spec.kind == "switch":
            wiring[spec.canonical] = None
            continue
        value: str | None
        written = token
        if has_inline:
            value = inline
        elif glued is not None:
            value = glued
        elif i < len(tokens) and is_value_token(tokens[i]):
            value = tokens[i]
            written = f"{token} {value}"
            i += 1
        else:
            value = None
        if spec.kind == "wiring":
            wiring[spec.canonical] = value
            continue
        if value is None:
            return fail(spec.canonical, token, "the flag has no value")
        number, problem = _value_problem(value, spec.minimum)
        if number is None:
            return fail(spec.canonical, written, problem)
        values[spec.attr] = number
        declare(spec.canonical)

    if vllm:
        dp = values.get("data_parallel", 1)
        dpl_declared_zero = "data_parallel_local" in values and values["data_parallel_local"] == 0
        env_value: str | None = None
        env_seen = False
        for name, val in env:
            if name == VLLM_DP_SIZE_ENV:
                env_seen, env_value = True, val
        if env_seen and dp <= 1 and not dpl_declared_zero:
            raw = env_value or ""
            number, problem = _value_problem(raw, 1)
            if number is None:
                return fail(VLLM_DP_SIZE_ENV, f"{VLLM_DP_SIZE_ENV}={raw}", problem)
            values["data_parallel"] = number
            declare(VLLM_DP_SIZE_ENV)

    nnodes = parse_int(wiring[NNODES] or "") if wiring.get(NNODES) else None
    return Parallelism(
        engine=engine,
        source=source,
        degrees=Degrees(**values),
        declared=tuple(declared),
        modes=frozenset(modes),
        wiring=tuple(wiring.items()),
        nnodes=nnodes,
    )
