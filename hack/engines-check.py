"""Run every engine command line in the golden files through the engine's own parser.

Usage: ``python hack/engines-check.py [GOLDEN_DIR] [--engine vllm|sglang] [--no-install]
[--list]`` (``make engines-check``). ``GOLDEN_DIR`` defaults to ``golden/`` beside this script.

What it does:

1. Collects the engine command lines: the ``main`` container of every Pod in
   ``golden/render-*/rendered.yaml`` whose role is managed (a take-over role's ``command`` is the
   user's own and is skipped, as are the routing proxy and router Deployments), and every
   container of the output Pod (``object``) in ``golden/inject-*/verdict.yaml`` that launches an
   engine, directly or through a launcher (``env``, ``tini``, ``dumb-init``, ``timeout``,
   ``busybox``/``toybox``, an unknown wrapper followed by the engine's own argv). An Elastic EP
   master's ``/bin/sh -c "…; exec \"$@\" <tail>" elastic-serve <argv>`` is unwrapped to the
   line the shell execs: ``<argv>`` then ``<tail>``, its ``$VAR`` words read from the
   container's env (``status.podIP`` stands in as ``192.0.2.10``); the Elastic EP workers and the
   Ray head run no engine and are skipped.
2. Installs each engine, when its venv is missing or holds another version, into
   ``~/.cache/gpustack-render/engines/<engine>-<version>`` (``GPUSTACK_ENGINES_CACHE`` moves it),
   with ``python3.11 -m venv`` and ``pip install <engine>==<version>``, then the packages the
   engine's images carry beside it that a check needs (:data:`BESIDE`: Ray for vLLM, whose
   ``ParallelConfig`` imports it for the Elastic EP master's Ray data-parallel backend).
3. Runs ``hack/engines/check_<engine>.py`` with that venv's Python: it parses each command line
   with the engine's own CLI parser, builds the engine's argument object and the configurations
   that need neither model files nor a GPU, checks the Mooncake keys against what the engine's
   code reads, and runs negative controls (a command line the parser must refuse).
4. Prints one line per command line, a summary, and exits 1 when any check failed or an engine
   had nothing to check.

Every line is ``STATUS engine case pod/container [role] detail``; STATUS is ``OK``, ``FAIL`` or
``INPUT`` (an injected Pod whose input command line the engine already refused with the same
message: the user's own flags, not the injector's; the flags the injector added are then checked
separately on the input's argv, see ``injected_only``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
CHECKERS = Path(__file__).resolve().parent / "engines"

#: engine → (PyPI distribution, pinned version).
ENGINES: dict[str, tuple[str, str]] = {
    "vllm": ("vllm", "0.33.0"),
    "sglang": ("sglang", "0.5.23"),
}
#: engine → packages its serving images hold beside it that the checks need, (distribution,
#: version): vLLM's ``ParallelConfig`` imports Ray for ``--data-parallel-backend ray`` (the
#: Elastic EP master); 2.56.1 is the Ray GPUStack's Elastic EP documents pin.
BESIDE: dict[str, tuple[tuple[str, str], ...]] = {
    "vllm": (("ray", "2.56.1"),),
    "sglang": (),
}
#: The interpreter each engine venv is built with.
VENV_PYTHON = os.environ.get("GPUSTACK_ENGINES_PYTHON", "python3.11")
CACHE = Path(
    os.environ.get("GPUSTACK_ENGINES_CACHE", Path.home() / ".cache" / "gpustack-render" / "engines")
)

INJECTED_ANNOTATION = "kvcache.gpustack.ai/injected"
CLIENT_CONFIG_ANNOTATION = "kvcache.gpustack.ai/client-config"
PYTHON_RE = re.compile(r"^python(3(\.\d+)?)?$")
#: Python interpreter options that take a value (the rest are single flags).
PYTHON_VALUE_OPTS = frozenset({"-X", "-W", "-Q"})
#: The module each engine is launched as with ``python -m``.
ENGINE_MODULES = {
    "sglang.launch_server": "sglang",
    "vllm.entrypoints.openai.api_server": "vllm",
}
#: What stands in for a variable the shell expands from a ``fieldRef`` (no Pod runs here).
FIELD_STAND_INS = {
    "status.podIP": "192.0.2.10",
    "metadata.uid": "00000000-0000-0000-0000-000000000000",
}
SHELL_EXEC = re.compile(r'exec\s+"\$@"(?P<tail>[^;&|]*)$')
SHELL_VAR = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?")
#: The Ray head's component suffix and an Elastic EP role's master ordinal.
ELASTIC_HEAD_SUFFIX = "-elastic-head"
ORDINAL_LABEL = "modeldeployment.gpustack.ai/pod-ordinal"


# --- Finding the engine argv inside a container's argv --------------------------------------


@dataclass(frozen=True)
class Launch:
    """An engine invocation found in a container's argv."""

    engine: str
    #: The engine's argv from its program on: ``vllm serve …`` or ``python3 -m sglang…``.
    argv: list[str]
    #: How it was found, when not directly (the launchers skipped).
    via: list[str] = field(default_factory=list)


