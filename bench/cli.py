"""The command line as CI runs it: start-up, and writing a large rendering, through the console
script in a subprocess (the whole path: start, read, judge, render, write).

Prints three ratios, each against a baseline measured in the same run:

- ``start``: ``gpustack-render render examples/qwen-chat.yaml`` over ``python -c pass``
  (target ≤ 4);
- ``start_floor``: the same over the floor of one pydantic validation (``floor_validate``
  below; target ≤ 1.3);
- ``yaml``: ``render -o yaml`` of one role of 1024 replicas × 8 members (8,192 Pods) over
  libyaml's ``CSafeDumper`` dumping the same objects in this process (target ≤ 1.5);
- ``json``: ``render -o json`` of the same over ``json.dumps(indent=2)`` (target ≤ 1.5);
- ``batch``: 200 deployments (one file each in a directory) rendered by 200 calls over one
  ``render DIR`` call (no target: how much a batch saves).

The start-up figures are medians of rounds that alternate the commands (a burst of other work
on the machine weighs on all alike), with the bytecode cached as an installed package has it
(whatever ``PYTHONDONTWRITEBYTECODE`` says), and come with the floor the target stands on: the same
interpreter importing ``pydantic_core``, importing pydantic's ``BaseModel``, and validating one
integer with pydantic, and doing nothing else (a command that validates with pydantic cannot
start faster). Two more figures say what stands between that floor and ``render``
(docs/design/0007-cli-start-up.md): ``floor_model``, one pydantic model of one field defined
and validated (any model loads pydantic's field machinery, which the integer does not), and
``bound_models``, the project's own models defined, built and validating the example's objects
as ``render`` reads them (no rule, no renderer, no writer). The writing figures are the best
of a few runs. The last line is ``key=value`` pairs.

Run: ``python -m bench.cli`` (or ``python -m bench`` for every benchmark);
``python -m bench.cli --start`` prints the start-up figures only.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from gpustack_render.cli import yamlio
from gpustack_render.cli.documents import read_bundle
from gpustack_render.rendering.renderer import render
from gpustack_render.schema.decoding import decode_deployment

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "qwen-chat.yaml"
REPLICAS = 1024
SIZE = 8
TARGETS = {"start": 4.0, "start_floor": 1.3, "yaml": 1.5, "json": 1.5}
#: The targets the start-up figures alone decide (``--start``).
START_TARGETS = ("start", "start_floor")
BATCH = 200


def _cli() -> list[str]:
    script = Path(sys.executable).parent / "gpustack-render"
    return [str(script)] if script.exists() else [sys.executable, "-m", "gpustack_render.cli"]


def _best(
    baseline: Callable[[], object], measured: Callable[[], object], runs: int
) -> tuple[float, float]:
    """The best time of each, over ``runs`` rounds that alternate them (so a burst of other
    work on the machine weighs on both alike)."""
    best = [float("inf"), float("inf")]
    for _ in range(runs):
        for i, fn in enumerate((baseline, measured)):
            start = time.perf_counter()
            fn()
            best[i] = min(best[i], time.perf_counter() - start)
    return best[0], best[1]


def _medians(commands: list[list[str]], runs: int) -> list[float]:
    """The median time of each command over ``runs`` rounds that alternate them, after one
    round that fills the bytecode cache."""
    for argv in commands:
        _run(argv)
    times: list[list[float]] = [[] for _ in commands]
    for _ in range(runs):
        for i, argv in enumerate(commands):
            start = time.perf_counter()
            _run(argv)
            times[i].append(time.perf_counter() - start)
    return [statistics.median(t) for t in times]


#: What the start-up target stands on: ``python -c pass`` first (the baseline), then imports
#: no validating command can do without.
FLOOR = {
    "floor_pydantic_core": "import pydantic_core",
    "floor_basemodel": "from pydantic import BaseModel",
    # Building and using one validator loads pydantic's plugin discovery (importlib.metadata).
    "floor_validate": "import pydantic; pydantic.TypeAdapter(int).validate_python(1)",
    "floor_model": "import pydantic\nclass M(pydantic.BaseModel):\n    x: int\nM(x=1)",
    "bound_models": (
        "from pathlib import Path\n"
        "from gpustack_render.cli.documents import read_bundle\n"
        "from gpustack_render.schema.decoding import decode_deployment\n"
        f"b = read_bundle([('x.yaml', Path({str(EXAMPLE)!r}).read_text())])\n"
        "assert decode_deployment(b.deployments[0])[0] is not None"
    ),
}


#: The commands run as an installed package runs: with its bytecode cached. An environment
#: with ``PYTHONDONTWRITEBYTECODE`` set would otherwise compile every module of the project
#: from source on every call (a 15-20 % slower start, and not what a user's install does); the
#: cache goes to a directory of its own, never into the source tree.
_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
_ENV["PYTHONPYCACHEPREFIX"] = os.path.join(tempfile.gettempdir(), "gpustack-render-bench-pycache")


def _run(argv: list[str]) -> None:
    subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=_ENV)


def big_input() -> str:
    """The example's objects with its deployment grown to 1024 replicas × 8 members."""
    docs = yamlio.load_documents(EXAMPLE.read_text())
    role = docs[0]["spec"]["roles"][0]
    role.update(replicas=REPLICAS, size=SIZE)
    role["resources"]["accelerator"] = 8
    role["extraArgs"] = [
        "--tensor-parallel-size=8",
        f"--pipeline-parallel-size={SIZE}",
        f"--nnodes={SIZE}",
        "--node-rank=$(GPUSTACK_MEMBER_INDEX)",
        "--master-addr=$(GPUSTACK_REPLICA_LEADER_ADDRESS)",
        "--master-port=29500",
    ]
    for doc in docs:
        if doc["kind"] == "InstanceType":
            doc["status"]["accelerator"]["capacity"] = REPLICAS * SIZE * 8
    return yamlio.dump_yaml(docs)


