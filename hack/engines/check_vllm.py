"""Check vLLM command lines with vLLM's own parser and configuration classes.

Run by ``hack/engines-check.py`` with the vLLM venv's Python; reads the command lines as JSON on
stdin, prints a JSON report after a marker line. Per command line (``vllm serve …``):

1. parse: the ``serve`` sub-parser exactly as ``vllm`` builds it (``vllm/entrypoints/cli/main.py``:
   a ``FlexibleArgumentParser`` with ``ServeSubcommand.subparser_init``, i.e. ``make_arg_parser``
   of ``vllm/entrypoints/common/cli_args.py``); the JSON flags (``--kv-transfer-config``,
   ``--kv-events-config``, ``--engram-config``, …) become vLLM's pydantic configs here;
2. ``ServeSubcommand.validate`` (``validate_parsed_serve_args``);
3. ``AsyncEngineArgs.from_cli_args``;
4. ``create_engine_config`` up to and including ``ParallelConfig``: the real code path with two
   stand-ins, since no model files can be had here: the model config (``create_model_config``
   inspects the architecture, which imports CUDA kernels) and the speculator probe (it downloads
   the model's config). ``DeviceConfig``, the data-parallel checks, ``CacheConfig``
   (``--kv-cache-dtype``, ``--block-size``) and ``ParallelConfig`` (world size against the Pod's
   GPUs, EPLB/Elastic EP) are vLLM's own;
5. the KV transfer document: each connector (``MultiConnector`` children too, built as
   ``MultiConnector`` builds them) is in vLLM's ``KVConnectorFactory`` registry, and every key in
   its ``kv_connector_extra_config`` is read somewhere in that connector's code;
6. the Mooncake client file (``MOONCAKE_CONFIG_PATH``) for ``MooncakeStoreConnector``: the file
   the Pod projects there is loaded with ``MooncakeStoreConfig.load_from_config`` and every key in
   it is one ``MooncakeStoreConfig.from_file`` reads.

Platform: importing ``vllm.platforms.cuda`` needs ``libcuda.so.1`` (no driver here), so a Pod with
GPUs is checked with a stand-in CUDA platform whose ``device_count()`` is the Pod's GPU limit; a
Pod without accelerators gets vLLM's own CPU platform (``VLLM_TARGET_DEVICE=cpu``).
"""

from __future__ import annotations

import difflib
import os
import sys
import tempfile
import types
from pathlib import Path
from typing import Any

from common import (
    KeyReads,
    StepFailedError,
    attribute_to_user_args,
    capture,
    emit,
    import_closure,
    read_request,
)

PLATFORM = os.environ.get("GPUSTACK_CHECK_PLATFORM", "cuda")
if PLATFORM == "cpu":
    os.environ["VLLM_TARGET_DEVICE"] = "cpu"
else:
    import vllm.platforms as _platforms
    from vllm.platforms.interface import Platform, PlatformEnum

    class PodGpus(Platform):
        """CUDA as the parser and ``ParallelConfig`` see it, with the Pod's GPU count."""

        _enum = PlatformEnum.CUDA
        device_name = "cuda"
        device_type = "cuda"
        dispatch_key = "CUDA"
        ray_device_key = "GPU"
        dist_backend = "nccl"
        device_control_env_var = "CUDA_VISIBLE_DEVICES"
        gpus = 1

        @classmethod
        def device_count(cls) -> int:
            return cls.gpus

    _platforms._current_platform = PodGpus()  # type: ignore[attr-defined]
    _platforms.current_platform = _platforms._current_platform  # type: ignore[attr-defined]

import torch  # noqa: E402
import vllm  # noqa: E402
import vllm.engine.arg_utils as arg_utils  # noqa: E402
from vllm.config.kv_transfer import KVTransferConfig  # noqa: E402
from vllm.distributed.kv_transfer.kv_connector.factory import KVConnectorFactory  # noqa: E402
from vllm.distributed.mooncake_store import MooncakeStoreConfig  # noqa: E402
from vllm.engine.arg_utils import AsyncEngineArgs  # noqa: E402
from vllm.entrypoints.cli.serve import ServeSubcommand  # noqa: E402
from vllm.utils.argparse_utils import FlexibleArgumentParser  # noqa: E402

SITE = Path(vllm.__file__).resolve().parent.parent
V1 = SITE / "vllm/distributed/kv_transfer/kv_connector/v1"
#: Connectors of the vllm-ascend plugin (not installed here: its registry is not vLLM's).
ASCEND_CONNECTORS = {"AscendStoreConnector", "MooncakeConnectorV1"}
STORE = "MooncakeStoreConnector"


