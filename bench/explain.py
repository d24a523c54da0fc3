"""Explain a roll of a 64-replica × 8-member deployment against its observed state, and compare it
with rendering the same deployment.

The observed state is what ``kubectl get pods,workloads.kueue.x-k8s.io,services -o yaml`` would
print for the deployment as an older edit left it: 512 running, Ready Pods and 64 admitted
Workloads. The edit moves ``extraArgs``, so every replica rolls: the planner runs once per pass
until the roll completes (about two passes per replica). Prints the wall time of ``render`` of
the edited deployment, of ``split_observed`` + ``render`` + ``explain_observed`` (the work
``explain --observed`` does after reading its files), and their ratio in the same run (best of
a few rounds each). Then the path a user takes: ``gpustack-render explain NEW --old STORED
--observed EXPORT -o json`` in a subprocess against ``gpustack-render render NEW -o json`` of the
same deployment (files written once, YAML as ``kubectl -o yaml`` writes it), with the export as
``kubectl get -o json`` writes it and as ``-o yaml`` does (3 MiB), and the reading of that YAML
export in this process beside its floor, libyaml's bare event parse of the same text. The last
line is ``key=value`` pairs. Target: explain < 1 s, the library call and both commands; the exit
status is 1 when one misses it.

Run: ``python -m bench.explain`` (or ``python -m bench`` for every benchmark).
"""

from __future__ import annotations

import functools
import gc
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import yaml

from bench.render import DEPLOYMENT, INPUTS
from gpustack_kube.gcpause import paused_gc
from gpustack_render.api.modeldeployment import ModelDeployment
from gpustack_render.cli import yamlio
from gpustack_render.core.settings import Settings
from gpustack_render.explain.observed import explain_observed, split_observed
from gpustack_render.rendering.renderer import Rendering, render
from gpustack_render.schema.decoding import decode_deployment
from gpustack_render.schema.lookups import StaticLookups

REPLICAS = 64
SIZE = 8
ROUNDS = 5

#: The render benchmark's objects (its InstanceType ``h20-8x``; the pool objects go unread).
LOOKUPS = StaticLookups.of(INPUTS)


def _deployment(max_len: int) -> ModelDeployment:
    """The render benchmark's deployment at 64 × 8, without its pool, at ``max_len``."""
    base = cast(dict[str, Any], DEPLOYMENT["spec"])
    (role,) = base["roles"]
    spec = {k: v for k, v in base.items() if k != "kvCache"}
    args = ["--tensor-parallel-size", "8"]
    resized = {
        **role,
        "replicas": REPLICAS,
        "size": SIZE,
        "extraArgs": [*args, "--max-model-len", str(max_len)],
    }
    md, errs = decode_deployment({**DEPLOYMENT, "spec": {**spec, "roles": [resized]}})
    assert md is not None, errs
    return md


def _observed(rendering: Rendering) -> dict[str, Any]:
    """The List ``kubectl get -o yaml`` prints for the Pods and Workloads ``rendering`` left."""
    items: list[dict[str, Any]] = []
    for role in rendering.roles:
        for ordinal in range(role.replicas):
            pods = []
            for seat in role.instance(ordinal):
                name = seat.name or f"{seat.generate_name}x{ordinal}"
                meta = {**seat.pod["metadata"], "name": name, "uid": f"uid-{name}"}
                pods.append(
                    {
                        **seat.pod,
                        "metadata": meta,
                        "status": {
                            "phase": "Running",
                            "conditions": [{"type": "Ready", "status": "True"}],
                        },
                    }
                )
            group = role.instance(ordinal)[0].group_name
            workload = {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "Workload",
                "metadata": {
                    "name": group,
                    "namespace": rendering.namespace,
                    "ownerReferences": [
                        {
                            "apiVersion": "v1",
                            "kind": "Pod",
                            "name": p["metadata"]["name"],
                            "uid": p["metadata"]["uid"],
                        }
                        for p in pods
                    ],
                },
                "status": {
                    "conditions": [
                        {"type": "QuotaReserved", "status": "True"},
                        {"type": "Admitted", "status": "True"},
                    ]
                },
            }
            items += [*pods, workload]
    return {"apiVersion": "v1", "kind": "List", "items": items}


def _raw(md: ModelDeployment) -> dict[str, Any]:
    return md.model_dump(mode="json", by_alias=True, exclude_none=True)