def _objects(text: str) -> list[dict[str, Any]]:
    bundle = read_bundle([("big.yaml", text)])
    md, errs = decode_deployment(bundle.deployments[0])
    assert md is not None, errs
    rendering = render(
        md, lookups=bundle.lookups(default_namespace="team-a"), settings=bundle.settings
    )
    return [yamlio.clean(o) for o in rendering.objects()]


def _batch(cli: list[str]) -> tuple[float, float]:
    """Seconds for one ``render DIR`` call over BATCH files, and for BATCH calls, one a file."""
    docs = yamlio.load_documents(EXAMPLE.read_text())
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i in range(BATCH):
            docs[0]["metadata"]["name"] = f"qwen-{i:03d}"
            path = Path(tmp) / f"qwen-{i:03d}.yaml"
            path.write_text(yamlio.dump_yaml(docs))
            paths.append(path)
        start = time.perf_counter()
        _run([*cli, "render", tmp])
        one = time.perf_counter() - start
        start = time.perf_counter()
        for path in paths:
            _run([*cli, "render", str(path)])
        many = time.perf_counter() - start
    return one, many


def main(argv: list[str] | None = None) -> int:
    start_only = "--start" in (sys.argv[1:] if argv is None else argv)
    cli = _cli()
    ratios: dict[str, float] = {}
    python, *floor, start = _medians(
        [
            [sys.executable, "-c", "pass"],
            *([sys.executable, "-c", code] for code in FLOOR.values()),
            [*cli, "render", str(EXAMPLE)],
        ],
        15,
    )
    ratios["start"] = start / python
    print(f"{'python -c pass':42} {python * 1000:7.1f} ms (median)")
    for (key, code), seconds in zip(FLOOR.items(), floor, strict=True):
        ratios[key] = seconds / python
        shown = f"python -c {code!r}" if "\n" not in code else "FLOOR in bench/cli.py"
        print(f"{key:42} {seconds * 1000:7.1f} ms  ratio {ratios[key]:.2f}  ({shown})")
    print(f"{'render qwen-chat.yaml':42} {start * 1000:7.1f} ms  ratio {ratios['start']:.2f}")
    validate = floor[list(FLOOR).index("floor_validate")]
    ratios["start_floor"] = start / validate
    print(
        f"{'render over floor_validate':42} {start * 1000:7.1f} ms  ratio"
        f" {ratios['start_floor']:.2f}  (target {TARGETS['start_floor']})"
    )
    if start_only:
        print(_summary(ratios, START_TARGETS))
        return 0

    with tempfile.TemporaryDirectory() as tmp:
        big = Path(tmp) / "big.yaml"
        text = big_input()
        big.write_text(text)
        objects = _objects(text)
        pods = sum(1 for o in objects if o["kind"] == "Pod")
        assert pods == REPLICAS * SIZE, pods
        c_dump, cli_yaml = _best(
            lambda: yaml.dump_all(
                objects,
                Dumper=yaml.CSafeDumper,
                default_flow_style=False,
                sort_keys=False,
                explicit_start=True,
                allow_unicode=True,
            ),
            lambda: _run([*cli, "render", "-o", "yaml", str(big)]),
            3,
        )
        json_dump, cli_json = _best(
            lambda: json.dumps(objects, indent=2, ensure_ascii=False),
            lambda: _run([*cli, "render", "-o", "json", str(big)]),
            3,
        )
    ratios["yaml"] = cli_yaml / c_dump
    ratios["json"] = cli_json / json_dump
    print(f"{pods} Pods: CSafeDumper   {c_dump:7.2f} s")
    print(f"{pods} Pods: render -o yaml {cli_yaml:6.2f} s  ratio {ratios['yaml']:.2f}")
    print(f"{pods} Pods: json.dumps    {json_dump:7.2f} s")
    print(f"{pods} Pods: render -o json {cli_json:6.2f} s  ratio {ratios['json']:.2f}")
    batch_one, batch_many = _batch(cli)
    ratios["batch"] = batch_many / batch_one
    print(
        f"{BATCH} deployments: one call {batch_one:6.2f} s, {BATCH} calls {batch_many:6.2f} s"
        f"  ratio {ratios['batch']:.1f}"
    )
    print(_summary(ratios, tuple(TARGETS)))
    return 0


def _summary(ratios: dict[str, float], targets: tuple[str, ...]) -> str:
    """The last line: every ratio, then whether each target in ``targets`` is met."""
    return " ".join(
        [f"{k}_ratio={v:.2f}" for k, v in ratios.items()]
        + [f"{k}_met={str(ratios[k] <= TARGETS[k]).lower()}" for k in targets]
    )


if __name__ == "__main__":
    sys.exit(main())