def build_parser() -> tuple[FlexibleArgumentParser, ServeSubcommand]:
    """The ``vllm`` CLI parser with its ``serve`` sub-command, as ``vllm``'s main() builds it."""
    parser = FlexibleArgumentParser(description="vLLM CLI")
    subparsers = parser.add_subparsers(required=False, dest="subparser")
    cmd = ServeSubcommand()
    cmd.subparser_init(subparsers).set_defaults(dispatch_function=cmd.cmd)
    return parser, cmd


PARSER, SERVE = build_parser()


class _StopError(Exception):
    """Raised once ``ParallelConfig`` is built: the rest needs the model's files."""


class ModelStandIn:
    """What ``create_engine_config`` reads of the model config before ``ParallelConfig``."""

    def __init__(self, ea: Any) -> None:
        self.model = ea.model
        self.model_weights = getattr(ea, "model_weights", None)
        self.tokenizer = ea.tokenizer or ea.model
        self.hf_text_config = types.SimpleNamespace(layer_types=None)
        self.hf_config = None
        self.is_attention_free = False
        # Expert parallelism is only asked of a mixture-of-experts model.
        self.is_moe = bool(ea.enable_expert_parallel)
        self.runner_type = "generate"
        self.is_chunked_prefill_supported = True
        self.is_prefix_caching_supported = True
        self.skip_tokenizer_init = False
        self.dtype = torch.bfloat16
        self.max_model_len = 8192

    def get_sliding_window(self) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(f"model stand-in: create_engine_config read {name!r}")


def engine_configs(ea: Any) -> tuple[Any, Any]:
    """Run ``create_engine_config`` until ``ParallelConfig`` exists; return (cache, parallel)."""
    real_parallel, real_cache = arg_utils.ParallelConfig, arg_utils.CacheConfig
    real_probe = arg_utils.maybe_override_with_speculators
    built: dict[str, Any] = {}

    def cache(*args: Any, **kwargs: Any) -> Any:
        built["cache"] = real_cache(*args, **kwargs)
        return built["cache"]

    class Parallel:
        # create_engine_config reads these class defaults before constructing one.
        distributed_executor_backend = real_parallel.distributed_executor_backend
        data_parallel_master_ip = real_parallel.data_parallel_master_ip
        data_parallel_rpc_port = real_parallel.data_parallel_rpc_port
        cp_kv_cache_interleave_size = real_parallel.cp_kv_cache_interleave_size

        def __new__(cls, *args: Any, **kwargs: Any) -> Any:
            built["parallel"] = real_parallel(*args, **kwargs)
            raise _StopError

    ea.create_model_config = lambda: ModelStandIn(ea)
    arg_utils.maybe_override_with_speculators = lambda **kw: (
        kw["model"],
        kw["tokenizer"],
        kw["vllm_speculative_config"],
    )
    arg_utils.ParallelConfig, arg_utils.CacheConfig = Parallel, cache  # type: ignore[misc]
    try:
        ea.create_engine_config()
    except _StopError:
        pass
    finally:
        arg_utils.ParallelConfig, arg_utils.CacheConfig = real_parallel, real_cache
        arg_utils.maybe_override_with_speculators = real_probe
    return built["cache"], built["parallel"]


# --- Which keys vLLM's code reads -------------------------------------------------------------


def connector_files(name: str) -> list[Path]:
    """The connector's module and what it imports from its own package under ``v1/``."""
    import importlib.util

    loader = KVConnectorFactory._registry[name]
    cells = {c.cell_contents for c in loader.__closure__ or [] if isinstance(c.cell_contents, str)}
    module = next(c for c in cells if c.startswith("vllm."))
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None
    origin = Path(spec.origin)
    rel = origin.relative_to(V1)
    if len(rel.parts) == 1:
        return [origin]
    root = V1 / rel.parts[0]
    root_module = "vllm.distributed.kv_transfer.kv_connector.v1." + rel.parts[0]
    return import_closure(origin, root, root_module)


_READS: dict[str, KeyReads] = {}


def extra_config_reads(name: str) -> KeyReads:
    if name not in _READS:
        reads = KeyReads(SITE)
        for path in connector_files(name):
            reads.scan(path, "extra_config")
        _READS[name] = reads
    return _READS[name]


CLIENT_FILE_READS = KeyReads(SITE).scan(
    SITE / "vllm/distributed/mooncake_store.py", "config", function="from_file"
)
CONFIG_PATH_READ = KeyReads(SITE).scan(
    SITE / "vllm/distributed/mooncake_store.py", "environ", function="load_from_config"
)

#: (what, key) → where read, for every key the command lines used.
USED_KEYS: dict[tuple[str, str], list[str]] = {}


# --- The checks -------------------------------------------------------------------------------