def _command_line(
    old: ModelDeployment, new: ModelDeployment, listing: dict[str, Any]
) -> tuple[float, ...]:
    """Seconds of ``render``, ``explain`` with a JSON export (``kubectl get -o json``) and with
    a YAML one, best of a few rounds each."""
    script = Path(sys.executable).parent / "gpustack-render"
    cli = [str(script)] if script.exists() else [sys.executable, "-m", "gpustack_render.cli"]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        inputs = [
            {"apiVersion": "worker.gpustack.ai/v1", "kind": "InstanceType", **_raw_input(i)}
            for i in INPUTS
            if type(i).__name__ == "InstanceType"
        ]
        (root / "new.yaml").write_text(yamlio.dump_yaml([_raw(new), *inputs]))
        (root / "old.yaml").write_text(yamlio.dump_yaml([_raw(old)]))
        (root / "observed.yaml").write_text(yamlio.dump_yaml_one(listing))
        (root / "observed.json").write_text(yamlio.dump_json(listing))
        new_file, old_file = str(root / "new.yaml"), str(root / "old.yaml")
        commands = [[*cli, "render", new_file, "-o", "json"]]
        for export in ("observed.json", "observed.yaml"):
            flags = ["--old", old_file, "--observed", str(root / export), "-o", "json"]
            commands.append([*cli, "explain", new_file, *flags])
        for cmd in commands:  # each works before any is timed
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
        return tuple(_best(functools.partial(_quiet, cmd)) for cmd in commands)


def _reading(listing: dict[str, Any]) -> tuple[float, float]:
    """Seconds to read the YAML export as the command line does, and libyaml's bare event
    parse of the same text (the floor of any reader built on it), best of a few rounds each."""
    text = yamlio.dump_yaml_one(listing)

    def read() -> object:
        return yamlio.load_documents(
            text,
            expand_lists=False,
            max_bytes=yamlio.EXPORT_MAX_BYTES,
            max_nodes=yamlio.EXPORT_MAX_NODES,
        )

    def parse() -> object:
        get = yaml.CBaseLoader(text).get_event  # the parser the reader takes its events from
        while not isinstance(get(), yaml.StreamEndEvent):
            pass
        return None

    return _best(read), _best(parse)


def _quiet(cmd: list[str]) -> None:
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)


def _raw_input(obj: Any) -> dict[str, Any]:
    return cast(dict[str, Any], obj.model_dump(mode="json", by_alias=True, exclude_none=True))


def _best(run: Callable[[], object]) -> float:
    best = float("inf")
    for _ in range(ROUNDS):
        gc.collect()
        start = time.perf_counter()
        with paused_gc():
            run()
        best = min(best, time.perf_counter() - start)
    return best


def main() -> int:
    settings = Settings()
    old = render(_deployment(8192), lookups=LOOKUPS, settings=settings)
    listing = _observed(old)
    new_md = _deployment(16384)

    def plain() -> object:
        return render(new_md, lookups=LOOKUPS, settings=settings)

    def explain() -> object:
        observed = split_observed([listing])
        rendering = render(new_md, lookups=LOOKUPS, settings=settings)
        return explain_observed(new_md, rendering, observed, settings=settings)

    report = explain()
    assert getattr(report, "converged", False), report
    assert getattr(report, "replaced", 0) == REPLICAS, report
    passes = len(getattr(report, "timeline", ()))

    render_s = _best(plain)
    explain_s = _best(explain)
    ratio = explain_s / render_s
    cli_render_s, cli_explain_s, cli_yaml_s = _command_line(_deployment(8192), new_md, listing)
    read_s, parse_s = _reading(listing)
    met = max(explain_s, cli_explain_s, cli_yaml_s) < 1.0
    print(f"observed {REPLICAS * SIZE} Pods, {REPLICAS} Workloads; {passes} passes to complete")
    print(f"render             {render_s * 1000:.1f} ms")
    print(f"explain --observed {explain_s * 1000:.1f} ms")
    print(f"command line: render -o json {cli_render_s * 1000:.0f} ms")
    print(f"command line: explain --old --observed EXPORT.json {cli_explain_s * 1000:.0f} ms")
    print(
        f"command line: explain --old --observed EXPORT.yaml {cli_yaml_s * 1000:.0f} ms"
        f"  (target < 1000 ms: {'met' if cli_yaml_s < 1.0 else 'MISSED'})"
    )
    print(
        f"reading EXPORT.yaml {read_s * 1000:.0f} ms; libyaml's bare event parse of it"
        f" {parse_s * 1000:.0f} ms (ratio {read_s / parse_s:.2f})"
    )
    print(
        f"pods={REPLICAS * SIZE} passes={passes} render_ms={render_s * 1000:.1f} "
        f"explain_ms={explain_s * 1000:.1f} ratio={ratio:.2f} "
        f"cli_render_ms={cli_render_s * 1000:.0f} cli_explain_ms={cli_explain_s * 1000:.0f} "
        f"cli_ratio={cli_explain_s / cli_render_s:.2f} cli_yaml_export_ms={cli_yaml_s * 1000:.0f} "
        f"yaml_read_ms={read_s * 1000:.0f} yaml_parse_floor_ms={parse_s * 1000:.0f} "
        f"target_met={str(met).lower()}"
    )
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