def _skip_options(argv: list[str], i: int, with_value: frozenset[str]) -> int:
    """Skip ``-x``/``--long`` options from ``i`` (``--`` ends them); return the next index."""
    while i < len(argv):
        arg = argv[i]
        if arg == "--":
            return i + 1
        if not arg.startswith("-") or arg == "-":
            return i
        i += 2 if arg in with_value else 1
    return i


def _unwrap_env(argv: list[str], i: int) -> tuple[list[str], int]:
    """``env [-i] [-u NAME] [-C DIR] [-S STRING] [NAME=VALUE]… PROGRAM…`` → (argv, index)."""
    while i < len(argv):
        arg = argv[i]
        if arg in ("-u", "--unset", "-C", "--chdir"):
            i += 2
        elif arg in ("-S", "--split-string"):
            # The string is split into words that take its place (GNU env's -S).
            words = shlex.split(argv[i + 1]) if i + 1 < len(argv) else []
            argv = argv[:i] + words + argv[i + 2 :]
        elif arg.startswith("-S") and len(arg) > 2:
            argv = argv[:i] + shlex.split(arg[2:]) + argv[i + 1 :]
        elif arg == "--":
            i += 1
            break
        elif arg.startswith("-") or "=" in arg:
            i += 1
        else:
            break
    return argv, i


def _unwrap_timeout(argv: list[str], i: int) -> int:
    """``timeout [-s SIG] [-k DUR] [--flags] DURATION PROGRAM…`` → the program's index."""
    i = _skip_options(argv, i, frozenset({"-s", "--signal", "-k", "--kill-after"}))
    return i + 1  # the duration


def _unwrap_shell_exec(
    argv: list[str], i: int, env: dict[str, str | None] | None
) -> list[str] | None:
    """``sh -c 'SCRIPT' NAME ARG…`` whose script ends in ``exec "$@" TAIL``: the line the shell
    execs, ``ARG…`` then TAIL split as the shell splits it, each ``$VAR`` read from ``env``
    (None when the shape is another)."""
    if argv[i + 1 : i + 2] != ["-c"] or len(argv) < i + 5:
        return None
    found = SHELL_EXEC.search(str(argv[i + 2]).strip())
    if found is None:
        return None
    values = env or {}

    def expand(word: str) -> str:
        return SHELL_VAR.sub(lambda m: values.get(m.group(1)) or m.group(0), word)

    return [*argv[i + 4 :], *(expand(w) for w in shlex.split(found.group("tail")))]


