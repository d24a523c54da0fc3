"""The one-pass YAML reader: each refusal with its message (the two-pass reader's, kept as the
test oracle in tests/property/yaml_oracle.py), which error a stream with several gets, what an
alias and a merge give, and the cases where the reader deliberately differs from the old one."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from property import yaml_oracle

from gpustack_render.cli import yamlread
from gpustack_render.cli.yamlread import LimitError

LIMITS: dict[str, int] = {"max_documents": 3, "max_depth": 5, "max_nodes": 100}


def load(text: str) -> list[Any]:
    return yamlread.load_all(text, **LIMITS)


def _error(read: Any, text: str) -> tuple[type[BaseException], str]:
    with pytest.raises((yaml.YAMLError, LimitError)) as info:
        read(text, **LIMITS)
    return type(info.value), str(info.value)


def _bomb(levels: int) -> str:
    lines = ["a0: &a0 [x, x, x]"]
    lines += [f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


REFUSED = [
    pytest.param("a: 1\na: 2\n", "found duplicate key 'a'", id="duplicate-key"),
    pytest.param("on: 1\ntrue: 2\n", "found duplicate key 'true'", id="on-and-true-collide"),
    pytest.param("1: a\n'1': b\n", "found duplicate key '1'", id="int-and-string-collide"),
    pytest.param("? [1]\n: 2\n", "a mapping key must be a scalar", id="sequence-key"),
    pytest.param("? {a: 1}\n: 2\n", "a mapping key must be a scalar", id="mapping-key"),
    pytest.param("a: &k [1]\n*k : 2\n", "a mapping key must be a scalar", id="alias-key-list"),
    pytest.param("a: *nope\n", "found undefined alias", id="undefined-alias"),
    pytest.param("a: &x 1\nb: &x 2\n", "found duplicate anchor", id="anchor-redefined"),
    pytest.param("a: &x [&x 1]\n", "found duplicate anchor", id="anchor-redefined-inside"),
    pytest.param("a: !!binary aGVsbG8=\n", "binary has no JSON form", id="binary"),
    pytest.param("a: !!set {x}\n", "set has no JSON form", id="set"),
    pytest.param("a: !!timestamp 2024-01-01\n", "timestamp has no JSON form", id="timestamp"),
    pytest.param("a: !!omap [{x: 1}]\n", "omap has no JSON form", id="omap"),
    pytest.param("a: !!pairs [{x: 1}]\n", "pairs has no JSON form", id="pairs"),
    pytest.param("a: !custom x\n", "constructor for the tag '!custom'", id="unknown-tag"),
    pytest.param("a: !!str [1]\n", "expected a scalar node, but found sequence", id="str-list"),
    pytest.param("a: !!seq {x: 1}\n", "expected a sequence node, but found mapping", id="seq-map"),
    pytest.param("a: !!map [1]\n", "expected a mapping, found sequence", id="map-list"),
    pytest.param("a: {<<: 1}\n", "list of mappings for merging, but found scalar", id="merge-1"),
    pytest.param("a: {<<: [1]}\n", "a mapping for merging, but found scalar", id="merge-[1]"),
    pytest.param("s: &s x\na: {<<: *s}\n", "merging, but found scalar", id="merge-alias-scalar"),
    pytest.param("a: {<<: {x: !!binary a}}\n", "binary has no JSON form", id="merged-value"),
    pytest.param("a: [[[[[[1]]]]]]\n", "nested deeper than 5 levels", id="depth"),
    pytest.param("a: &x [*x]\n", "alias *x refers to itself", id="self-reference"),
    pytest.param("a: &x {b: [*x]}\n", "alias *x refers to itself", id="self-reference-deep"),
    pytest.param(_bomb(4), "more than 100 nodes once aliases are expanded", id="alias-bomb"),
    pytest.param("[" + "1, " * 100 + "1]", "more than 100 nodes", id="too-many-nodes"),
    pytest.param("---\na: 1\n" * 4, "more than 3 documents", id="too-many-documents"),
    pytest.param("a:\n\tb: 1\n", "cannot start any token", id="tab"),
    pytest.param("a: [1,\n", "did not find expected node content", id="unclosed-flow"),
]


@pytest.mark.parametrize(("text", "fragment"), REFUSED)
def test_each_refusal_is_the_two_pass_readers_error(text: str, fragment: str) -> None:
    kind, message = _error(yamlread.load_all, text)
    assert fragment in message
    assert (kind, message) == _error(yaml_oracle.load_all, text)


SEVERAL = [
    pytest.param("a: 1\na: 2\n---\nb: [1,\n", "expected node", id="syntax-later-beats-key"),
    pytest.param("a: 1\na: 2\n---\n" + "---\n" * 3, "documents", id="limit-later-beats-key"),
    pytest.param("a: !!binary x\nb: &x [*x]\n", "refers to itself", id="limit-beats-tag"),
    pytest.param("a: 1\na: 2\nb: *nope\n", "undefined alias", id="alias-beats-key"),
    pytest.param("a: 1\na: 2\n---\nb: *nope\n", "duplicate key", id="first-document-first"),
    pytest.param("a: *x\nb: &y 1\nc: &y 2\n", "undefined alias", id="first-alias-error"),
]


@pytest.mark.parametrize(("text", "fragment"), SEVERAL)
def test_of_several_errors_the_same_one_is_reported(text: str, fragment: str) -> None:
    """Syntax errors and limits anywhere come first, then anchor and alias errors, then the
    errors of values, document by document."""
    kind, message = _error(yamlread.load_all, text)
    assert fragment in message
    assert (kind, message) == _error(yaml_oracle.load_all, text)


READ = [
    pytest.param("a: y\nb: n\nc: Off\n", {"a": True, "b": False, "c": False}, id="bools"),
    pytest.param("a: 0755\nb: 0o17\nc: 0x1F\nd: 0b11\ne: 1_0\n", {}, id="ints"),
    pytest.param("a: 08\nb: 1.\nc: .5\nd: +.5\ne: 1e3\n", {}, id="floats"),
    pytest.param("a: ~\nb: null\nc:\nd: ''\ne: 2024-01-01\n", {}, id="null-and-strings"),
    pytest.param("c: !!str 12\nd: !!int '12'\n", {}, id="explicit-tags"),
    pytest.param("a: !!float 1\nb: !!int 0x1F\nc: !!bool yes\nd: !!null ''\n", {}, id="tags-2"),
    pytest.param("? !!value yes\n: 1\n'<<': 2\n", {"yes": 1, "<<": 2}, id="value-and-quoted"),
    pytest.param("a: &k yes\n*k : 1\n", {"a": True, "true": 1}, id="alias-key"),
    pytest.param("a: &a {x: 1, z: 1}\nb: {<<: *a, x: 2}\n", {}, id="merge-own-wins"),
    pytest.param("a: {<<: [{x: 1, y: 1}, {x: 2, z: 2}], w: 0}\n", {}, id="merge-list"),
    pytest.param("a: {w: 0, <<: {xx: 1}, <<: {yy: 2}}\n", {}, id="merge-keys-come-first"),
    pytest.param("a: {!!merge <<: {z: 1}}\n", {"a": {"z": 1}}, id="explicit-merge-tag"),
    pytest.param("a: {<<: !!set {x: 1}}\n", {"a": {"x": 1}}, id="merged-tag-unread"),
    pytest.param("---\n---\na: 1\n...\n", [None, {"a": 1}], id="empty-document"),
    pytest.param("", [], id="empty-stream"),
]


@pytest.mark.parametrize(("text", "expected"), READ)
def test_values_read_as_the_two_pass_reader_read_them(text: str, expected: Any) -> None:
    got = load(text)
    assert got == yaml_oracle.load_all(text, **LIMITS)
    assert [list(d) if isinstance(d, dict) else d for d in got] == [
        list(d) if isinstance(d, dict) else d for d in yaml_oracle.load_all(text, **LIMITS)
    ]
    if expected:
        assert got == (expected if isinstance(expected, list) else [expected])


def test_an_alias_gives_the_object_its_anchor_built() -> None:
    (doc,) = load("a: &a {x: [1]}\nb: *a\nc: [*a]\n")
    assert doc["b"] is doc["a"] and doc["c"][0] is doc["a"]


def test_an_alias_bomb_costs_no_more_than_its_limit() -> None:
    with pytest.raises(LimitError, match="aliases"):
        yamlread.load_all(_bomb(40), max_documents=1, max_depth=50, max_nodes=10_000)


def test_the_limits_count_an_alias_at_its_expanded_size() -> None:
    text = "a: &a [1, 2, 3]\nb: [*a, *a]\n"  # 1 + (1 + 4) + (1 + 1 + 4 + 4) nodes
    assert yamlread.load_all(text, max_documents=1, max_depth=5, max_nodes=16)
    for read in (yamlread.load_all, yaml_oracle.load_all):
        with pytest.raises(LimitError):
            read(text, max_documents=1, max_depth=5, max_nodes=15)


# --- where the reader deliberately differs from the two-pass reader -------------------------


@pytest.mark.parametrize(
    ("text", "scalar"),
    [
        pytest.param("a: !!int x\n", "'x'", id="int-tag"),
        pytest.param("a: !!float x\n", "'x'", id="float-tag"),
        pytest.param("a: !!bool maybe\n", "'maybe'", id="bool-tag"),
        pytest.param("a: !!int ''\n", "''", id="empty-int"),
        pytest.param("a: !!int 1:20\n", "'1:20'", id="sexagesimal"),
        pytest.param("a: !!int 08\n", "'08'", id="int-tag-of-a-float"),
        pytest.param("a: !!float 18446744073709551615\n", "'18446744073709551615'", id="uint64"),
        pytest.param("a: !!null x\n", "'x'", id="null-tag"),
    ],
)
def test_a_scalar_its_tag_cannot_read_is_refused(text: str, scalar: str) -> None:
    """go-yaml's rule (so kubectl's): the tag must name what the text reads as, ``!!float``
    taking an int64 too; the old reader let PyYAML's ValueError out on some of these (an
    internal error of the command line) and read ``1:20`` as 80."""
    kind, message = _error(yamlread.load_all, text)
    assert kind is yaml.constructor.ConstructorError
    assert message.startswith(f"{scalar} is not a valid tag:yaml.org,2002:")
    assert (kind, message) == _error(yaml_oracle.load_all, text)


# --- where the reader follows kubectl (sigs.k8s.io/yaml 1.6.0's YAMLToJSON, checked by
# tests/integration/test_yaml_kubectl.py), so no longer the two-pass reader's PyYAML ---------

KUBECTL_READS = [
    pytest.param("a: 0x_\nb: 0b_\n", {"a": "0x_", "b": "0b_"}, id="number-without-digits"),
    pytest.param(
        "a: 08\nb: 0X1F\nc: +_1\nd: 0b-1\n", {"a": 8.0, "b": 31, "c": 1, "d": -1}, id="ints"
    ),
    pytest.param(
        "a: 18446744073709551616\nb: 0x10000000000000000\n",
        {"a": 2.0**64, "b": "0x10000000000000000"},
        id="past-uint64",
    ),
    pytest.param("a: <<\nb: ! 12\nc: ! '12'\n", {"a": "<<", "b": "12", "c": "12"}, id="strings"),
    pytest.param(
        "a: 00O0\nb: 0x0x1\nc: 0b0b1\nd: -0b0b1\ne: 00o7\n",
        {"a": "00O0", "b": "0x0x1", "c": "0b0b1", "d": "-0b0b1", "e": "00o7"},
        id="a-second-prefix-is-no-digit",
    ),
    pytest.param(
        "1.0: a\n1e6: b\n.inf: c\n08: d\n",
        {"1": "a", "1e+06": "b", ".inf": "c", "8": "d"},
        id="keys",
    ),
]


@pytest.mark.parametrize(("text", "expected"), KUBECTL_READS)
def test_scalars_read_as_kubectl_reads_them(text: str, expected: dict[str, Any]) -> None:
    """Numbers without digits are strings, ``08`` is a number, an upper-case prefix counts, a
    number past uint64 is a float (and a hexadecimal one a string), ``<<`` as a value and ``!``
    under a tag are strings, and a float key is spelled as kubectl spells it."""
    assert load(text) == [expected]
    assert [list(d) for d in load(text)] == [list(expected)]


REFUSED_NOW = [
    # kubectl refuses these too: JSON has no infinity and no null key, kubectl no key past
    # int64, go-yaml no merge of an alias of a list.
    pytest.param("a: .inf\n", "'.inf' has no JSON form", id="infinity"),
    pytest.param("a: [-.inf, .nan]\n", "'-.inf' has no JSON form", id="nan"),
    pytest.param("~: a\n", "a null key has no JSON form", id="null-key"),
    pytest.param("9223372036854775808: a\n", "key 9223372036854775808 has no", id="uint64-key"),
    pytest.param("s: &s [{x: 1}]\na: {<<: *s}\n", "found an alias of a sequence", id="merge-alias"),
    # Deliberate: kubectl reads ``!!merge x`` as the key ``x`` and lets the last of repeated
    # keys win; the two-pass reader let PyYAML skip a merged mapping's check.
    pytest.param("a: {!!merge x: {z: 1}}\n", "constructor for the tag", id="merge-tag-on-x"),
    pytest.param("a: {<<: {x: 1, x: 2}}\n", "found duplicate key 'x'", id="merged-duplicate"),
    pytest.param("a: {<<: [{x: 1, x: 2}]}\n", "found duplicate key", id="listed-duplicate"),
]


@pytest.mark.parametrize(("text", "fragment"), REFUSED_NOW)
def test_what_kubectl_cannot_send_and_the_deliberate_refusals(text: str, fragment: str) -> None:
    """Refused naming the scalar or key, where the two-pass reader read each of these."""
    kind, message = _error(yamlread.load_all, text)
    assert kind is yaml.constructor.ConstructorError
    assert fragment in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("a: {<<: [{xx: 1}, {xx: 2}]}\n", {"a": {"xx": 1}}, id="first-listed-wins"),
        pytest.param(
            "b: &b {x: 2}\na: &a {<<: *b, x: 1}\nc: {<<: *a}\n",
            {"b": {"x": 2}, "a": {"x": 1}, "c": {"x": 1}},
            id="merge-of-a-merge",
        ),
        pytest.param(
            "b: &b {x: 2}\na: {d: &a {<<: *b, x: 1}}\nc: {<<: *a}\n",
            {"b": {"x": 2}, "a": {"d": {"x": 1}}, "c": {"x": 1}},
            id="merge-of-a-deeper-merge",
        ),
        pytest.param(
            "b: &b {&k x: 1}\nc: {<<: *b, *k : 2}\n",
            {"b": {"x": 1}, "c": {"x": 2}},
            id="own-alias-key-over-merged",
        ),
        pytest.param(
            "a: {xx: 1, <<: {xx: 2, zz: 3}}\n",
            {"a": {"xx": 2, "zz": 3}},
            id="merge-over-own-before",
        ),
        pytest.param(
            "a: {xx: 0, <<: {xx: 1}, zz: 5, <<: {xx: 2, zz: 6}}\n",
            {"a": {"xx": 2, "zz": 6}},
            id="merges-in-the-order-of-the-text",
        ),
    ],
)
def test_merges_follow_the_merge_key_spec(text: str, expected: dict[str, Any]) -> None:
    """In the order of the text, a merge sets its keys over the own keys before it and an own
    key after it wins; of a list the first mapping listed wins; a merged mapping is merged as
    it reads. These are go-yaml's rules, so kubectl's: each case gives what sigs.k8s.io/yaml
    1.6.0's YAMLToJSON gives (PyYAML let own keys win wherever they stand). PyYAML's releases
    the project allows disagree on these
    (6.0.4 keeps the first of two merged keys spelled with one character and the last of
    longer ones, and refuses the last two streams with a spurious duplicate key)."""
    assert load(text) == [expected]


def test_a_mapping_under_a_scalar_tag_is_refused() -> None:
    """PyYAML read ``!!str {!!value k: v}`` as ``"v"`` (its ``!!value`` key rule, which no
    Kubernetes YAML uses); the reader refuses a mapping under a scalar tag."""
    kind, message = _error(yamlread.load_all, "a: !!str {!!value k: v}\n")
    assert kind is yaml.constructor.ConstructorError
    assert "expected a scalar node, but found mapping" in message
    assert yaml_oracle.load_all("a: !!str {!!value k: v}\n", **LIMITS) == [{"a": "v"}]
