"""The one canonical YAML/JSON reader and writer.

Reading: YAML streams (several documents), JSON documents and JSON ``List`` objects. Writing:
block style, the key order the object was built with, LF line ends, a final newline, and none of
the noise Kubernetes clients print for empty fields (``creationTimestamp: null``, ``status: {}``).
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable, Mapping
from typing import Any

from ruamel.yaml import YAML
from yaml import YAMLError

from gpustack_render.cli import yamlread


class DocumentError(ValueError):
    """Input that cannot be read as YAML or JSON documents; names the source and document."""


# Plain scalars that a YAML 1.1 reader (kubectl's among them) would not read back as strings.
_AMBIGUOUS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~", ""}


def _represent_str(representer: Any, data: str) -> Any:
    style = "'" if data.lower() in _AMBIGUOUS else None
    if "\n" in data:
        style = "|"
    return representer.represent_scalar("tag:yaml.org,2002:str", data, style=style)


def _yaml() -> YAML:
    y = YAML(typ="safe", pure=True)
    y.default_flow_style = False
    y.width = 4096
    y.indent(mapping=2, sequence=2, offset=0)
    y.allow_unicode = True
    # The representer is built on first access, from the settings above.
    y.representer.sort_base_mapping_type_on_output = False
    y.representer.add_representer(str, _represent_str)
    return y


#: The limits of one input file; each is refused with one line naming the file. The size is the
#: API server's own request limit; the others bound the work a hostile file can cause.
MAX_BYTES = 3 * 1024 * 1024
MAX_DOCUMENTS = 10_000
MAX_DEPTH = 200
#: Nodes after alias expansion: an alias counts as every node of what it names, so an alias
#: bomb (each level repeating the one before) is refused after a bounded amount of work.
MAX_NODES = 1_000_000


def load_documents(text: str, *, source: str = "<input>") -> list[dict[str, Any]]:
    """Every object in ``text``; a ``List`` (``kind: List`` or ``*List``) is expanded.

    YAML is read as kubectl reads it (YAML 1.1 scalars, :mod:`gpustack_render.cli.yamlread`);
    duplicate keys and tabs in indentation are refused. Empty documents are skipped. A document
    that is not a mapping, or a file past one of the limits above, is a :class:`DocumentError`
    naming ``source`` and the document's position (1-based).
    """
    if len(text) > MAX_BYTES and len(text.encode("utf-8")) > MAX_BYTES:
        raise DocumentError(f"{source}: larger than the limit of {MAX_BYTES} bytes")
    stripped = text.lstrip()
    docs: list[Any]
    if stripped.startswith(("{", "[")):
        docs = _load_json(text, source=source)
    else:
        try:
            docs = yamlread.load_all(
                text, max_documents=MAX_DOCUMENTS, max_depth=MAX_DEPTH, max_nodes=MAX_NODES
            )
        except yamlread.LimitError as exc:
            raise DocumentError(f"{source}: {exc}") from exc
        except YAMLError as exc:
            raise DocumentError(f"{source}: not valid YAML: {_one_line(str(exc))}") from exc
    if len(docs) > MAX_DOCUMENTS:
        raise DocumentError(f"{source}: more than {MAX_DOCUMENTS} documents")
    out: list[dict[str, Any]] = []
    for i, doc in enumerate(docs, start=1):
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise DocumentError(
                f"{source}: document {i} is a {type(doc).__name__}, not a Kubernetes object"
            )
        if _is_list(doc):
            items = doc.get("items") or []
            if not isinstance(items, list):
                raise DocumentError(f"{source}: document {i}: List items must be a list")
            for j, item in enumerate(items, start=1):
                if not isinstance(item, dict):
                    raise DocumentError(f"{source}: document {i} item {j} is not an object")
                out.append(item)
        else:
            out.append(doc)
    return out


def _load_json(text: str, *, source: str) -> list[Any]:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DocumentError(f"{source}: not valid JSON: {exc}") from exc
    except RecursionError as exc:
        raise DocumentError(f"{source}: nested deeper than {MAX_DEPTH} levels") from exc
    if yamlread.depth(doc) > MAX_DEPTH:
        raise DocumentError(f"{source}: nested deeper than {MAX_DEPTH} levels")
    return doc if isinstance(doc, list) else [doc]


def _is_list(doc: Mapping[str, Any]) -> bool:
    kind = doc.get("kind")
    return isinstance(kind, str) and kind.endswith("List") and "items" in doc


def _one_line(text: str) -> str:
    return " ".join(text.replace(' in "<unicode string>",', " at").split())


def clean(obj: Any) -> Any:
    """Drop the noise a writer should not print: ``None`` values anywhere, and an empty
    top-level ``status`` of a Kubernetes object."""
    out = _drop_none(obj)
    if isinstance(out, dict) and "kind" in out and out.get("status") == {}:
        del out["status"]
    return out


def _drop_none(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {k: _drop_none(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list):
        return [_drop_none(v) for v in obj]
    return obj


def dump_yaml(objects: Iterable[Mapping[str, Any]]) -> str:
    """A YAML stream of ``objects``: ``---`` separated, block style, deterministic."""
    chunks: list[str] = []
    for obj in objects:
        buf = io.StringIO()
        _yaml().dump(clean(obj), buf)
        chunks.append(buf.getvalue())
    if not chunks:
        return ""
    return "---\n" + "---\n".join(chunks)


def dump_yaml_one(obj: Mapping[str, Any]) -> str:
    """One object as a YAML document without a leading separator."""
    buf = io.StringIO()
    _yaml().dump(clean(obj), buf)
    return buf.getvalue()


def dump_json(obj: Any) -> str:
    """Indented JSON with a final newline, keys in build order."""
    return json.dumps(clean(obj), indent=2, ensure_ascii=False) + "\n"


def as_list(objects: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """A ``v1`` ``List`` holding ``objects``."""
    return {"apiVersion": "v1", "kind": "List", "items": list(objects)}
