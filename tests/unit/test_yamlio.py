"""The canonical reader and writer."""

from __future__ import annotations

import pytest

from gpustack_render.cli.yamlio import DocumentError, dump_json, dump_yaml, load_documents


def test_multi_document_yaml_and_lists_are_expanded() -> None:
    text = "a: 1\n---\n---\nkind: List\napiVersion: v1\nitems:\n- {b: 2}\n- {c: 3}\n"
    assert load_documents(text) == [{"a": 1}, {"b": 2}, {"c": 3}]


def test_json_document_and_json_list() -> None:
    assert load_documents('{"kind": "X"}') == [{"kind": "X"}]
    assert load_documents('{"kind": "List", "items": [{"a": 1}]}') == [{"a": 1}]
    assert load_documents('[{"a": 1}, {"b": 2}]') == [{"a": 1}, {"b": 2}]


def test_a_stream_of_json_objects_is_read_as_kubectl_reads_it() -> None:
    # What `jq '.items[]'` prints: kubectl's decoder reads one value after another.
    text = '{"a": 1}\n{"b": 2}{"c": [3]}\n\n[{"d": 4}]\n'
    assert load_documents(text) == [{"a": 1}, {"b": 2}, {"c": [3]}, {"d": 4}]
    with pytest.raises(DocumentError, match=r"in.json: not valid JSON: Expecting value: line 2"):
        load_documents('{"a": 1}\nx\n', source="in.json")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        pytest.param("a: [1,\n", "not valid YAML", id="broken-yaml"),
        pytest.param("{", "not valid JSON", id="broken-json"),
        # JSON keeps the last of two keys in silence and Python's reads NaN and Infinity; the
        # YAML reader refuses the same content, and kubectl's JSON decoder has no NaN or Infinity.
        pytest.param('{"a": {"b": 1, "b": 2}}', "JSON: found duplicate key 'b'", id="json-repeat"),
        pytest.param('{"a": NaN}', "JSON: NaN", id="json-nan"),
        pytest.param('[{"a": -Infinity}]', "JSON: -Infinity", id="json-infinity"),
        pytest.param('{"a": 1e400}', "JSON: 1e400", id="json-float-overflow"),
        pytest.param("a: 1\n---\n- 1\n- 2\n", "document 2", id="not-a-mapping"),
        pytest.param("kind: List\nitems: {}\n", "List items must be a list", id="items-{}"),
        pytest.param("kind: List\nitems: ''\n", "List items must be a list", id="items-empty-str"),
    ],
)
def test_unreadable_input_names_source_and_document(text: str, fragment: str) -> None:
    with pytest.raises(DocumentError) as exc:
        load_documents(text, source="in.yaml")
    assert "in.yaml" in str(exc.value) and fragment in str(exc.value)


def test_writer_is_block_style_ordered_and_quiet() -> None:
    obj = {
        "kind": "Pod",
        "metadata": {"name": "p", "creationTimestamp": None, "labels": {"z": "1", "a": "2"}},
        "spec": {"containers": [{"name": "main", "args": ["--x", "on", "yes", "0123"]}]},
        "status": {},
    }
    out = dump_yaml([obj])
    assert out == (
        "---\n"
        "kind: Pod\n"
        "metadata:\n"
        "  name: p\n"
        "  labels:\n"
        "    z: '1'\n"
        "    a: '2'\n"
        "spec:\n"
        "  containers:\n"
        "  - name: main\n"
        "    args:\n"
        "    - --x\n"
        "    - 'on'\n"
        "    - 'yes'\n"
        "    - '0123'\n"
    )
    assert load_documents(out) == [
        {k: v for k, v in obj.items() if k != "status"}
        | {"metadata": {"name": "p", "labels": {"z": "1", "a": "2"}}}
    ]


def test_json_writer_has_final_newline_and_lf() -> None:
    out = dump_json({"b": 1, "a": [1, 2]})
    assert out.endswith("}\n") and "\r" not in out
    assert out.index('"b"') < out.index('"a"')


@pytest.mark.parametrize("text", ["0_O0", "0_x1", "0_b1", "+_0x1", "0_b_-1", "0_"])
def test_writer_quotes_an_underscore_before_a_base_prefix(text: str) -> None:
    """kubectl's converter drops every underscore before reading a number, so ``0_x1`` is 1:
    the writer quotes it, and what it prints reads back as the string."""
    printed = dump_yaml([{"v": text}])
    assert printed == f"---\nv: '{text}'\n"
    assert load_documents(printed) == [{"v": text}]
