"""Check SGLang command lines with SGLang's own parser and argument resolution.

Run by ``hack/engines-check.py`` with the SGLang venv's Python; reads the command lines as JSON
on stdin, prints a JSON report after a marker line. Per command line
(``python3 -m sglang.launch_server …``):

1. parse: ``sglang.srt.server_args.prepare_server_args`` — what ``sglang.launch_server`` calls:
   an argparse parser filled by ``ServerArgs.add_cli_args``, then ``ServerArgs.from_cli_args``;
2. SGLang's model-independent resolution: ``ServerArgs.resolve_once`` on the same arguments with
   ``--model-path dummy`` (SGLang's pipeline runs its model-independent checks, then returns early
   for a dummy model; past that point every step needs the model's config and a device);
3. the resolution steps that judge the flags the renderer writes but sit past that point, run on
   the real arguments through SGLang's ``run_hook``: ``handle_pd_disaggregation`` and
   ``handle_hicache`` (they need neither the model nor a device);
4. ``--hicache-storage-backend``: the backend is registered in SGLang's ``StorageBackendFactory``;
   ``--hicache-storage-backend-extra-config`` is parsed by SGLang's own
   ``parse_storage_backend_extra_config`` and every key left is read by that backend's code;
5. the Mooncake environment (``MOONCAKE_*``) of a ``mooncake`` backend: loaded with the backend's
   ``MooncakeStoreConfig.load_from_env`` from the container's env (a ``fieldRef`` value is given a
   placeholder), and every ``MOONCAKE_*`` name the Pod sets is one SGLang declares and the backend
   reads.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import sglang
from common import (
    KeyReads,
    StepFailedError,
    attribute_to_user_args,
    capture,
    emit,
    import_closure,
    read_request,
)
from sglang.srt.arg_groups.arg_utils import record_fields
from sglang.srt.arg_groups.hicache_hook import handle_hicache
from sglang.srt.arg_groups.pd_disaggregation_hook import handle_pd_disaggregation
from sglang.srt.arg_groups.resolution_hooks import run_hook
from sglang.srt.mem_cache.storage.backend_factory import StorageBackendFactory
from sglang.srt.server_args import prepare_server_args

SITE = Path(sglang.__file__).resolve().parent.parent
SRT = SITE / "sglang/srt"
MODULE = "sglang.launch_server"
#: What a fieldRef env value becomes here (the Pod IP in a real Pod).
FIELD_REF_PLACEHOLDER = "pod-ip.invalid"

#: (what, key) → where read.
USED_KEYS: dict[tuple[str, str], list[str]] = {}


def _version() -> str:
    import importlib.metadata

    return importlib.metadata.version("sglang")


def backend_files(name: str) -> list[Path]:
    """The backend's module and what it imports from its own package under ``storage/``."""
    import importlib.util

    module = StorageBackendFactory._registry[name]["module_path"]
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None
    origin = Path(spec.origin)
    storage = SRT / "mem_cache/storage"
    rel = origin.relative_to(storage)
    if len(rel.parts) == 1:
        return [origin]
    root_module = "sglang.srt.mem_cache.storage." + rel.parts[0]
    return import_closure(origin, storage / rel.parts[0], root_module)


#: Files every storage backend's extra config passes through before the backend sees it.
GENERIC_EXTRA_CONFIG_FILES = [
    SRT / "mem_cache/hybrid_cache/hybrid_cache_controller.py",
    SRT / "managers/cache_controller.py",
    SRT / "mem_cache/hicache_storage.py",
]


def extra_config_reads(backend: str) -> KeyReads:
    reads = KeyReads(SITE)
    for path in [*GENERIC_EXTRA_CONFIG_FILES, *backend_files(backend)]:
        reads.scan(path, "extra_config")
    return reads


def env_reads(backend: str) -> KeyReads:
    """``envs.NAME`` attribute reads in the backend's code, keyed by NAME."""
    import ast

    reads = KeyReads(SITE)
    for path in backend_files(backend):
        tree = ast.parse(path.read_text(), str(path))
        reads.files.append(reads.rel(path))
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "envs"
            ):
                where = f"{reads.rel(path)}:{node.lineno}"
                reads.reads.setdefault(node.attr, [])
                if where not in reads.reads[node.attr]:
                    reads.reads[node.attr].append(where)
    return reads


