"""The one-pass YAML reader reads every stream as the two-pass reader did (tests/property/
yaml_oracle.py): the same values, keys in the same order, and the same refusals.

The streams are random event sequences written out by PyYAML's emitter (so every one is YAML):
odd plain and quoted scalars (y/n, octal, hex, floats, .inf, null, timestamps, ``=``), explicit
tags (the scalar ones, the refused ones, an unknown one, ``!``), anchors and aliases to scalars
and collections, merge keys (an alias, a list of aliases, an inline mapping, and what is no
mapping), keys that collide once spelled as JSON, collection keys, undefined aliases and
repeated anchors.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from yaml.events import (
    AliasEvent,
    DocumentEndEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
    StreamStartEvent,
)

from gpustack_render.cli import yamlread

from . import yaml_oracle

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
LIMITS: dict[str, int] = {"max_documents": 4, "max_depth": 6, "max_nodes": 400}

_T = "tag:yaml.org,2002:"
#: Plain scalars the YAML 1.1 table reads in every way it can (and some it leaves strings).
SCALARS = [
    *[
        "x",
        "y",
        "Y",
        "yes",
        "Yes",
        "YES",
        "n",
        "N",
        "no",
        "No",
        "NO",
        "on",
        "On",
        "ON",
        "off",
        "Off",
        "OFF",
        "true",
        "True",
        "TRUE",
        "false",
        "False",
    ],
    *["FALSE", "tRUE", "null", "Null", "NULL", "nULL", "~", "=", "!", "&", "*", "-", ".", "<<"],
    *[
        "0",
        "00",
        "0755",
        "0o17",
        "0o8",
        "08",
        "09",
        "0x1F",
        "0X1F",
        "0xg",
        "0b101",
        "0b2",
        "1_000",
        "1__0",
        "-12",
        "+7",
        "-0",
        "+0",
        "12:30",
    ],
    *[
        "1.5",
        "1.",
        ".5",
        "-.5",
        "1e3",
        "1E3",
        "1e+3",
        "1.5e-3",
        "6.02e23",
        ".inf",
        ".Inf",
        ".INF",
        "-.inf",
        "+.inf",
        ".nan",
        ".NaN",
    ],
    *[
        "nan",
        "inf",
        "2024-01-01",
        "2001-12-14t21:59:43.10-05:00",
        "1:20",
        "0x_",
        "0b_",
        "0o_",
        "3.14.15",
    ],
    "",
    "hello world",
    "a: b",
    "#x",
    "é",
    "line\nbreak",
]
#: Keys, several of which collide once spelled as the JSON the API server receives.
KEYS = ["a", "b", "c", "on", "true", "yes", "y", "1", "01", "1.0", "~", "null", "", "x"]
#: (Not ``!!value``: PyYAML retags a ``!!value`` key a string in place, breadth-first, which
#: reaches aliases of it read earlier; tests/unit/test_yamlread.py reads the plain case.)
#: (Nor ``!`` and ``!!merge``: go-yaml reads ``! 12`` and ``!!merge <<`` as strings, which
#: PyYAML's composer cannot tell from the plain scalar; tests/integration/test_yaml_kubectl.py
#: checks them against kubectl.)
SCALAR_TAGS = [
    *(_T + t for t in ("str", "int", "float", "bool", "null", "map", "seq")),
    *(_T + t for t in ("binary", "set", "timestamp", "omap", "pairs")),
    "!custom",
]
COLLECTION_TAGS = ["!", _T + "map", _T + "seq", _T + "str", _T + "set", _T + "omap", "!custom"]


@dataclass
class _Gen:
    """One stream being drawn: its events, and what aliases and merges may name."""

    draw: Any
    events: list[Any] = field(default_factory=list)
    anchors: list[str] = field(default_factory=list)  # completed, in this document
    #: Anchored mappings a merge may name: their keys are their own, so two of them never
    #: share one (PyYAML's releases disagree on which of two merged mappings wins a key).
    sources: list[tuple[str, frozenset[str]]] = field(default_factory=list)
    #: Anchored scalars that read as a merge key (``<<``, ``!!merge``): never aliased as a key,
    #: so merge keys come from :meth:`merge` only.
    merge_like: set[str] = field(default_factory=set)
    serial: int = 0

    def name(self) -> str:
        if self.anchors and self.draw(st.integers(0, 30)) == 0:
            repeated: str = self.draw(st.sampled_from(self.anchors))
            return repeated
        self.serial += 1
        return f"a{self.serial}"

    def anchor(self) -> str | None:
        return self.name() if self.draw(st.integers(0, 5)) == 0 else None

    def done(self, anchor: str | None) -> None:
        if anchor is not None:
            self.anchors.append(anchor)

    def scalar(
        self, value: str, *, anchor: str | None = None, tagged: bool = True, key: bool = False
    ) -> None:
        tag = None
        if tagged and self.draw(st.integers(0, 11)) == 0:
            tag = self.draw(st.sampled_from(SCALAR_TAGS))
        if key and (tag == _T + "merge" or value == "<<"):
            tag, value = None, "x"
        if anchor is not None and (tag == _T + "merge" or value == "<<"):
            self.merge_like.add(anchor)
        style = self.draw(st.sampled_from([None, None, None, "'", '"']))
        implicit = (tag is None, tag is None)
        self.events.append(ScalarEvent(anchor, tag, implicit, value, style=style))
        self.done(anchor)

    def alias(self, *, key: bool = False) -> bool:
        names = [a for a in self.anchors if not (key and a in self.merge_like)]
        if not names:
            return False
        if self.draw(st.integers(0, 40)) == 0:
            self.events.append(AliasEvent("undefined"))
        else:
            self.events.append(AliasEvent(self.draw(st.sampled_from(names))))
        return True

    def node(self, depth: int) -> None:
        kind = self.draw(st.integers(0, 9 if depth < 3 else 4))
        if kind == 3 and self.alias():
            return
        if kind <= 4:
            self.scalar(self.draw(st.sampled_from(SCALARS)), anchor=self.anchor())
        elif kind <= 6:
            self.sequence(depth)
        else:
            self.mapping(depth)

    def collection_tag(self) -> str | None:
        if self.draw(st.integers(0, 14)) == 0:
            tag: str = self.draw(st.sampled_from(COLLECTION_TAGS))
            return tag
        return None

    def sequence(self, depth: int) -> None:
        anchor, tag = self.anchor(), self.collection_tag()
        flow = self.draw(st.booleans())
        self.events.append(SequenceStartEvent(anchor, tag, tag is None, flow_style=flow))
        for _ in range(self.draw(st.integers(0, 3))):
            self.node(depth + 1)
        self.events.append(SequenceEndEvent())
        self.done(anchor)

    def key(self, depth: int) -> None:
        choice = self.draw(st.integers(0, 19))
        if choice == 0 and depth < 3:
            self.sequence(depth + 1)  # a collection key: refused
        elif choice == 1 and self.alias(key=True):
            pass
        else:
            self.scalar(self.draw(st.sampled_from(KEYS)), anchor=self.anchor(), key=True)

    def mapping(self, depth: int) -> None:
        anchor, tag = self.anchor(), self.collection_tag()
        if anchor is not None and tag is None and self.draw(st.booleans()):
            self.source(anchor, depth)
            return
        flow = self.draw(st.booleans())
        self.events.append(MappingStartEvent(anchor, tag, tag is None, flow_style=flow))
        merged: set[str] = set()
        for _ in range(self.draw(st.integers(0, 3))):
            if self.draw(st.integers(0, 3)) == 0:
                merged |= self.merge(depth)
                continue
            if merged and self.draw(st.integers(0, 2)) == 0:
                # An own key over a merged one: the own value wins.
                self.scalar(self.draw(st.sampled_from(sorted(merged))), tagged=False)
            else:
                self.key(depth)
            self.node(depth + 1)
        self.events.append(MappingEndEvent())
        self.done(anchor)

    def source(self, anchor: str, depth: int) -> None:
        """An anchored mapping a later merge may name: keys of its own, merges of earlier
        sources (none of whose keys it repeats)."""
        flow = self.draw(st.booleans())
        self.events.append(MappingStartEvent(anchor, None, True, flow_style=flow))
        keys: set[str] = set()
        if self.sources and self.draw(st.booleans()):
            keys |= self.merge(depth)
        for i in range(self.draw(st.integers(1, 3))):
            self.scalar(f"{anchor}k{i}", tagged=False)
            keys.add(f"{anchor}k{i}")
            self.node(depth + 1)
        self.events.append(MappingEndEvent())
        if anchor not in self.anchors:
            self.sources.append((anchor, frozenset(keys)))
        self.done(anchor)

    def merge(self, depth: int) -> set[str]:
        """A merge key and its value; the keys it merges."""
        self.events.append(ScalarEvent(None, None, (True, False), "<<", style=""))
        choice = self.draw(st.integers(0, 9))
        if choice <= 3 and self.sources:
            name, keys = self.draw(st.sampled_from(self.sources))
            self.events.append(AliasEvent(name))
            return set(keys)
        if choice <= 6 and self.sources:
            names: list[str] = []
            merged: set[str] = set()
            for name, keys in self.draw(st.permutations(self.sources))[:3]:
                if not keys & merged:
                    names.append(name)
                    merged |= keys
            self.events.append(SequenceStartEvent(None, None, True, flow_style=True))
            self.events.extend(AliasEvent(name) for name in names)
            self.events.append(SequenceEndEvent())
            return merged
        if choice <= 8:
            self.serial += 1
            inline = f"m{self.serial}"
            self.events.append(MappingStartEvent(None, None, True, flow_style=True))
            for i in range(self.draw(st.integers(0, 2))):
                self.scalar(f"{inline}k{i}", tagged=False)
                self.node(depth + 1)
            self.events.append(MappingEndEvent())
            return {f"{inline}k{i}" for i in range(3)}
        # No mapping (refused): a scalar, or a list holding one. (Not any mapping: one that
        # repeats a key of its own is merged differently by PyYAML's releases.)
        if self.draw(st.booleans()):
            self.events.append(SequenceStartEvent(None, None, True, flow_style=True))
            self.scalar(self.draw(st.sampled_from(SCALARS)))
            self.events.append(SequenceEndEvent())
        else:
            self.scalar(self.draw(st.sampled_from(SCALARS)), anchor=self.anchor())
        return set()


@st.composite
def streams(draw: Any) -> str:
    gen = _Gen(draw)
    gen.events.append(StreamStartEvent())
    for _ in range(draw(st.integers(1, 2))):
        gen.anchors, gen.sources, gen.merge_like = [], [], set()
        gen.events.append(DocumentStartEvent(explicit=True))
        gen.mapping(0)
        gen.events.append(DocumentEndEvent())
    gen.events.append(StreamEndEvent())
    text: str = yaml.emit(gen.events, allow_unicode=True)
    return text


def _outcome(read: Any, text: str) -> tuple[str, Any]:
    try:
        return "ok", read(text, **LIMITS)
    except yaml.YAMLError as exc:
        return type(exc).__name__, str(exc)
    except (ValueError, KeyError, IndexError) as exc:
        return type(exc).__name__, str(exc)


def _same(a: Any, b: Any) -> bool:
    """Equal values, keys in the same order (NaN equal to NaN)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


