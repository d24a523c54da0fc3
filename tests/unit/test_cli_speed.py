"""What keeps the command line fast: a lazy package, libyaml's C reader and writer, and a JSON
writer that is byte for byte the standard library's. The figures are in bench/cli.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

import gpustack_render
from gpustack_render.cli import yamlio, yamlread

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "qwen-chat.yaml"


def _modules_after(code: str) -> set[str]:
    proc = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys\nprint(*sorted(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return {m for m in proc.stdout.split() if m.startswith("gpustack_render")}


def test_importing_the_package_imports_no_layer() -> None:
    assert _modules_after("import gpustack_render") == {"gpustack_render"}


def test_a_public_name_is_imported_on_first_use() -> None:
    loaded = _modules_after("from gpustack_render import FieldPath")
    assert "gpustack_render.core.paths" in loaded
    assert not any(m.startswith("gpustack_render.reconcile") for m in loaded)
    assert gpustack_render.FieldPath.__module__ == "gpustack_render.core.paths"
    with pytest.raises(AttributeError):
        _ = gpustack_render.no_such_name


def test_render_loads_neither_the_reconciler_nor_the_injector() -> None:
    loaded = _modules_after(
        "import contextlib, io\n"
        "from gpustack_render.cli import __main__ as commands\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert commands.main(['render', {str(EXAMPLE)!r}]) == 0"
    )
    assert "gpustack_render.rendering.renderer" in loaded
    assert not any(
        m.startswith(("gpustack_render.reconcile", "gpustack_render.injection")) for m in loaded
    )


INJECT_CASE = EXAMPLE.parents[1] / "golden" / "inject-command-only" / "input.yaml"


@pytest.mark.parametrize(
    ("argv", "absent"),
    [
        pytest.param(["crds"], ("admission", "rendering", "injection", "explain"), id="crds"),
        pytest.param(
            ["inject", str(INJECT_CASE)], ("admission", "rendering", "explain"), id="inject"
        ),
        pytest.param(
            ["completion", "bash"],
            ("api", "schema", "admission", "rendering", "injection", "explain"),
            id="completion",
        ),
    ],
)
def test_a_verb_loads_no_layer_only_another_verb_needs(
    argv: list[str], absent: tuple[str, ...]
) -> None:
    """The entry point imports only the verb called (gpustack_render.cli.verbs)."""
    loaded = _modules_after(
        "import contextlib, io\n"
        "from gpustack_render.cli import __main__ as commands\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert commands.main({argv!r}) == 0"
    )
    verbs = {m for m in loaded if m.startswith("gpustack_render.cli.verbs.")}
    assert verbs == {f"gpustack_render.cli.verbs.{argv[0]}"}
    layers = {m.split(".")[1] for m in loaded if m.count(".")}
    assert not layers & set(absent), sorted(loaded)


def test_render_builds_only_the_models_it_validates_and_imports_no_patch_library() -> None:
    """The models are built on first validation (``defer_build``): a render builds the
    deployment's and its lookups' models, not the kinds it never reads; an unchanged object
    makes no JSON Patch, so jsonpatch is not imported."""
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import contextlib, io, sys\n"
            "from gpustack_render.cli import __main__ as commands\n"
            "from gpustack_render.api import ModelArtifact, ModelDeployment\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            f"    assert commands.main(['render', {str(EXAMPLE)!r}]) == 0\n"
            "print(ModelDeployment.__pydantic_complete__, ModelArtifact.__pydantic_complete__,"
            " 'jsonpatch' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert proc.stdout.split() == ["True", "False", "False"]


def test_the_models_keep_their_annotations_as_objects() -> None:
    """No ``from __future__ import annotations`` in the model modules: pydantic would compile
    each field's annotation from a string at import."""
    from gpustack_render.api import common, inputs, modeldeployment

    for module in (common, inputs, modeldeployment):
        assert not hasattr(module, "annotations"), module.__name__


def test_reader_and_writer_are_libyaml() -> None:
    assert issubclass(yamlread._Loader, yaml.cyaml.CParser)
    assert issubclass(yamlio._Dumper, yaml.cyaml.CEmitter)