def find_launch(argv: list[str], env: dict[str, str | None] | None = None) -> Launch | None:
    """The engine invocation in ``argv``, unwrapping the launchers that exec it; ``env`` (the
    container's variables, fieldRefs by their stand-ins) expands the words a shell adds."""
    via: list[str] = []
    i = 0
    while i < len(argv):
        prog = os.path.basename(str(argv[i]))
        rest = argv[i + 1 :]
        if prog == "vllm" and rest[:1] == ["serve"]:
            return Launch("vllm", ["vllm", *rest], via)
        if PYTHON_RE.match(prog):
            j = _skip_options_python(argv, i + 1)
            if j + 1 < len(argv) and argv[j] == "-m" and argv[j + 1] in ENGINE_MODULES:
                engine = ENGINE_MODULES[argv[j + 1]]
                return Launch(engine, ["python3", "-m", argv[j + 1], *argv[j + 2 :]], via)
            return None
        via.append(prog)
        if prog in ("busybox", "toybox"):
            i += 1  # the applet follows
        elif prog == "env":
            argv, i = _unwrap_env(argv, i + 1)
        elif prog == "timeout":
            i = _unwrap_timeout(argv, i + 1)
        elif prog == "tini":
            i = _skip_options(argv, i + 1, frozenset({"-p", "-e"}))
        elif prog == "dumb-init":
            i = _skip_options(argv, i + 1, frozenset({"-r", "--rewrite"}))
        elif prog in ("sh", "bash", "dash"):
            line = _unwrap_shell_exec(argv, i, env)
            if line is None:
                return None  # any other shell line is not split here
            found = find_launch(line, env)
            if found is None:
                return None
            return Launch(found.engine, found.argv, [*via, 'sh -c exec "$@"', *found.via])
        else:
            # An unknown wrapper: the engine's own argv must follow it verbatim.
            for j in range(i + 1, len(argv)):
                found = find_launch(argv[j:])
                if found is not None:
                    return Launch(found.engine, found.argv, [*via, *found.via])
            return None
    return None


def _skip_options_python(argv: list[str], i: int) -> int:
    """Skip the interpreter's own options before ``-m``."""
    while i < len(argv):
        arg = str(argv[i])
        if arg == "-m" or not arg.startswith("-"):
            return i
        i += 2 if arg in PYTHON_VALUE_OPTS else 1
    return i


# --- Collecting the command lines from the golden files -------------------------------------


@dataclass
class CommandLine:
    """One engine command line to check."""

    id: int
    case: str
    pod: str
    container: str
    role: str
    engine: str
    argv: list[str]
    via: list[str] = field(default_factory=list)
    #: The Pod's Mooncake client-config annotation (vLLM's file vehicle), parsed.
    client_config: dict[str, Any] | None = None
    #: The container's literal env values (``valueFrom`` entries are ``None``).
    env: dict[str, str | None] = field(default_factory=dict)
    #: For an injected Pod: the engine argv of the same container in the input Pod.
    input_argv: list[str] | None = None
    #: Env names the user declared (the role's ``env``, or the input Pod's container): judged as
    #: the user's own, not the renderer's.
    user_env: list[str] = field(default_factory=list)
    #: The role's ``extraArgs`` (the user's own flags; the renderer appends them last).
    user_args: list[str] = field(default_factory=list)
    #: A note on how the argv was completed (an assumed entrypoint), shown on its line.
    note: str = ""
    image: str = ""
    #: Accelerators the container's limits ask for (GPUs, NPUs, GPU slices count as one).
    gpus: int = 0
    accelerator: str = ""
    #: Files the Pod projects into the container (downwardAPI annotations, ConfigMaps):
    #: path → content.
    files: dict[str, str] = field(default_factory=dict)


@dataclass
class Skipped:
    case: str
    pod: str
    container: str
    reason: str


@dataclass
class Collected:
    lines: list[CommandLine] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)

    def add(self, **kwargs: Any) -> None:
        self.lines.append(CommandLine(id=len(self.lines), **kwargs))


def _docs(path: Path) -> list[dict[str, Any]]:
    with path.open() as fh:
        return [d for d in yaml.safe_load_all(fh) if isinstance(d, dict)]


def _argv(container: dict[str, Any]) -> list[str]:
    return [str(a) for a in (container.get("command") or []) + (container.get("args") or [])]


def _env(container: dict[str, Any]) -> dict[str, str | None]:
    return {e["name"]: e.get("value") for e in container.get("env") or []}