def connectors(ktc: Any) -> list[tuple[str, dict[str, Any], Any]]:
    """(name, extra config, KVTransferConfig) for the connector and each MultiConnector child."""
    out = [(ktc.kv_connector, dict(ktc.kv_connector_extra_config), ktc)]
    if ktc.kv_connector == "MultiConnector":
        for child in ktc.kv_connector_extra_config.get("connectors", []):
            # As MultiConnector builds its children (multi_connector.py).
            child_ktc = capture(
                "MultiConnector child KVTransferConfig",
                lambda child=child: KVTransferConfig(**{"engine_id": ktc.engine_id, **child}),
            )
            out += [(child_ktc.kv_connector, dict(child_ktc.kv_connector_extra_config), child_ktc)]
    return out


def check_kv_transfer(line: dict[str, Any], ktc: Any, checked: list[str], notes: list[str]) -> None:
    names = []
    for name, extra, _ in connectors(ktc):
        names.append(name)
        if name in ASCEND_CONNECTORS:
            if line.get("accelerator") != "ascend" and "ascend" not in line.get("image", ""):
                raise StepFailedError(
                    f"kv connector {name} is vllm-ascend's, but the Pod asks for no Ascend NPU "
                    f"and its image is {line.get('image')}"
                )
            notes.append(f"{name}: a vllm-ascend connector, not in vLLM's registry; not checked")
            continue
        if name not in KVConnectorFactory._registry:
            raise StepFailedError(f"kv connector {name!r} is not registered in vLLM's factory")
        reads = extra_config_reads(name)
        for key in extra:
            if name == "MultiConnector" and key == "connectors":
                where = KeyReads(SITE).scan(V1 / "multi_connector.py", "extra_config").where(key)
            else:
                where = reads.where(key)
            if not where:
                raise StepFailedError(
                    f"{name}: kv_connector_extra_config key {key!r} is read nowhere in "
                    f"{', '.join(reads.files)}"
                )
            USED_KEYS[(f"{name} kv_connector_extra_config", key)] = where
    checked.append("KVTransferConfig " + "+".join(names))
    if STORE in names:
        check_client_file(line, checked)


def check_client_file(line: dict[str, Any], checked: list[str]) -> None:
    """The file ``MOONCAKE_CONFIG_PATH`` names, as the store worker loads it."""
    env = line.get("env") or {}
    path = env.get("MOONCAKE_CONFIG_PATH")
    if not path:
        raise StepFailedError(
            "MooncakeStoreConnector without MOONCAKE_CONFIG_PATH in the container env"
        )
    content = (line.get("files") or {}).get(path)
    if content is None:
        raise StepFailedError(f"MOONCAKE_CONFIG_PATH={path} is not a file the Pod projects")
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        fh.write(content)
    old = os.environ.get("MOONCAKE_CONFIG_PATH")
    os.environ["MOONCAKE_CONFIG_PATH"] = fh.name
    try:
        capture("MooncakeStoreConfig.load_from_config", MooncakeStoreConfig.load_from_config)
    finally:
        os.unlink(fh.name)
        if old is None:
            os.environ.pop("MOONCAKE_CONFIG_PATH", None)
        else:
            os.environ["MOONCAKE_CONFIG_PATH"] = old
    import json

    for key in json.loads(content):
        where = CLIENT_FILE_READS.where(key)
        if not where:
            raise StepFailedError(
                f"Mooncake client file key {key!r} is not read by MooncakeStoreConfig.from_file"
            )
        USED_KEYS[("Mooncake client file (MOONCAKE_CONFIG_PATH)", key)] = where
    checked.append("MooncakeStoreConfig(file)")


def check_argv(line: dict[str, Any], argv: list[str]) -> tuple[list[str], list[str]]:
    """Every step on one argv; raises :class:`StepFailedError`. Returns (checked, notes)."""
    checked: list[str] = []
    notes: list[str] = []
    if argv[:2] != ["vllm", "serve"]:
        raise StepFailedError(f"not a `vllm serve` command line: {argv[:3]}")
    if PLATFORM != "cpu":
        PodGpus.gpus = max(int(line.get("gpus") or 1), 1)
    args = capture("parse", lambda: PARSER.parse_args(argv[1:]))
    checked.append("parse")
    capture("validate", lambda: SERVE.validate(args))
    if getattr(args, "model_tag", None) is not None:  # as ServeSubcommand.cmd does
        args.model = args.model_tag
    ea = capture("AsyncEngineArgs.from_cli_args", lambda: AsyncEngineArgs.from_cli_args(args))
    cache, parallel = capture("create_engine_config", lambda: engine_configs(ea))
    checked.append(f"CacheConfig(dtype={cache.cache_dtype})")
    checked.append(
        f"ParallelConfig(world={parallel.world_size}, dp={parallel.data_parallel_size}, "
        f"backend={parallel.distributed_executor_backend})"
    )
    if args.kv_transfer_config is not None:
        check_kv_transfer(line, args.kv_transfer_config, checked, notes)
    if args.kv_events_config is not None:
        checked.append("KVEventsConfig")
    if getattr(args, "engram_config", None) is not None:
        checked.append("EngramConfig")
    return checked, notes