@SETTINGS
@given(streams())
def test_the_one_pass_reader_reads_as_the_two_pass_reader(text: str) -> None:
    got = _outcome(yamlread.load_all, text)
    want = _outcome(yaml_oracle.load_all, text)
    assert got[0] == want[0], (text, got, want)
    if got[0] == "ok":
        assert _same(got[1], want[1]), (text, json.dumps(got[1]), json.dumps(want[1]))


#: Texts shaped like go-yaml's numbers and words: signs, base prefixes in either case,
#: underscores, dots and exponents (what kubectl reads as no string, and what it reads as one).
NUMBER_LIKE = st.text("+-0123456789_.eEbBoOxXaAfF", min_size=1, max_size=8)


@SETTINGS
@given(st.one_of(NUMBER_LIKE, st.sampled_from(SCALARS)))
def test_a_string_the_writer_prints_reads_back_as_that_string(text: str) -> None:
    """The writer quotes every string kubectl would read as something else (``0X1F``,
    ``1_000.5``, ``0b-1``, ``.5_5``), so what it prints reads back the same."""
    from gpustack_render.cli import yamlio

    printed = yamlio.dump_yaml_one({"v": text, text: 1})
    assert yamlread.load_all(printed, **LIMITS) == [{"v": text, text: 1}], printed