def _shell_env(container: dict[str, Any]) -> dict[str, str | None]:
    """The values a shell in the container reads: literal values, and a stand-in for each
    ``fieldRef`` that has one (:data:`FIELD_STAND_INS`)."""
    out: dict[str, str | None] = {}
    for e in container.get("env") or []:
        ref = ((e.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
        out[e["name"]] = FIELD_STAND_INS.get(ref) if ref else e.get("value")
    return out


def _pod_name(pod: dict[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    if meta.get("name"):
        return str(meta["name"])
    ordinal = (meta.get("labels") or {}).get("modeldeployment.gpustack.ai/pod-ordinal", "")
    return f"{meta.get('generateName', '?')}[{ordinal}]"


def _accelerators(container: dict[str, Any]) -> tuple[int, str]:
    limits = (container.get("resources") or {}).get("limits") or {}
    for key, kind in (("nvidia.com/gpu", "nvidia"), ("huawei.com/npu", "ascend")):
        for name, value in limits.items():
            if name == key or name.startswith(key + "."):
                return max(int(str(value)), 1), kind
    return 0, ""


_ANNOTATION_REF = re.compile(r"^metadata\.annotations\['(.+)'\]$")


def _projected_files(
    pod: dict[str, Any], container: dict[str, Any], config_maps: dict[str, dict[str, str]]
) -> dict[str, str]:
    """path → content for the downwardAPI annotation items and ConfigMap keys mounted."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    volumes = {v["name"]: v for v in pod["spec"].get("volumes") or []}
    files: dict[str, str] = {}
    for mount in container.get("volumeMounts") or []:
        volume = volumes.get(mount["name"]) or {}
        base = mount["mountPath"].rstrip("/")
        for item in (volume.get("downwardAPI") or {}).get("items") or []:
            ref = _ANNOTATION_REF.match((item.get("fieldRef") or {}).get("fieldPath", ""))
            if ref and ref.group(1) in annotations:
                files[f"{base}/{item['path']}"] = annotations[ref.group(1)]
        if "configMap" in volume:
            data = config_maps.get(volume["configMap"].get("name", ""), {})
            items = volume["configMap"].get("items") or [{"key": k, "path": k} for k in data]
            for item in items:
                if item["key"] in data:
                    files[f"{base}/{item['path']}"] = data[item["key"]]
    return files


def _pod_facts(
    pod: dict[str, Any], container: dict[str, Any], config_maps: dict[str, dict[str, str]]
) -> dict[str, Any]:
    gpus, accelerator = _accelerators(container)
    return {
        "image": str(container.get("image", "")),
        "gpus": gpus,
        "accelerator": accelerator,
        "files": _projected_files(pod, container, config_maps),
    }


def _client_config(pod: dict[str, Any]) -> dict[str, Any] | None:
    raw = ((pod.get("metadata") or {}).get("annotations") or {}).get(CLIENT_CONFIG_ANNOTATION)
    return json.loads(raw) if raw else None


def collect_render(case_dir: Path, out: Collected) -> None:
    """The ``main`` container of every managed role's Pod in ``rendered.yaml``."""
    case = case_dir.name
    take_over: set[str] = set()
    engine_of: dict[str, str] = {}
    user_env: dict[str, list[str]] = {}
    user_args: dict[str, list[str]] = {}
    elastic: set[str] = set()
    heads: set[str] = set()
    for doc in _docs(case_dir / "input.yaml"):
        if doc.get("kind") != "ModelDeployment":
            continue
        spec = doc.get("spec") or {}
        name = str((spec.get("engine") or {}).get("name", "")).lower()
        for role in spec.get("roles") or []:
            if role.get("elasticEp"):
                elastic.add(role["name"])
                heads.add(str((doc.get("metadata") or {}).get("name", "")) + ELASTIC_HEAD_SUFFIX)
            engine_of[role["name"]] = name
            user_env[role["name"]] = [e["name"] for e in role.get("env") or []]
            user_args[role["name"]] = [str(a) for a in role.get("extraArgs") or []]
            if role.get("command"):
                take_over.add(role["name"])
    rendered = _docs(case_dir / "rendered.yaml")
    config_maps = {
        d["metadata"]["name"]: d.get("data") or {} for d in rendered if d.get("kind") == "ConfigMap"
    }
    for doc in rendered:
        kind = doc.get("kind")
        if kind == "Deployment":
            name = doc["metadata"]["name"]
            out.skipped.append(Skipped(case, name, "*", "router Deployment, not an engine"))
            continue
        if kind != "Pod":
            continue
        pod = _pod_name(doc)
        labels = doc["metadata"].get("labels", {})
        role = labels.get("app.kubernetes.io/component", "")
        if role in heads:
            out.skipped.append(Skipped(case, pod, "main", "Elastic EP Ray head: runs no engine"))
            continue
        if role in elastic and labels.get(ORDINAL_LABEL) != "0":
            out.skipped.append(
                Skipped(case, pod, "main", "Elastic EP worker: joins Ray, runs no engine")
            )
            continue
        for c in doc["spec"].get("containers", []):
            if c["name"] != "main":
                out.skipped.append(Skipped(case, pod, c["name"], "not the engine container"))
                continue
            if role in take_over:
                out.skipped.append(
                    Skipped(case, pod, "main", "take-over role: the command is the user's own")
                )
                continue
            launch = find_launch(_argv(c), _shell_env(c))
            if launch is None:
                # A managed role must launch its engine: its line is checked and fails there.
                out.add(
                    case=case,
                    pod=pod,
                    container="main",
                    role=role,
                    engine=engine_of.get(role, "vllm"),
                    argv=_argv(c),
                    note="no engine invocation found in a managed role's argv",
                    **_pod_facts(doc, c, config_maps),
                )
                continue
            out.add(
                case=case,
                pod=pod,
                container="main",
                role=role,
                engine=launch.engine,
                argv=launch.argv,
                via=launch.via,
                client_config=_client_config(doc),
                env=_env(c),
                user_env=user_env.get(role, []),
                user_args=user_args.get(role, []),
                **_pod_facts(doc, c, config_maps),
            )


def _forwarded(
    container: dict[str, Any], injected: dict[str, Any]
) -> tuple[str, list[str], str] | None:
    """An injected container whose program is not the engine but gets the engine's args.

    ``launchArgsForwarded`` says the injector appended to ``args`` of a program it could not see
    through. Without ``command`` the image's entrypoint runs: a ``vllm`` image's args start with
    ``serve`` and are checked as ``vllm serve …``. Anything else is checked as the engine's own
    argv after a placeholder model (the program's own words are unknown).
    """
    if not injected.get("launchArgsForwarded"):
        return None
    engine = str(injected.get("engine", ""))
    args = [str(a) for a in container.get("args") or []]
    if engine == "vllm" and not container.get("command") and args[:1] == ["serve"]:
        return "vllm", ["vllm", *args], "no command: the image's entrypoint taken as `vllm`"
    program = " ".join(str(a) for a in container.get("command") or [])
    if engine == "vllm":
        base = ["vllm", "serve", "placeholder/model"]
    elif engine == "sglang":
        base = ["python3", "-m", "sglang.launch_server", "--model-path", "placeholder/model"]
    else:
        return None
    note = f"args forwarded to `{program}`: checked after a placeholder model"
    return engine, [*base, *args], note


def collect_inject(case_dir: Path, out: Collected) -> None:
    """Every engine container of the output Pod in ``verdict.yaml``."""
    case = case_dir.name
    verdicts = _docs(case_dir / "verdict.yaml")
    pod_obj = next((d.get("object") for d in verdicts if d.get("object")), None)
    if pod_obj is None:
        allowed = any(d.get("allowed") for d in verdicts)
        reason = "inject: admitted unchanged (no patch)" if allowed else "inject: refused"
        out.skipped.append(Skipped(case, "-", "-", reason))
        return
    inputs = [d for d in _docs(case_dir / "input.yaml") if d.get("kind") == "Pod"]
    input_containers = {c["name"]: c for c in inputs[0]["spec"]["containers"]} if inputs else {}
    annotations = (pod_obj.get("metadata") or {}).get("annotations") or {}
    injected = json.loads(annotations.get(INJECTED_ANNOTATION) or "{}")
    pod = _pod_name(pod_obj)
    role = annotations.get("kvcache.gpustack.ai/role", "")
    for c in pod_obj["spec"].get("containers", []):
        launch = find_launch(_argv(c))
        note = ""
        if launch is None:
            forwarded = _forwarded(c, injected)
            if forwarded is None:
                reason = f"not an engine ({_argv(c)[0] if _argv(c) else 'no argv'})"
                out.skipped.append(Skipped(case, pod, c["name"], reason))
                continue
            engine, argv, note = forwarded
            launch = Launch(engine, argv, [])
        before = input_containers.get(c["name"])
        input_launch = find_launch(_argv(before)) if before else None
        out.add(
            case=case,
            pod=pod,
            container=c["name"],
            role=role,
            engine=launch.engine,
            argv=launch.argv,
            via=launch.via,
            client_config=_client_config(pod_obj),
            env=_env(c),
            input_argv=input_launch.argv if input_launch else None,
            user_env=list(_env(before)) if before else [],
            note=note,
            **_pod_facts(pod_obj, c, {}),
        )


def collect(golden: Path) -> Collected:
    out = Collected()
    for case_dir in sorted(golden.glob("render-*")):
        if (case_dir / "rendered.yaml").exists():
            collect_render(case_dir, out)
    for case_dir in sorted(golden.glob("inject-*")):
        if (case_dir / "verdict.yaml").exists():
            collect_inject(case_dir, out)
    return out


# --- The engine venvs -------------------------------------------------------------------------


def venv_dir(engine: str) -> Path:
    dist, version = ENGINES[engine]
    return CACHE / f"{dist}-{version}"


def installed_version(venv: Path, dist: str) -> str | None:
    python = venv / "bin" / "python"
    if not python.exists():
        return None
    probe = f"import importlib.metadata as m; print(m.version({dist!r}))"
    done = subprocess.run([python, "-c", probe], capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else None


def ensure_venv(engine: str, install: bool) -> Path:
    """The engine's venv, installed first when missing or holding another version."""
    dist, version = ENGINES[engine]
    venv = venv_dir(engine)
    have = installed_version(venv, dist)
    if have == version:
        print(f"# {engine}: reusing {venv} ({dist} {have})", flush=True)
        if install:
            _ensure_beside(engine, venv)
        return venv
    if not install:
        raise SystemExit(f"{engine}: {venv} has {have or 'nothing'}, want {version} (--no-install)")
    print(f"# {engine}: installing {dist}=={version} into {venv} (several GB) …", flush=True)
    started = time.monotonic()
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([VENV_PYTHON, "-m", "venv", venv], check=True)
    pip = [venv / "bin" / "python", "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, "--upgrade", "pip"], check=True)
    subprocess.run([*pip, f"{dist}=={version}"], check=True)
    print(f"# {engine}: installed in {time.monotonic() - started:.0f} s", flush=True)
    _ensure_beside(engine, venv)
    return venv


def _ensure_beside(engine: str, venv: Path) -> None:
    """Install the packages of :data:`BESIDE` the venv lacks (or holds at another version)."""
    for dist, version in BESIDE[engine]:
        if installed_version(venv, dist) == version:
            continue
        print(f"# {engine}: installing {dist}=={version} beside it …", flush=True)
        pip = [venv / "bin" / "python", "-m", "pip", "install", "--quiet"]
        subprocess.run([*pip, f"{dist}=={version}"], check=True)


# --- Running the checkers ---------------------------------------------------------------------


def _platform(engine: str, line: CommandLine) -> str:
    """vLLM's platform for a Pod: CUDA (stand-in) with accelerators, its CPU platform without."""
    return "cpu" if engine == "vllm" and line.gpus == 0 else "cuda"


def run_checker(engine: str, venv: Path, lines: list[CommandLine]) -> dict[str, Any]:
    """Run ``hack/engines/check_<engine>.py`` in the engine's venv, once per platform."""
    merged: dict[str, Any] = {"results": [], "controls": [], "keys": [], "notes": []}
    platforms = sorted({_platform(engine, line) for line in lines}, key=lambda p: p != "cuda")
    for index, platform in enumerate(platforms):
        group = [line for line in lines if _platform(engine, line) == platform]
        report = _run_one(engine, venv, group, platform, controls=index == 0)
        merged["results"] += report["results"]
        merged["controls"] += report.get("controls", [])
        for key in ("keys", "notes"):
            merged[key] += [k for k in report.get(key, []) if k not in merged[key]]
    return merged


def _run_one(
    engine: str, venv: Path, lines: list[CommandLine], platform: str, controls: bool
) -> dict[str, Any]:
    env = dict(os.environ)
    env.update({"CUDA_VISIBLE_DEVICES": "", "TOKENIZERS_PARALLELISM": "false"})
    env["PYTHONWARNINGS"] = "ignore"
    if engine == "sglang":
        # vLLM is left online: with HF_HUB_OFFLINE its EngineArgs resolves the model to a local
        # snapshot at construction. Nothing here reaches the hub either way (no network); the
        # steps that would need the model's files run with stand-ins (see the checkers).
        env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"})
    env["GPUSTACK_CHECK_PLATFORM"] = platform
    payload = json.dumps({"lines": [asdict(line) for line in lines], "controls": controls})
    done = subprocess.run(
        [venv / "bin" / "python", CHECKERS / f"check_{engine}.py"],
        input=payload,
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    marker = "@@REPORT@@"
    if done.returncode != 0 or marker not in done.stdout:
        sys.stderr.write(done.stdout[-4000:] + done.stderr[-8000:])
        raise SystemExit(f"{engine}: the checker itself failed (exit {done.returncode})")
    report: dict[str, Any] = json.loads(done.stdout.split(marker, 1)[1])
    return report


def _where(line: CommandLine) -> str:
    role = f" [{line.role}]" if line.role else ""
    return f"{line.case} {line.pod}/{line.container}{role}"


def print_report(engine: str, lines: list[CommandLine], report: dict[str, Any]) -> Counter[str]:
    counts: Counter[str] = Counter()
    by_id = {r["id"]: r for r in report["results"]}
    for line in lines:
        result = by_id[line.id]
        status = result["status"]
        counts[status] += 1
        extras = [f"via {'/'.join(line.via)}"] if line.via else []
        extras += [line.note] if line.note else []
        extras += result.get("notes", [])
        detail = result.get("error") or "; ".join(result.get("checked", []))
        print(f"{status:<5} {engine:<6} {_where(line)}: {detail}")
        for extra in extras:
            print(f"        {extra}")
    for control in report.get("controls", []):
        status = "OK" if control["refused"] else "FAIL"
        counts["control-" + status] += 1
        print(f"{status:<5} {engine:<6} negative control {control['name']}: {control['message']}")
    for key in report.get("keys", []):
        print(f"# {engine} key {key}")
    for note in report.get("notes", []):
        print(f"# {engine} note: {note}")
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("golden", nargs="?", type=Path, default=ROOT / "golden")
    parser.add_argument("--engine", action="append", choices=sorted(ENGINES))
    parser.add_argument("--no-install", action="store_true", help="fail if a venv is missing")
    parser.add_argument("--list", action="store_true", help="list the command lines and stop")
    args = parser.parse_args()
    engines = args.engine or sorted(ENGINES)
    collected = collect(args.golden)
    skip_reasons = Counter(s.reason for s in collected.skipped)
    print(f"# golden: {args.golden}")
    for reason, n in sorted(skip_reasons.items()):
        print(f"# skipped {n} containers/objects: {reason}")
    if args.list:
        for line in collected.lines:
            print(line.engine, _where(line), shlex.join(line.argv))
        return 0
    failed = False
    summary: list[str] = []
    for engine in engines:
        lines = [line for line in collected.lines if line.engine == engine]
        if not lines:
            print(f"FAIL  {engine:<6} no command line found: nothing would be checked")
            failed = True
            continue
        venv = ensure_venv(engine, install=not args.no_install)
        started = time.monotonic()
        report = run_checker(engine, venv, lines)
        counts = print_report(engine, lines, report)
        took = time.monotonic() - started
        bad = counts["FAIL"] + counts["control-FAIL"]
        failed = failed or bad > 0 or counts["OK"] == 0
        version = ENGINES[engine][1]
        summary.append(
            f"{engine} {version}: {len(lines)} command lines checked: {counts['OK']} OK, "
            f"{counts['FAIL']} FAIL, {counts['INPUT']} INPUT (the input already refused); "
            f"negative controls refused {counts['control-OK']}/"
            f"{counts['control-OK'] + counts['control-FAIL']} ({took:.0f} s)"
        )
    print("# summary")
    for text in summary:
        print(f"# {text}")
    print(f"# skipped {len(collected.skipped)} (not engines, or take-over commands)")
    print("engines-check:", "FAILED" if failed else "passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