def injected_tokens(before: list[str], after: list[str]) -> list[str]:
    """The tokens ``after`` inserts into ``before`` (the injector's additions)."""
    added: list[str] = []
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    for op, _, _, j1, j2 in matcher.get_opcodes():
        if op in ("insert", "replace"):
            added += after[j1:j2]
    return added


def check_line(line: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = {"id": line["id"]}
    try:
        checked, notes = check_argv(line, line["argv"])
        result.update(status="OK", checked=checked, notes=notes)
        return result
    except StepFailedError as exc:
        error = str(exc)
    result.update(status="FAIL", error=error, notes=[])
    note = attribute_to_user_args(line, lambda argv: check_argv(line, argv))
    if note:
        result["notes"].append(note)
    before = line.get("input_argv")
    if before:
        try:
            check_argv(line, before)
        except StepFailedError as exc:
            if str(exc) == error:
                added = injected_tokens(before, line["argv"])
                base = ["vllm", "serve", "placeholder/model"]
                try:
                    check_argv({**line, "input_argv": None}, base + added)
                    verdict = "they pass"
                except StepFailedError as inner:
                    verdict = f"they fail: {inner}"
                    return result
                result["status"] = "INPUT"
                result["notes"] = [f"the injected tokens {added} checked alone: {verdict}"]
    return result


#: The start of an Elastic EP master's line (docs/contract/elastic-ep.md §3.3).
ELASTIC = [
    "vllm",
    "serve",
    "m",
    "--data-parallel-backend",
    "ray",
    "--data-parallel-size",
    "2",
    "--data-parallel-size-local",
    "1",
    "--enable-expert-parallel",
    "--data-parallel-address",
    "192.0.2.10",
]


def negative_controls() -> list[dict[str, Any]]:
    controls = [
        ("unknown flag", ["vllm", "serve", "m", "--no-such-flag-gpustack", "1"]),
        (
            "bad kv_role",
            [
                "vllm",
                "serve",
                "m",
                "--kv-transfer-config",
                '{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_sender"}',
            ],
        ),
        (
            "unknown KVTransferConfig key",
            [
                "vllm",
                "serve",
                "m",
                "--kv-transfer-config",
                '{"kv_connector":"MooncakeStoreConnector","kv_role":"kv_both","cache_prefix":"x"}',
            ],
        ),
        (
            "extra-config key no code reads",
            [
                "vllm",
                "serve",
                "m",
                "--kv-transfer-config",
                '{"kv_connector":"MooncakeStoreConnector",'
                '"kv_role":"kv_both","kv_connector_extra_config":'
                '{"no_such_key_gpustack":"x"}}',
            ],
        ),
        ("tensor parallel beyond the Pod's GPUs", ["vllm", "serve", "m", "-tp", "4"]),
        # The Elastic EP master's line needs EPLB (ParallelConfig), and, without the NIXL
        # package (none here, nor in every image), synchronous EPLB: the reference's flags
        # alone are refused, which is why the renderer adds --eplb-config.use_async false.
        ("Elastic EP without EPLB", [*ELASTIC, "--enable-elastic-ep"]),
        (
            "Elastic EP with asynchronous EPLB and no NIXL",
            [*ELASTIC, "--enable-eplb", "--enable-elastic-ep"],
        ),
        ("bad kv cache dtype", ["vllm", "serve", "m", "--kv-cache-dtype", "float13"]),
    ]
    out = []
    env = {"MOONCAKE_CONFIG_PATH": "/x/m.json"}
    files = {"/x/m.json": '{"mode":"standalone-store","global_segment_size":0}'}
    for name, argv in controls:
        line = {"id": -1, "gpus": 1, "image": "vllm", "env": env, "files": files}
        try:
            check_argv(line, argv)
            out.append({"name": name, "refused": False, "message": "accepted"})
        except StepFailedError as exc:
            out.append({"name": name, "refused": True, "message": str(exc)[:300]})
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
    report["keys"] += [
        f"MOONCAKE_CONFIG_PATH: read at {', '.join(CONFIG_PATH_READ.where('MOONCAKE_CONFIG_PATH'))}"
    ]
    report["notes"] = [f"platform: {PLATFORM}; vllm {vllm.__version__} at {SITE}"]
    emit(report)


if __name__ == "__main__":
    sys.exit(main())
