"""The YAML reader reads what kubectl reads: a differential test against kubectl's own converter.

``hack/envtest/build.sh`` builds ``yaml2json`` (hack/envtest/yaml2json/) against the
sigs.k8s.io/yaml and go.yaml.in/yaml/v2 releases kubectl v1.35.4 is built with; it answers each
YAML document with the JSON ``sigs.k8s.io/yaml.YAMLToJSON`` gives (what ``kubectl apply``
sends) or its error. Hypothesis writes documents from a grammar of tricky scalars (every
spelling of the booleans, integers in every base with signs and underscores, octal-looking
ones, floats, ``.inf``/``.nan``, exponents, dates, nulls, colons, ``<<``; plain, quoted and
under explicit tags), keys of every kind, nested mappings and lists in block and flow style,
anchors and aliases and merge keys, and the reader's value must be kubectl's: strings exactly,
booleans as booleans, numbers numerically (an int equals the float of its value), null, the
same structure and keys. Where kubectl refuses a document, so must the reader.

The reader refuses some documents kubectl reads, on purpose (:data:`DELIBERATE`, each pinned
by :func:`test_each_deliberate_refusal_is_one_kubectl_reads`): a repeated key (kubectl keeps
the last, or a random one of keys that collide once spelled), a redefined anchor, a tag that
contradicts its node or has no JSON type (``!!binary``, ``!!timestamp``, ``!!set``, an unknown
``!tag``: kubectl ignores it or reads the text), and ``!!merge`` on a key other than ``<<``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from gpustack_render.cli import yamlread

from .controlplane import ControlPlaneError, locate_bin_dir

pytestmark = [pytest.mark.integration]

#: Examples of the CI run (one Go process answers all of them); GPUSTACK_YAMLDIFF_EXAMPLES
#: raises it for a long run.
EXAMPLES = int(os.environ.get("GPUSTACK_YAMLDIFF_EXAMPLES", "300"))
LIMITS: dict[str, int] = {"max_documents": 2, "max_depth": 50, "max_nodes": 100_000}

Convert = Callable[[str], tuple[bool, Any]]


@pytest.fixture(scope="module")
def kubectl_yaml() -> Iterator[Convert]:
    """``text -> (True, kubectl's JSON value)`` or ``(False, its error)``, from one process."""
    try:
        tool = locate_bin_dir(build=True, what="yaml2json") / "yaml2json"
    except ControlPlaneError as exc:
        pytest.fail(f"yaml2json unavailable: {exc}", pytrace=False)
    assert os.access(tool, os.X_OK), f"no yaml2json in {tool.parent} (hack/envtest/build.sh)"
    proc = subprocess.Popen(
        [str(tool)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout

    def convert(text: str) -> tuple[bool, Any]:
        stdin.write(json.dumps(text) + "\n")
        stdin.flush()
        answer = json.loads(stdout.readline())
        if "error" in answer:
            return False, answer["error"]
        return True, answer["json"]

    try:
        yield convert
    finally:
        stdin.close()
        proc.wait(timeout=10)


# --- what the reader reads, compared with kubectl's JSON --------------------------------------


def ours(text: str) -> tuple[bool, Any]:
    try:
        docs = yamlread.load_all(text, **LIMITS)
    except (yaml.YAMLError, yamlread.LimitError) as exc:
        return False, str(exc)
    return True, docs[0] if docs else None


def same(mine: Any, theirs: Any, path: str = "$") -> str | None:
    """Where ``mine`` (the reader's value) differs from ``theirs`` (kubectl's JSON), or None."""
    if isinstance(theirs, dict):
        if not isinstance(mine, dict):
            return f"{path}: {mine!r} is no mapping ({theirs!r})"
        if set(mine) != set(theirs):
            return f"{path}: keys {sorted(mine)} != {sorted(theirs)}"
        for key in theirs:
            found = same(mine[key], theirs[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(theirs, list):
        if not isinstance(mine, list) or len(mine) != len(theirs):
            return f"{path}: {mine!r} != {theirs!r}"
        for i, (a, b) in enumerate(zip(mine, theirs, strict=True)):
            found = same(a, b, f"{path}[{i}]")
            if found:
                return found
        return None
    if isinstance(theirs, bool) or theirs is None or isinstance(theirs, str):
        ok = type(mine) is type(theirs) and mine == theirs
    else:  # a JSON number: an int and a float of one value are equal
        ok = type(mine) in (int, float) and (
            mine == theirs if type(mine) is type(theirs) else float(mine) == float(theirs)
        )
    return None if ok else f"{path}: {mine!r} != {theirs!r}"


#: The reader's refusals of documents kubectl reads, by a fragment of the message.
DELIBERATE = (
    "found duplicate key",
    "found duplicate anchor",
    "has no JSON form (the API server reads JSON)",  # !!binary !!timestamp !!set !!omap !!pairs
    "could not determine a constructor for the tag",  # !custom, !!merge on another key
    "expected a scalar node, but found",  # !!str {...}: a tag that contradicts its node
    "expected a sequence node, but found",
    "expected a mapping, found",
)
#: And of what kubectl cannot send as JSON (an infinity, a null key) where a merge writes over
#: it before kubectl converts the mapping: the reader refuses it wherever it is written.
DELIBERATE_IN_MERGES = (
    "JSON has no infinity or NaN",
    "a null key has no JSON form",
    "kubectl refuses an integer key",
)


def check(convert: Convert, text: str) -> str:
    """Fails unless the reader and kubectl agree on ``text``; says how they did."""
    k_ok, k_value = convert(text)
    r_ok, r_value = ours(text)
    if k_ok and r_ok:
        found = same(r_value, k_value)
        if found is not None and _random_pick(convert, text, r_value):
            return "kubectl picks at random, once the reader's way"
        assert found is None, f"{text!r}: {found}"
        return "both read it"
    if k_ok:
        allowed = DELIBERATE + (DELIBERATE_IN_MERGES if "<<" in text else ())
        assert any(f in r_value for f in allowed), (
            f"{text!r}: kubectl reads {k_value!r}, the reader refuses it: {r_value}"
        )
        return "a deliberate refusal"
    assert not r_ok, f"{text!r}: kubectl refuses it ({k_value}), the reader reads {r_value!r}"
    return "both refuse it"


def _random_pick(convert: Convert, text: str, mine: Any) -> bool:
    """Whether kubectl reads ``text`` the reader's way on one of 20 more tries: keys that are
    different Go values but one JSON spelling (a merged ``0`` and an own ``'0'``) leave
    sigs.k8s.io/yaml a map whose order Go randomises, so the key kubectl keeps is random."""
    for _ in range(20):
        ok, value = convert(text)
        if ok and same(mine, value) is None:
            return True
    return False


# --- the grammar ------------------------------------------------------------------------------


def _casings(word: str) -> list[str]:
    return sorted(
        {word, word.lower(), word.upper(), word.capitalize(), word[:-1] + word[-1].upper()}
    )


WORDS = [c for w in ("y", "n", "yes", "no", "on", "off", "true", "false") for c in _casings(w)]
NULLS = ["~", "null", "Null", "NULL", "nULL", "nil", "None"]
SPECIAL = [
    *[s + w for s in ("", "+", "-") for w in (".inf", ".Inf", ".INF", ".iNf", ".nan", ".NaN")],
    *["inf", "nan", "Infinity", "NaN", "1e400", "-1e400", "1e-400", ".1e400", "1e308"],
    *["9223372036854775807", "9223372036854775808", "-9223372036854775808"],
    *["-9223372036854775809", "18446744073709551615", "18446744073709551616"],
    *["0xFFFFFFFFFFFFFFFF", "0x10000000000000000", "0x8000000000000000", "-0x8000000000000000"],
    *["0777777777777777777777777", "0b" + "1" * 64, "0b-1", "0b+1", "-0b-1", "0b_", "0x_"],
    *["2024-01-01", "2024-1-2", "2001-12-14t21:59:43.10-05:00", "2001-12-14 21:59:43.10"],
    *["2024-13-45", "1234-", "12:30", "1:20", "-1:30", "1:2:3", "a:b", "::x", "190:20:30"],
    *["<<", "=", "x", "+", "-x", ".", "..", "._", "_1", "1_", "__", "0", "00", "-0", "+0"],
    *["0.0", "-0.0", "1.", "-.5", "+.5", ".5", ".5e3", ".e3", "1e3", "1E3", "1e+3", "1e-3"],
    *["1.5e10", "0.1", "1.0", "6.02e23", "1234567", "123456.7", "0.0001", "0.00001", "3.4e39"],
    *[
        ".0_0",
        ".5_",
        "._5",
        ".5_5e1_0",
        ".5e_1",
        "1e",
        "e3",
        "1e3.5",
        "1_000",
        "1_000.5",
        "1e1_0",
        "0x1p3",
        "0x1.8p1",
        "1__0",
        "+-1",
    ],
]


@st.composite
def number(draw: st.DrawFn) -> str:
    """Integers in every base (either case of the prefix), with signs and underscores, and
    floats; digits out of their base now and then."""
    sign = draw(st.sampled_from(["", "", "+", "-"]))
    kind = draw(st.sampled_from(["dec", "oct", "0o", "hex", "bin", "float", "exp"]))
    alphabet = {
        "dec": "0123456789",
        "oct": "01234567",
        "0o": "01234567",
        "hex": "0123456789abcdefABCDEF",
        "bin": "01",
        "float": "0123456789",
        "exp": "0123456789",
    }[kind]
    wrong = draw(st.sampled_from(["", "", "", "", "8", "9", "g", "_", "__"]))
    digits = draw(st.text(alphabet + "_" + wrong, min_size=0, max_size=6))
    prefix = {
        "dec": "",
        "oct": "0",
        "0o": draw(st.sampled_from(["0o", "0O"])),
        "hex": draw(st.sampled_from(["0x", "0X"])),
        "bin": draw(st.sampled_from(["0b", "0B"])),
        "float": "",
        "exp": "",
    }[kind]
    if kind == "float":
        digits += "." + draw(st.text("0123456789_", max_size=4))
    if kind == "exp":
        digits += draw(st.sampled_from(["e", "E"])) + draw(st.sampled_from(["", "+", "-"]))
        digits += draw(st.text("0123456789", min_size=0, max_size=3))
    return sign + prefix + digits


SCALAR_TEXT = st.one_of(
    st.sampled_from(WORDS),
    st.sampled_from(NULLS),
    st.sampled_from(SPECIAL),
    number(),
    st.text("ab:-. #'\"", min_size=1, max_size=5),
)
TAGS = ["!!str", "!!int", "!!float", "!!bool", "!!null", "!"]
RARE_TAGS = ["!!binary", "!!timestamp", "!custom", "!!merge", "!!set", "!!map", "!!seq"]
#: Keys the reader cannot read as kubectl does, left out of the grammar: two NaN keys are two
#: Go map keys, both spelled ``.nan``, of which kubectl keeps one at random; ``-0.0`` and
#: ``0.0`` are one Go map key, spelled as the last one written (the reader keeps ``-0`` and
#: ``0`` apart). docs/cli.md names both.
UNMATCHED_KEYS = re.compile(r"(?i).*nan|(?:!!float )?-[0_.]*(?:e.*)?$")
_INDICATORS = set("?:,[]{}#&*!|>'\"%@`")


def _plain_ok(text: str, flow: bool) -> bool:
    if not text or text != text.strip() or text[0] in _INDICATORS:
        return False
    if text[0] == "-" and (len(text) == 1 or text[1] == " "):
        return False
    if ": " in text or " #" in text or text.endswith(":"):
        return False
    return not (flow and any(c in text for c in ",[]{}:#"))


def _quote(text: str, style: str) -> str:
    if style == "'":
        return "'" + text.replace("'", "''") + "'"
    return json.dumps(text)


@dataclass
class Doc:
    """A document being written: the anchors defined so far (name, is a mapping)."""

    anchors: list[tuple[str, bool]] = field(default_factory=list)
    count: int = 0

    def new_anchor(self) -> str:
        self.count += 1
        return f"a{self.count}"


@st.composite
def scalar(draw: st.DrawFn, doc: Doc, flow: bool, key: bool = False) -> str:
    text = draw(SCALAR_TEXT)
    style = draw(st.sampled_from(["plain"] * 6 + ["'", '"']))
    if style == "plain" and not _plain_ok(text, flow):
        style = draw(st.sampled_from(["'", '"']))
    out = text if style == "plain" else _quote(text, style)
    roll = draw(st.integers(0, 99))
    if roll < 3:
        out = f"{draw(st.sampled_from(TAGS))} {out}"
    elif roll == 3 and not key:
        out = f"{draw(st.sampled_from(RARE_TAGS))} {out}"
    if not key and draw(st.integers(0, 9)) == 0:
        name = doc.new_anchor()
        out = f"&{name} {out}"
        doc.anchors.append((name, False))
    return out


@st.composite
def alias(draw: st.DrawFn, doc: Doc, mappings: bool = False) -> str | None:
    names = [n for n, is_map in doc.anchors if is_map or not mappings]
    return f"*{draw(st.sampled_from(names))}" if names else None


@st.composite
def flow_node(draw: st.DrawFn, doc: Doc, depth: int) -> str:
    choice = draw(st.integers(0, 9 if depth < 2 else 5))
    if choice <= 4:
        return draw(scalar(doc, flow=True))
    if choice == 5:
        return draw(alias(doc)) or draw(scalar(doc, flow=True))
    anchor = ""
    if draw(st.integers(0, 3)) == 0:
        anchor = f"&{doc.new_anchor()} "
    if choice <= 7:
        items = draw(st.lists(flow_node(doc, depth + 1), max_size=3))
        if anchor:
            doc.anchors.append((anchor[1:-1], False))
        return anchor + "[" + ", ".join(items) + "]"
    mapping = draw(flow_mapping(doc, depth))
    if anchor:
        doc.anchors.append((anchor[1:-1], True))
    return anchor + mapping


@st.composite
def key_text(draw: st.DrawFn, doc: Doc, flow: bool) -> str:
    """Mostly a plain word no other key repeats; a tricky scalar one time in four (never a
    NaN or a negative zero: see :data:`UNMATCHED_KEYS`)."""
    if draw(st.integers(0, 3)) == 0:
        return draw(scalar(doc, flow=flow, key=True).filter(lambda t: not UNMATCHED_KEYS.match(t)))
    doc.count += 1
    return f"k{doc.count}"


@st.composite
def flow_key(draw: st.DrawFn, doc: Doc) -> str:
    if draw(st.integers(0, 7)) == 0:
        return "<<"
    return draw(key_text(doc, flow=True))


@st.composite
def block_key(draw: st.DrawFn, doc: Doc) -> str:
    if draw(st.integers(0, 11)) == 0:
        found = draw(alias(doc))
        if found:
            return found + " "  # `*a : v` (an alias key needs the space)
    return draw(key_text(doc, flow=False))


@st.composite
def flow_mapping(draw: st.DrawFn, doc: Doc, depth: int) -> str:
    pairs = []
    for _ in range(draw(st.integers(0, 3))):
        k = draw(flow_key(doc))
        merge = k == "<<" and depth < 3
        pairs.append(
            f"{k}: {draw(merge_value(doc, depth) if merge else flow_node(doc, depth + 1))}"
        )
    return "{" + ", ".join(pairs) + "}"


@st.composite
def merge_value(draw: st.DrawFn, doc: Doc, depth: int) -> str:
    """Mostly what a merge takes: an alias of a mapping, a list of them, an inline mapping;
    now and then what it does not."""
    choice = draw(st.integers(0, 19))
    if choice <= 9:
        found = draw(alias(doc, mappings=choice > 0))
        if found:
            return found
    if choice <= 16:
        items = []
        for _ in range(draw(st.integers(1, 3))):
            found = draw(alias(doc, mappings=draw(st.integers(0, 9)) > 0))
            items.append(found or draw(flow_mapping(doc, depth + 1)))
        return "[" + ", ".join(items) + "]"
    if choice == 17:
        return "[" + draw(flow_node(doc, depth + 1)) + "]"
    return draw(flow_mapping(doc, depth + 1))


@st.composite
def block_mapping(draw: st.DrawFn, doc: Doc, indent: int, depth: int) -> list[str]:
    lines: list[str] = []
    pad = " " * indent
    for _ in range(draw(st.integers(1, 4))):
        if draw(st.integers(0, 6)) == 0:
            lines.append(f"{pad}<<: {draw(merge_value(doc, depth))}")
            continue
        k = draw(block_key(doc))
        lines.extend(draw(block_entry(doc, f"{pad}{k}:", indent, depth)))
    return lines


@st.composite
def block_entry(draw: st.DrawFn, doc: Doc, head: str, indent: int, depth: int) -> list[str]:
    """``head`` (``key:`` or ``-``) and its value, on this line or the ones below."""
    choice = draw(st.integers(0, 9 if depth < 3 else 6))
    if choice == 0:
        return [head]  # an empty value: null
    if choice <= 4:
        return [f"{head} {draw(scalar(doc, flow=False))}"]
    if choice == 5:
        return [f"{head} {draw(alias(doc)) or draw(scalar(doc, flow=False))}"]
    if choice == 6:
        return [f"{head} {draw(flow_node(doc, 1))}"]
    props = ""
    name = None
    if draw(st.integers(0, 3)) == 0:
        name = doc.new_anchor()
        props = f" &{name}"
    if choice <= 7:
        items: list[str] = []
        for _ in range(draw(st.integers(1, 3))):
            items.extend(draw(block_entry(doc, " " * (indent + 2) + "-", indent + 4, depth + 1)))
        if name:
            doc.anchors.append((name, False))
        return [head + props, *items]
    body = draw(block_mapping(doc, indent + 2, depth + 1))
    if name:
        doc.anchors.append((name, True))
    return [head + props, *body]


@st.composite
def document(draw: st.DrawFn) -> str:
    doc = Doc()
    return "\n".join(draw(block_mapping(doc, 0, 0))) + "\n"


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(text=document())
def test_the_reader_reads_what_kubectl_reads(kubectl_yaml: Convert, text: str) -> None:
    event(check(kubectl_yaml, text))


# --- fixed cases: each difference found, and the deliberate refusals --------------------------

FOUND = [
    pytest.param("a: 0x_\nb: 0b_\n", {"a": "0x_", "b": "0b_"}, id="number-without-digits"),
    pytest.param("a: 08\nb: 0_9\n", {"a": 8, "b": 9}, id="octal-looking-decimal"),
    pytest.param("a: 0X1F\nb: 0O17\nc: 0B11\n", {"a": 31, "b": 15, "c": 3}, id="upper-prefix"),
    pytest.param("a: +_1\nb: 1__0\nc: 1_000.5\n", {"a": 1, "b": 10, "c": 1000.5}, id="unders"),
    pytest.param("a: 0b-1\n", {"a": -1}, id="go-yaml-base-2-retry"),
    pytest.param("a: ! 12\nb: <<\n", {"a": "12", "b": "<<"}, id="strings"),
    pytest.param(
        "a: 18446744073709551615\nb: 18446744073709551616\nc: 0x10000000000000000\n",
        {"a": 18446744073709551615, "b": 1.8446744073709552e19, "c": "0x10000000000000000"},
        id="past-int64",
    ),
    pytest.param("a: 0777777777777777777777777\n", {"a": 7.777777777777778e23}, id="big-octal"),
    pytest.param("a: 1e400\nb: 1e-400\n", {"a": "1e400", "b": 0}, id="float-range"),
    pytest.param(
        "1.0: a\n1e6: b\n0.1: c\n08: d\n",
        {"1": "a", "1e+06": "b", "0.1": "c", "8": "d"},
        id="float-keys",
    ),
    pytest.param(".inf: a\n-.inf: b\n", {".inf": "a", "-.inf": "b"}, id="infinite-keys"),
    pytest.param("a: !!float 1\nb: !!int '12'\n", {"a": 1.0, "b": 12}, id="tags"),
]


@pytest.mark.parametrize(("text", "expected"), FOUND)
def test_each_difference_found_reads_as_kubectl_reads_it(
    kubectl_yaml: Convert, text: str, expected: Any
) -> None:
    k_ok, k_value = kubectl_yaml(text)
    assert k_ok and same(expected, k_value) is None, k_value
    check(kubectl_yaml, text)
    ok, value = ours(text)
    assert ok and same(value, expected) is None


REFUSED_BY_BOTH = [
    pytest.param("a: .inf\n", id="infinity-value"),
    pytest.param("a: [.nan]\n", id="nan-value"),
    pytest.param("~: a\n", id="null-key"),
    pytest.param("18446744073709551615: a\n", id="uint64-key"),
    pytest.param("a: !!int 1:20\n", id="sexagesimal-int"),
    pytest.param("a: !!float 1:20\n", id="sexagesimal-float"),
    pytest.param("a: !!int 08\n", id="int-tag-of-a-float"),
    pytest.param("a: !!null x\n", id="null-tag"),
]


@pytest.mark.parametrize("text", REFUSED_BY_BOTH)
def test_what_kubectl_refuses_the_reader_refuses(kubectl_yaml: Convert, text: str) -> None:
    assert not kubectl_yaml(text)[0]
    assert not ours(text)[0]


DELIBERATE_CASES = [
    pytest.param("a: 1\na: 2\n", "found duplicate key", id="duplicate-key"),
    pytest.param("on: 1\ntrue: 2\n", "found duplicate key", id="keys-colliding-as-json"),
    pytest.param("a: &x 1\nb: &x 2\nc: *x\n", "found duplicate anchor", id="anchor-redefined"),
    pytest.param("a: !!binary aGVsbG8=\n", "has no JSON form", id="binary"),
    pytest.param("a: !!timestamp 2024-01-01\n", "has no JSON form", id="timestamp"),
    pytest.param("a: !!set {x}\n", "has no JSON form", id="set"),
    pytest.param("a: !custom x\n", "constructor for the tag", id="unknown-tag"),
    pytest.param("{!!merge x: {z: 1}}\n", "constructor for the tag", id="merge-tag-on-x"),
    pytest.param("a: !!str [1]\n", "expected a scalar node", id="tag-contradicts-node"),
]


@pytest.mark.parametrize(("text", "fragment"), DELIBERATE_CASES)
def test_each_deliberate_refusal_is_one_kubectl_reads(
    kubectl_yaml: Convert, text: str, fragment: str
) -> None:
    assert kubectl_yaml(text)[0], kubectl_yaml(text)
    ok, message = ours(text)
    assert not ok and fragment in message


def test_the_check_catches_a_reader_that_diverges(
    kubectl_yaml: Convert, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The comparison fails a reader whose resolver is off by one rule (``08`` an octal
    refusal, as PyYAML's table had it)."""
    broken = yamlread.resolve

    def resolve(text: str) -> Any:
        return text if text == "08" else broken(text)

    monkeypatch.setattr(yamlread, "resolve", resolve)
    with pytest.raises(AssertionError, match="'08'"):
        check(kubectl_yaml, "a: 08\n")


def test_the_tool_is_the_converter_kubectl_is_built_with() -> None:
    """yaml2json's go.mod pins the versions kubectl's go.mod resolves."""
    envtest = Path(__file__).resolve().parents[2] / "hack" / "envtest"
    kubectl_mod = (envtest / "kubernetes" / "go.mod").read_text()
    tool_mod = (envtest / "yaml2json" / "go.mod").read_text()
    for module in ("sigs.k8s.io/yaml", "go.yaml.in/yaml/v2"):
        pinned = [line.split()[:2] for line in kubectl_mod.splitlines() if module + " v" in line]
        assert pinned and all(" ".join(p) in tool_mod for p in pinned), module
