"""The one canonical YAML/JSON reader and writer.

Reading: YAML streams (several documents), JSON documents and JSON ``List`` objects. Writing:
block style, the key order the object was built with, LF line ends, a final newline, and none of
the noise Kubernetes clients print for empty fields (``creationTimestamp: null``, ``status: {}``).
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any, ClassVar

import yaml
from yaml import YAMLError

from gpustack_render.cli import yamlread
from gpustack_render.core import nesting


class DocumentError(ValueError):
    """Input that cannot be read as YAML or JSON documents; names the source and document."""


# Plain scalars that a YAML 1.1 reader (kubectl's among them) would not read back as strings.
_AMBIGUOUS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "~", ""}
_STR = "tag:yaml.org,2002:str"

#: The plain scalars the writer quotes besides kubectl's (yamlread's resolver): YAML 1.2 core
#: scalars, timestamps and the ``=``/``<<``/``!&*`` indicators, so output reads back the same
#: under either YAML version (and stays what the writer printed before it was libyaml's).
_YAML12 = [
    ("bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    (
        "float",
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
        |[-+]?\.[0-9_]+(?:[eE][-+][0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        "-+0123456789.",
    ),
    (
        "int",
        r"^(?:[-+]?0b[0-1_]+|[-+]?0o?[0-7_]+|[-+]?[0-9_]+|[-+]?0x[0-9a-fA-F_]+)$",
        "-+0123456789",
    ),
    (
        "timestamp",
        r"""^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]
        |[0-9][0-9][0-9][0-9] -[0-9][0-9]? -[0-9][0-9]?
        (?:[Tt]|[ \t]+)[0-9][0-9]?
        :[0-9][0-9] :[0-9][0-9] (?:\.[0-9]*)?
        (?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$""",
        "0123456789",
    ),
    ("value", r"^(?:=)$", "="),
    ("yaml", r"^(?:!|&|\*)$", "!&*"),
]


class _Dumper(yaml.CSafeDumper if hasattr(yaml, "CSafeDumper") else yaml.SafeDumper):  # type: ignore[misc]
    """libyaml's emitter with the project's representation of strings."""

    yaml_implicit_resolvers: ClassVar[dict[str | None, list[tuple[str, re.Pattern[str]]]]] = {
        k: list(v) for k, v in yamlread.implicit_resolvers().items()
    }


for _tag, _pattern, _first in _YAML12:
    _Dumper.add_implicit_resolver(f"tag:yaml.org,2002:{_tag}", re.compile(_pattern, re.X), _first)

#: The pure-Python analysis of a scalar (only for the rare string holding a single quote).
_ANALYSER = yaml.emitter.Emitter(io.StringIO(), allow_unicode=True)


def _represent_str(dumper: Any, data: str) -> Any:
    """Strings as the writer always printed them: a line break makes a literal block, a word
    a YAML 1.1 reader would misread is single-quoted, and a string that needs quoting and holds
    a single quote is double-quoted (``"the role's port"``, not ``'the role''s port'``)."""
    if "\n" in data:
        return dumper.represent_scalar(_STR, data, style="|")
    if data.lower() in _AMBIGUOUS:
        return dumper.represent_scalar(_STR, data, style="'")
    if "'" in data and not _plain_allowed(dumper, data):
        return dumper.represent_scalar(_STR, data, style='"')
    return dumper.represent_scalar(_STR, data)


def _plain_allowed(dumper: Any, data: str) -> bool:
    analysis = _ANALYSER.analyze_scalar(data)
    if not analysis.allow_block_plain:
        return False
    return bool(dumper.resolve(yaml.ScalarNode, data, (True, False)) == _STR)


def _represent_float(dumper: Any, data: float) -> Any:
    """``repr`` spelling (``1e-05``, as YAML 1.2 and kubectl read it), ``.nan`` and ``.inf``."""
    if data != data:
        value = ".nan"
    elif data in (float("inf"), float("-inf")):
        value = ".inf" if data > 0 else "-.inf"
    else:
        value = repr(data).lower()
    return dumper.represent_scalar("tag:yaml.org,2002:float", value)


def _represent_dict(dumper: Any, data: dict[str, Any]) -> Any:
    """A mapping without its ``None`` values: the writer's half of :func:`clean`, done as it
    writes instead of in a separate pass over a large rendering."""
    items = [(k, v) for k, v in data.items() if v is not None]
    return dumper.represent_mapping("tag:yaml.org,2002:map", items)


def _no_aliases(dumper: Any, data: Any) -> bool:
    # A rendering may share one dict between Pods; the output spells each out in full.
    return True


_Dumper.add_representer(str, _represent_str)
_Dumper.add_representer(float, _represent_float)
_Dumper.add_representer(dict, _represent_dict)
_Dumper.ignore_aliases = _no_aliases

_DUMP_OPTIONS: dict[str, Any] = {
    "Dumper": _Dumper,
    "default_flow_style": False,
    "sort_keys": False,
    "width": 4096,
    "allow_unicode": True,
}


#: The limits of one input file; each is refused with one line naming the file. The size is the
#: API server's own request limit; the others bound the work a hostile file can cause.
MAX_BYTES = 3 * 1024 * 1024
MAX_DOCUMENTS = 10_000
MAX_DEPTH = 200
#: Nodes after alias expansion: an alias counts as every node of what it names, so an alias
#: bomb (each level repeating the one before) is refused after a bounded amount of work.
MAX_NODES = 1_000_000
#: An export of what runs (``explain --observed``: a ``kubectl get`` List of every Pod and
#: Workload of a deployment) is no single request: a 64 × 8 deployment's Pods alone are about 3
#: MiB. Its limits are wider, and still bound the work.
EXPORT_MAX_BYTES = 256 * 1024 * 1024
EXPORT_MAX_NODES = 50_000_000


def load_documents(
    text: str,
    *,
    source: str = "<input>",
    expand_lists: bool = True,
    max_bytes: int = MAX_BYTES,
    max_nodes: int = MAX_NODES,
) -> list[dict[str, Any]]:
    """Every object in ``text``; a ``List`` (``kind: List`` or ``*List``) is expanded.

    With ``expand_lists=False`` a List stays one document, items unchecked: ``explain
    --observed`` reads a ``kubectl get`` export whose damaged items it names and skips.

    YAML is read as kubectl reads it (YAML 1.1 scalars, :mod:`gpustack_render.cli.yamlread`);
    duplicate keys and tabs in indentation are refused. Empty documents are skipped. A document
    that is not a mapping, or a file past one of the limits above, is a :class:`DocumentError`
    naming ``source`` and the document's position (1-based).
    """
    located = load_located(
        text, source=source, expand_lists=expand_lists, max_bytes=max_bytes, max_nodes=max_nodes
    )
    return [doc for _, doc in located]


def load_located(
    text: str,
    *,
    source: str = "<input>",
    expand_lists: bool = True,
    max_bytes: int = MAX_BYTES,
    max_nodes: int = MAX_NODES,
) -> list[tuple[str, dict[str, Any]]]:
    """:func:`load_documents`, each object with where it is in the file: ``document <i>`` (its
    position in the stream, empty documents counted) or ``document <i> item <j>`` (in a
    List), so a message about the object points at the text a reader finds."""
    if len(text) > max_bytes and len(text.encode("utf-8")) > max_bytes:
        raise DocumentError(f"{source}: larger than the limit of {max_bytes} bytes")
    stripped = text.lstrip()
    docs: list[Any]
    if stripped.startswith(("{", "[")):
        docs = _load_json(text, source=source)
    else:
        try:
            docs = yamlread.load_all(
                text, max_documents=MAX_DOCUMENTS, max_depth=MAX_DEPTH, max_nodes=max_nodes
            )
        except yamlread.LimitError as exc:
            raise DocumentError(f"{source}: {exc}") from exc
        except YAMLError as exc:
            raise DocumentError(f"{source}: not valid YAML: {_one_line(str(exc))}") from exc
        except RecursionError:
            raise DocumentError(f"{source}: not valid YAML: nested too deep") from None
    if len(docs) > MAX_DOCUMENTS:
        raise DocumentError(f"{source}: more than {MAX_DOCUMENTS} documents")
    out: list[tuple[str, dict[str, Any]]] = []
    for i, doc in enumerate(docs, start=1):
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise DocumentError(
                f"{source}: document {i} is a {type(doc).__name__}, not a Kubernetes object"
            )
        if expand_lists and _is_list(doc):
            items = doc["items"] if doc["items"] is not None else []
            if not isinstance(items, list):  # also an empty {} or "", once read as no items
                raise DocumentError(f"{source}: document {i}: List items must be a list")
            for j, item in enumerate(items, start=1):
                if not isinstance(item, dict):
                    raise DocumentError(f"{source}: document {i} item {j} is not an object")
                out.append((f"document {i} item {j}", item))
        else:
            out.append((f"document {i}", doc))
    return out


def _load_json(text: str, *, source: str) -> list[Any]:
    """The JSON values of ``text``: one, or several in a row as kubectl's decoder reads them
    (``jq '.items[]'`` prints a stream of objects); an array gives its items."""
    decoder = json.JSONDecoder(
        object_pairs_hook=_json_object, parse_constant=_json_constant, parse_float=_json_float
    )
    docs: list[Any] = []
    end = _skip_space(text, 0)
    try:
        while end < len(text):
            doc, end = decoder.raw_decode(text, end)
            end = _skip_space(text, end)
            if not nesting.within(doc, MAX_DEPTH):
                raise DocumentError(f"{source}: nested deeper than {MAX_DEPTH} levels")
            docs.extend(doc if isinstance(doc, list) else [doc])
    except _JSONError as exc:
        raise DocumentError(f"{source}: not valid JSON: {exc}") from None
    except json.JSONDecodeError as exc:
        raise DocumentError(f"{source}: not valid JSON: {exc}") from exc
    except DocumentError:
        raise
    except ValueError as exc:  # a number of more digits than int() converts (4300)
        raise DocumentError(f"{source}: not valid JSON: {_first_line(exc)}") from exc
    except RecursionError as exc:
        raise DocumentError(f"{source}: nested deeper than {MAX_DEPTH} levels") from exc
    return docs


class _JSONError(ValueError):
    """What kubectl's JSON decoder refuses, or the reader refuses on purpose, as YAML's does."""


_JSON_SPACE = re.compile(r"[ \t\n\r]*")


def _skip_space(text: str, at: int) -> int:
    match = _JSON_SPACE.match(text, at)
    return match.end() if match else at


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object, refusing a repeated key (JSON keeps the last one in silence; the API server's
    strict field validation refuses it, and so does the YAML reader)."""
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _JSONError(f"found duplicate key {key!r}")
            seen.add(key)
    return obj


def _json_constant(name: str) -> Any:
    raise _JSONError(f"{name} is not a JSON value (JSON has no infinity or NaN)")


def _json_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _JSONError(f"{text} is out of range for a number (JSON has no infinity)")
    return value


def _first_line(exc: BaseException) -> str:
    return str(exc).split(";")[0]


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
    # Exact type checks and no call per scalar: this walks every node of a large rendering.
    kind = type(obj)
    if kind is dict:
        return {
            k: (v if type(v) not in _CONTAINERS else _drop_none(v))
            for k, v in obj.items()
            if v is not None
        }
    if kind is list:
        return [v if type(v) not in _CONTAINERS else _drop_none(v) for v in obj]
    if isinstance(obj, Mapping):
        return {k: _drop_none(v) for k, v in obj.items() if v is not None}
    if isinstance(obj, list | tuple):
        return [_drop_none(v) for v in obj]
    return obj


_CONTAINERS = (dict, list)


def dump_yaml(objects: Iterable[Mapping[str, Any]]) -> str:
    """A YAML stream of ``objects``: ``---`` separated, block style, deterministic."""
    out: str = yaml.dump_all([clean(obj) for obj in objects], explicit_start=True, **_DUMP_OPTIONS)
    return out


def dump_yaml_one(obj: Mapping[str, Any]) -> str:
    """One object as a YAML document without a leading separator."""
    out: str = yaml.dump(_without_empty_status(obj), **_DUMP_OPTIONS)
    return out


def _without_empty_status(obj: Any) -> Any:
    """The top-level half of :func:`clean` (the representer drops the ``None`` values)."""
    if isinstance(obj, dict) and "kind" in obj and obj.get("status") == {}:
        return {k: v for k, v in obj.items() if k != "status"}
    if isinstance(obj, Mapping) and not isinstance(obj, dict):
        return clean(obj)
    return obj


def dump_json(obj: Any) -> str:
    """Indented JSON with a final newline, keys in build order: byte for byte what
    ``json.dumps(clean(obj), indent=2, ensure_ascii=False)`` prints, in one pass that drops the
    ``None`` values as it writes (a large rendering is millions of nodes)."""
    if isinstance(obj, dict) and "kind" in obj and obj.get("status") == {}:
        obj = {k: v for k, v in obj.items() if k != "status"}
    chunks: list[str] = []
    _write_json(obj, chunks, "\n")
    chunks.append("\n")
    return "".join(chunks)


_encode_str: Any = getattr(json.encoder, "c_encode_basestring", None) or (
    json.encoder.py_encode_basestring
)


def _write_json(obj: Any, out: list[str], newline: str) -> None:
    kind = type(obj)
    if kind is str:
        out.append(_encode_str(obj))
    elif kind is dict or isinstance(obj, Mapping):
        items = [(k, v) for k, v in obj.items() if v is not None]
        if not items:
            out.append("{}")
            return
        inner = newline + "  "
        sep = "{" + inner
        for key, value in items:
            out.append(sep)
            out.append(_encode_str(key if type(key) is str else _json_key(key)))
            out.append(": ")
            _write_json(value, out, inner)
            sep = "," + inner
        out.append(newline + "}")
    elif kind is list or kind is tuple:
        if not obj:
            out.append("[]")
            return
        inner = newline + "  "
        sep = "[" + inner
        for value in obj:
            out.append(sep)
            _write_json(value, out, inner)
            sep = "," + inner
        out.append(newline + "]")
    elif obj is None:
        out.append("null")
    elif obj is True:
        out.append("true")
    elif obj is False:
        out.append("false")
    elif isinstance(obj, int):
        out.append(int.__repr__(obj))
    elif isinstance(obj, float):
        out.append(json.dumps(obj))
    else:
        out.append(json.dumps(obj))  # raises TypeError for what JSON cannot carry


def _json_key(key: Any) -> str:
    return str(json.dumps(key)).strip('"')


def as_list(objects: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """A ``v1`` ``List`` holding ``objects``."""
    return {"apiVersion": "v1", "kind": "List", "items": list(objects)}