def _engine_args(argv: list[str]) -> list[str]:
    if argv[:3] != ["python3", "-m", MODULE]:
        raise StepFailedError(f"not a `python3 -m {MODULE}` command line: {argv[:3]}")
    return argv[3:]


def _with_model(args: list[str], model: str) -> list[str]:
    out = list(args)
    for i, arg in enumerate(out):
        if arg == "--model-path" and i + 1 < len(out):
            out[i + 1] = model
            return out
        if arg.startswith("--model-path="):
            out[i] = f"--model-path={model}"
            return out
    return [*out, "--model-path", model]


def _resolve_dummy(args: list[str]) -> list[Any]:
    """``resolve_once`` with ``--model-path dummy``; returns the steps SGLang ran, in order."""
    import sglang.srt.arg_groups.pipeline as pipeline

    dummy = prepare_server_args(_with_model(args, "dummy"))
    ran: list[Any] = []
    real = pipeline.run_hook

    def recording(step: Any, server_args: Any) -> Any:
        ran.append(step)
        return real(step, server_args)

    pipeline.run_hook = recording
    try:
        dummy.resolve_once()
    finally:
        pipeline.run_hook = real
    return ran


def _run_steps(args: list[str], steps: list[Any]) -> None:
    """The real arguments through ``steps``, prepared as ``run_resolution_pipeline`` prepares a
    record before its first step."""
    server_args = prepare_server_args(args)
    server_args._raw_input = {
        f.name: getattr(server_args, f.name) for f in record_fields(type(server_args))
    }
    server_args._resolved_overrides = []
    for step in steps:
        capture(step.__name__, lambda step=step: run_hook(step, server_args))


def check_storage(line: dict[str, Any], server_args: Any, checked: list[str]) -> None:
    backend = server_args.hicache_storage_backend
    if backend is None:
        return
    if backend not in StorageBackendFactory._registry:
        raise StepFailedError(f"hicache storage backend {backend!r} is not registered in SGLang")
    raw = server_args.hicache_storage_backend_extra_config
    extra: dict[str, Any] = {}
    if raw:
        from sglang.srt.mem_cache.hybrid_cache.hybrid_cache_controller import (
            HybridCacheController,
        )

        parsed = capture(
            "parse_storage_backend_extra_config",
            lambda: HybridCacheController.parse_storage_backend_extra_config(raw),
        )
        extra = json.loads(raw) if not raw.startswith("@") else parsed[0]
        reads = extra_config_reads(backend)
        for key in extra:
            where = reads.where(key)
            if not where:
                raise StepFailedError(
                    f"--hicache-storage-backend-extra-config key {key!r} is read nowhere in "
                    f"{', '.join(reads.files)}"
                )
            USED_KEYS[(f"hicache extra config ({backend})", key)] = where
        checked.append("extra-config " + ",".join(extra))
    if backend == "mooncake":
        check_mooncake_env(line, extra, checked)
    checked.append(f"storage backend {backend}")


def check_mooncake_env(line: dict[str, Any], extra: dict[str, Any], checked: list[str]) -> None:
    from sglang.srt.environ import envs
    from sglang.srt.mem_cache.storage.mooncake_store.mooncake_store import MooncakeStoreConfig

    env = {
        k: (FIELD_REF_PLACEHOLDER if v is None else v) for k, v in (line.get("env") or {}).items()
    }
    reads = env_reads("mooncake")
    for name in env:
        if not name.startswith("MOONCAKE_") or name in (line.get("user_env") or []):
            continue  # not a Mooncake name, or the user's own
        if not hasattr(envs, name):
            raise StepFailedError(f"env {name} is not one SGLang declares (sglang.srt.environ)")
        where = reads.where(name)
        if not where:
            raise StepFailedError(f"env {name} is read nowhere in {', '.join(reads.files)}")
        USED_KEYS[("mooncake backend env", name)] = where
    if extra.get("master_server_address") or extra.get("client_server_address"):
        load = lambda: MooncakeStoreConfig.load_from_extra_config(extra)  # noqa: E731
        how = "load_from_extra_config"
    elif "SGLANG_HICACHE_MOONCAKE_CONFIG_PATH" in env:
        raise StepFailedError(
            "SGLANG_HICACHE_MOONCAKE_CONFIG_PATH: a file vehicle is not checked here"
        )
    else:
        load = MooncakeStoreConfig.load_from_env
        how = "load_from_env"
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update({k: str(v) for k, v in env.items()})
    try:
        capture(f"MooncakeStoreConfig.{how}", load)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    checked.append(f"MooncakeStoreConfig.{how}")