def _examples() -> list[Any]:
    objects: list[Any] = [
        {"kind": "X", "status": {}, "a": None, "b": [None, 1, {}, []], "c": {"d": None}},
        {"f": [1.5, 1e-05, 1e20, -0.0, 10**30, True, False], "s": 'é"\\\n\t\u2028'},
        [],
        {},
        "x",
    ]
    objects.extend(yamlio.load_documents(EXAMPLE.read_text()))
    return objects


@pytest.mark.parametrize("obj", _examples())
def test_json_writer_is_the_standard_library_byte_for_byte(obj: Any) -> None:
    expected = json.dumps(yamlio.clean(obj), indent=2, ensure_ascii=False) + "\n"
    assert yamlio.dump_json(obj) == expected


def test_yaml_writer_drops_none_as_it_writes_and_never_aliases() -> None:
    shared = {"name": "x", "value": None}
    out = yamlio.dump_yaml([{"kind": "Pod", "a": shared, "b": [shared], "status": {}}])
    assert out == "---\nkind: Pod\na:\n  name: x\nb:\n- name: x\n"
    assert out == yamlio.dump_yaml([yamlio.clean({"kind": "Pod", "a": shared, "b": [shared]})])


#: What ``render`` of one deployment never needs, and is not to load at start: the other verbs,
#: the layers only they use, the CRD and API-reference generators, the live mode's cluster
#: client, and the libraries of the other commands and the servers.
RENDER_NEVER_LOADS = (
    "gpustack_render.cli.verbs.admit",
    "gpustack_render.cli.verbs.inject",
    "gpustack_render.cli.verbs.explain",
    "gpustack_render.cli.verbs.crds",
    "gpustack_render.cli.verbs.completion",
    "gpustack_render.cli.live",
    "gpustack_render.explain",
    "gpustack_render.injection",
    "gpustack_render.reconcile",
    "gpustack_render.schema.crd",
    "gpustack_render.schema.apidoc",
    # The shells' client; its package and its gc switch (gcpause: imports only gc) are shared.
    "gpustack_kube.client",
    "gpustack_kube.config",
    "gpustack_kube.informer",
    "gpustack_kube.cachedread",
    "jsonpatch",
    "jsonschema",
    "ruamel",
    "asyncio",
    "kubernetes_asyncio",
    "aiohttp",
)


def test_render_loads_nothing_heavy_it_does_not_need() -> None:
    """The console script's ``render`` of the example, in a fresh interpreter: none of
    :data:`RENDER_NEVER_LOADS` (nor any module under one) is in ``sys.modules`` after it
    (docs/design/0007-cli-start-up.md)."""
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            "import contextlib, io, sys\n"
            "from gpustack_render.cli.__main__ import main\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            f"    assert main(['render', {str(EXAMPLE)!r}]) == 0\n"
            "assert 'kind: Pod' in out.getvalue()\n"
            "print(*sorted(sys.modules))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    loaded = set(proc.stdout.split())
    assert "gpustack_render.cli.verbs.render" in loaded
    assert "gpustack_render.rendering.renderer" in loaded
    heavy = sorted(m for m in loaded if _under(m))
    assert not heavy


def _under(module: str) -> bool:
    """Whether ``module`` is one of RENDER_NEVER_LOADS or a module under one (``ruamel`` but
    not ``ruamelx``)."""
    return any(module == m or module.startswith(m + ".") for m in RENDER_NEVER_LOADS)


def test_no_model_field_defaults_through_a_builtin_signature() -> None:
    """No API model field has a builtin with a text signature (``list``, ``set``, ...) as its
    default factory: building the model would have ``inspect`` parse that signature through
    the tokenizer, some 4 ms of a command's start (docs/design/0007-cli-start-up.md)."""
    import inspect

    from gpustack_render.api import common, inputs, modeldeployment, scaler

    builtins = set()
    for module in (common, inputs, modeldeployment, scaler):
        for cls in vars(module).values():
            if not (inspect.isclass(cls) and hasattr(cls, "model_fields")):
                continue
            for field, info in cls.model_fields.items():
                factory = info.default_factory
                if inspect.isbuiltin(factory) or (
                    isinstance(factory, type) and getattr(factory, "__text_signature__", None)
                ):
                    builtins.add(f"{cls.__name__}.{field}: {factory!r}")
    assert not builtins