def check_argv(line: dict[str, Any], argv: list[str]) -> list[str]:
    args = _engine_args(argv)
    checked: list[str] = []
    server_args = capture("parse", lambda: prepare_server_args(args))
    checked.append("parse")
    early = capture("resolve_once (model-independent part)", lambda: _resolve_dummy(args))
    checked.append(f"resolve_once(dummy model: {len(early)} steps)")
    # The model-independent steps again on the real arguments, then the two steps past the
    # dummy return that judge the renderer's flags (the steps between them need the model).
    _run_steps(args, [*early, handle_pd_disaggregation, handle_hicache])
    checked += ["handle_pd_disaggregation", "handle_hicache"]
    check_storage(line, server_args, checked)
    return checked


def check_line(line: dict[str, Any]) -> dict[str, Any]:
    try:
        checked = check_argv(line, line["argv"])
        return {"id": line["id"], "status": "OK", "checked": checked, "notes": []}
    except StepFailedError as exc:
        note = attribute_to_user_args(line, lambda argv: check_argv(line, argv))
        notes = [note] if note else []
        return {"id": line["id"], "status": "FAIL", "error": str(exc), "notes": notes}


def negative_controls() -> list[dict[str, Any]]:
    base = ["python3", "-m", MODULE, "--model-path", "m"]
    env = {"MOONCAKE_MASTER": "master:50051", "MOONCAKE_PROTOCOL": "tcp"}
    controls = [
        ("unknown flag", [*base, "--no-such-flag-gpustack"]),
        ("unknown storage backend", [*base, "--hicache-storage-backend", "mooncake2"]),
        (
            "extra-config key no code reads",
            [
                *base,
                "--hicache-storage-backend",
                "mooncake",
                "--enable-hierarchical-cache",
                "--hicache-storage-backend-extra-config",
                '{"no_such_key_gpustack":"x"}',
            ],
        ),
        (
            "extra-config not JSON",
            [
                *base,
                "--hicache-storage-backend",
                "mooncake",
                "--hicache-storage-backend-extra-config",
                "{x",
            ],
        ),
        (
            "invalid --disaggregation-mode value",
            [*base, "--disaggregation-mode", "decoder"],
        ),
    ]
    out = []
    for name, argv in controls:
        try:
            check_argv({"id": -1, "env": env}, argv)
            out.append({"name": name, "refused": False, "message": "accepted"})
        except StepFailedError as exc:
            out.append({"name": name, "refused": True, "message": str(exc)[:300]})
    try:
        check_argv(
            {"id": -1, "env": {"MOONCAKE_NO_SUCH_GPUSTACK": "1", **env}},
            [*base, "--hicache-storage-backend", "mooncake"],
        )
        out.append({"name": "unknown MOONCAKE_ env", "refused": False, "message": "accepted"})
    except StepFailedError as exc:
        out.append({"name": "unknown MOONCAKE_ env", "refused": True, "message": str(exc)[:300]})
    return out


def main() -> None:
    request = read_request()
    results = [check_line(line) for line in request["lines"]]
    report: dict[str, Any] = {"results": results}
    if request.get("controls"):
        report["controls"] = negative_controls()
    report["keys"] = [
        f"{what} {key!r}: read at {', '.join(where)}"
        for (what, key), where in sorted(USED_KEYS.items())
    ]
    report["notes"] = [f"sglang {_version()} at {SITE}"]
    emit(report)


if __name__ == "__main__":
    sys.exit(main())
