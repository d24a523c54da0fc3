"""``explain``'s live mode on the simulated cluster: what it reads, and that it sends GET only.

A deployment is made Ready by the real controller, Kueue, scheduler and KWOK; then the live
reader (:mod:`gpustack_render.cli.live`) reads it as a person bound to the shipped read-only
roles (``deploy/rbac/explain-reader``) would. That person is the API server's one audited
identity (:data:`.controlplane.AUDITED_USER`): the audit log holds every request it sent, and
each one the reader sent is a ``get`` or a ``list``. A write by the same identity is audited as
such (the control), so the check can fail.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpustack_controller.kube import CONFIGMAPS, MODEL_DEPLOYMENTS, Kube
from gpustack_render.cli import __main__ as cli
from gpustack_render.cli.documents import read_bundle
from gpustack_render.cli.live import (
    LiveError,
    explain_live_documents,
    read_live,
    user_agent,
)
from gpustack_render.core import labels
from gpustack_render.core.settings import CONFIGMAP_NAME
from gpustack_render.rendering.renderer import render
from gpustack_render.schema.decoding import decode_deployment

from .cluster import Cluster
from .controller_fixtures import (
    INSTANCE_TYPE,
    deployment,
    ensure_instance_type,
    eventually,
    get_md,
    group_of,
    new_entrance,
    new_namespace,
    running_controller,
    tear_down,
)
from .controlplane import AUDITED_USER
from .rollout_fixtures import LONG, deploy_serving

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

REPO_ROOT = Path(__file__).resolve().parents[2]
READER_ROLES = REPO_ROOT / "deploy" / "rbac" / "explain-reader"
RBAC = "rbac.authorization.k8s.io"


def _subject(user: str) -> list[dict[str, str]]:
    return [{"apiGroup": RBAC, "kind": "User", "name": user}]


def _role_binding(namespace: str, user: str = AUDITED_USER) -> dict[str, Any]:
    return {
        "apiVersion": f"{RBAC}/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "explain-reader", "namespace": namespace},
        "roleRef": {"apiGroup": RBAC, "kind": "ClusterRole", "name": "gpustack-render-explain"},
        "subjects": _subject(user),
    }


CLUSTER_BINDING: dict[str, Any] = {
    "apiVersion": f"{RBAC}/v1",
    "kind": "ClusterRoleBinding",
    "metadata": {"name": "gpustack-render-explain-test"},
    "roleRef": {
        "apiGroup": RBAC,
        "kind": "ClusterRole",
        "name": "gpustack-render-explain-cluster",
    },
    "subjects": _subject(AUDITED_USER),
}


@pytest.fixture(scope="module")
def reader(cluster: Cluster) -> Iterator[Path]:
    """A kubeconfig of the audited identity, bound cluster-wide to the shipped cluster role;
    each test binds the namespaced role in its own namespace. Removed afterwards."""
    cluster.kubectl(
        "apply", "--server-side", "--field-manager=gpustack-explain-test", "-k", str(READER_ROLES)
    )
    cluster.apply(CLUSTER_BINDING)
    try:
        yield cluster.control_plane.user_kubeconfig(AUDITED_USER)
    finally:
        cluster.kubectl(
            "delete", "--ignore-not-found", "clusterrolebinding", "gpustack-render-explain-test"
        )
        cluster.kubectl("delete", "--ignore-not-found", "-k", str(READER_ROLES))


def _reader_events(cluster: Cluster) -> list[dict[str, Any]]:
    agent = user_agent()
    return [
        e
        for e in cluster.control_plane.audit_events()
        if e.get("user", {}).get("username") == AUDITED_USER and e.get("userAgent") == agent
    ]


def _explain_verb(argv: list[str], system: str) -> dict[str, Any]:
    """``gpustack-render explain … -o json`` in live mode; exit 0 and its JSON."""
    out, err = io.StringIO(), io.StringIO()
    args = ["explain", *argv, "--system-namespace", system, "-o", "json"]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(args)
    assert code == 0, err.getvalue()
    answer: dict[str, Any] = json.loads(out.getvalue())
    return answer


def _path(uri: str) -> str:
    return uri.split("?", 1)[0]


def _hash(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["annotations"][labels.POD_SPEC_HASH])


def _kinds(objects: list[dict[str, Any]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for obj in objects:
        out.setdefault(obj["kind"], []).append(obj["metadata"]["name"])
    return {kind: sorted(names) for kind, names in out.items()}


async def test_live_mode_reads_what_offline_mode_takes_from_files_with_get_and_list_only(
    kube: Kube, kubeconfig_path: Path, cluster: Cluster, reader: Path, tmp_path: Path
) -> None:
    ns = await new_namespace(kube, "explain")
    system = await new_namespace(kube, "explain-sys")
    await kube.create(
        CONFIGMAPS,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": CONFIGMAP_NAME},
            "data": {"native-sidecars": "false", "no-such-setting": "1"},
        },
        system,
    )
    cluster.apply(_role_binding(ns))
    entrance = await new_entrance(kube, cluster, gpus=8)
    await ensure_instance_type(kube)  # the edit below moves the role onto this one
    before = len(_reader_events(cluster))
    async with running_controller(kubeconfig_path, namespace=system):
        pods = await deploy_serving(kube, deployment("chat", ns, entrance.role(replicas=2)), 2)

        async def ready() -> dict[str, Any] | None:
            md = await get_md(kube, ns, "chat")
            return md if md and (md.get("status") or {}).get("phase") == "Ready" else None

        stored = await eventually(ready, timeout=LONG, what="chat Ready")
        live = await asyncio.to_thread(
            read_live,
            kubeconfig=str(reader),
            context=None,
            namespace=ns,
            name="chat",
            system_namespace=system,
        )

        edited = tmp_path / "edited.yaml"
        body = deployment("chat", ns, {**entrance.role(replicas=2), "instanceType": INSTANCE_TYPE})
        del body["metadata"]["namespace"]  # -n gives it, as kubectl does
        edited.write_text(json.dumps(body))
        docs = await asyncio.to_thread(
            explain_live_documents,
            "md/chat",
            namespace=ns,
            kubeconfig=str(reader),
            edited_path=str(edited),
            system_namespace=system,
        )
        # The verb itself, both forms, as a person types them.
        stuck = await asyncio.to_thread(
            _explain_verb, ["md/chat", "-n", ns, "--kubeconfig", str(reader)], system
        )
        edit = await asyncio.to_thread(
            _explain_verb, ["md/chat", str(edited), "-n", ns, "--kubeconfig", str(reader)], system
        )
        await tear_down(kube, ns, "chat")

    # "Why is it stuck?": nothing is; the stored object against itself is unchanged, both
    # replicas serve and the next pass has nothing to do.
    assert stuck["operation"] == "UPDATE" and stuck["admission"]["allowed"]
    assert [r["action"] for r in stuck["roles"]] == ["unchanged"]
    assert stuck["observed"]["serving"] == [{"role": "server", "serving": 2, "desired": 2}]
    assert not stuck["rolls"] and stuck["replaced"] == 0
    # "What will this edit do?": another InstanceType rolls both replicas onto another entrance.
    assert [r["action"] for r in edit["roles"]] == ["roll"]
    assert "explain.entrance-moved" in [c["id"] for c in edit["roles"][0]["costs"]]
    assert edit["rolls"] and edit["replaced"] == 2

    # The stored object, as kubectl prints it.
    assert live.deployment["metadata"]["uid"] == stored["metadata"]["uid"]
    assert live.deployment["spec"] == stored["spec"]
    assert "managedFields" not in live.deployment["metadata"]
    # Its inputs, and the Settings the controller works with (a bad key is a warning).
    assert _kinds(live.inputs) == {
        "InstanceType": [entrance.instance_type],
        "ConfigMap": [CONFIGMAP_NAME],
    }
    assert live.settings.native_sidecars is False
    assert live.settings.system_namespace == system
    assert any("no-such-setting" in w for w in live.warnings), live.warnings
    # The observed state: the Pods, their groups' Workloads, the Services, the queues.
    observed = _kinds(live.observed)
    assert observed["Pod"] == sorted(p["metadata"]["name"] for p in pods)
    assert observed["Workload"] == sorted(group_of(p) for p in pods)
    assert "chat" in observed["Service"]
    assert len(observed["LocalQueue"]) == 1
    assert observed["ClusterQueue"] == [entrance.name]
    assert all(o.get("apiVersion") for o in live.observed)
    assert len(live.warnings) == 1, live.warnings

    # With an edited file: the edit is explained against the stored object, and the inputs of
    # both are read (the edit names another InstanceType).
    assert docs.old is not None and docs.old["metadata"]["uid"] == stored["metadata"]["uid"]
    assert docs.new["spec"]["roles"][0]["instanceType"] == INSTANCE_TYPE
    assert docs.new["metadata"]["namespace"] == ns
    assert sorted(_kinds(docs.inputs)["InstanceType"]) == sorted(
        [entrance.instance_type, INSTANCE_TYPE]
    )
    # The documents read back offline as INPUTS… do, and render exactly what the controller
    # runs: the stored object's Pods carry the pod-spec hash of the Pods that serve.
    md, errs = decode_deployment(live.deployment)
    assert md is not None, errs
    bundle = read_bundle(docs.input_sources(), namespace=ns)
    rendering = render(md, lookups=bundle.lookups(default_namespace=ns), settings=docs.settings)
    assert {_hash(p) for p in rendering.pods()} == {_hash(p) for p in pods}

    # Every request the reader sent reached the audit log, and each is a get or a list.
    assert all(r.startswith("GET /") for r in live.requests)
    sent = {_path(r.removeprefix("GET ")) for r in live.requests}

    async def audited() -> list[dict[str, Any]] | None:
        events = _reader_events(cluster)[before:]
        return events if sent <= {_path(e["requestURI"]) for e in events} else None

    events = await eventually(audited, what="the reader's requests in the audit log")
    assert {e["verb"] for e in events} <= {"get", "list"}, sorted({e["verb"] for e in events})
    assert {e["verb"] for e in events} == {"get", "list"}
    # read_live, explain_live_documents, then the verb twice
    assert len(events) >= 4 * len(live.requests)


README = REPO_ROOT / "README.md"


def readme_live_lines() -> list[str]:
    """The README's live lines (``gpustack-render explain md/...``) as printed, comment left
    out; a line with an optional part (``[edited.yaml]``) stands for both its forms."""
    forms: list[str] = []
    for line in README.read_text().splitlines():
        if not line.startswith("gpustack-render explain md/"):
            continue
        line = re.sub(r"\s+#\s.*$", "", line)
        for form in (re.sub(r"\[([^]]*)\]", "", line), re.sub(r"\[([^]]*)\]", r"\1", line)):
            form = " ".join(form.split())
            if form not in forms:
                forms.append(form)
    return forms


def _in_shell(line: str, cwd: Path, kubeconfig: Path) -> subprocess.CompletedProcess[str]:
    """``line`` run by bash in ``cwd``, as a person runs it: ``$KUBECONFIG`` set (the line
    names no kubeconfig) and the command line on ``PATH`` (a shim running this interpreter's
    ``gpustack_render.cli``, the console script's entry point)."""
    shims = cwd / "bin"
    shims.mkdir(exist_ok=True)
    shim = shims / "gpustack-render"
    shim.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} -m gpustack_render.cli "$@"\n')
    shim.chmod(0o755)
    env = {
        **os.environ,
        "KUBECONFIG": str(kubeconfig),
        "PATH": f"{shims}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    return subprocess.run(
        ["bash", "-c", line], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


async def test_the_readme_live_lines_run_as_printed(
    kube: Kube, kubeconfig_path: Path, cluster: Cluster, reader: Path, tmp_path: Path
) -> None:
    """``gpustack-render explain md/qwen-chat -n team-a [edited.yaml]``, both forms exactly as
    the README prints them (the edited file after ``-n``: issue 37), on a Ready ``qwen-chat``
    in ``team-a``, read as the audited reader."""
    lines = readme_live_lines()
    assert lines == [
        "gpustack-render explain md/qwen-chat -n team-a",
        "gpustack-render explain md/qwen-chat -n team-a edited.yaml",
    ]
    ns, name = "team-a", "qwen-chat"
    cluster.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    cluster.apply(_role_binding(ns))
    entrance = await new_entrance(kube, cluster, gpus=8)
    await ensure_instance_type(kube)  # the edit moves the role onto this one
    edited = deployment(name, ns, {**entrance.role(replicas=2), "instanceType": INSTANCE_TYPE})
    del edited["metadata"]["namespace"]  # -n gives it
    (tmp_path / "edited.yaml").write_text(json.dumps(edited))
    async with running_controller(kubeconfig_path):
        await deploy_serving(kube, deployment(name, ns, entrance.role(replicas=2)), 2)

        async def ready() -> dict[str, Any] | None:
            md = await get_md(kube, ns, name)
            return md if md and (md.get("status") or {}).get("phase") == "Ready" else None

        await eventually(ready, timeout=LONG, what=f"{name} Ready")
        stuck, edit = [await asyncio.to_thread(_in_shell, line, tmp_path, reader) for line in lines]
        await tear_down(kube, ns, name)

    for done in (stuck, edit):
        assert done.returncode == 0, done.stderr
        assert "usage:" not in done.stderr and "unrecognized" not in done.stderr, done.stderr
        assert done.stdout.startswith(f"ModelDeployment {ns}/{name}: UPDATE allowed\n")
    # Why is it stuck? Nothing is: unchanged, both replicas serve.
    assert re.search(r"^server +Server +unchanged +2 ", stuck.stdout, re.M), stuck.stdout
    assert "serving now: server 2/2" in stuck.stdout
    # What will this edit do? Another InstanceType rolls both replicas.
    assert re.search(r"^server +Server +roll +2 ", edit.stdout, re.M), edit.stdout


async def test_a_write_by_the_audited_identity_is_audited_as_one(
    kube: Kube, cluster: Cluster, reader: Path
) -> None:
    """The control: the audit log would show a write, so the GET-only check above can fail."""
    ns = await new_namespace(kube, "explain")
    cluster.kubectl(f"--kubeconfig={reader}", "create", "configmap", "x", "-n", ns, check=False)

    async def create() -> list[dict[str, Any]] | None:
        return [
            e
            for e in cluster.control_plane.audit_events()
            if e.get("user", {}).get("username") == AUDITED_USER
            and e.get("verb") == "create"
            and f"/namespaces/{ns}/configmaps" in e.get("requestURI", "")
        ] or None

    (event, *_) = await eventually(create, what="the create in the audit log")
    assert event["responseStatus"]["code"] == 403  # the read-only roles refuse it


async def test_errors_are_one_line_naming_what_failed(
    kube: Kube, cluster: Cluster, reader: Path
) -> None:
    ns = await new_namespace(kube, "explain")
    cluster.apply(_role_binding(ns))

    async def not_found() -> str | None:
        try:
            await asyncio.to_thread(
                read_live, kubeconfig=str(reader), context=None, namespace=ns, name="absent"
            )
        except LiveError as exc:
            return str(exc) if "not found" in str(exc) else None  # RBAC may lag a moment
        raise AssertionError("an absent deployment was read")

    message = await eventually(not_found, what="a 404 from the API server")
    assert message.startswith(f"ModelDeployment {ns}/absent not found"), message

    nobody = cluster.control_plane.user_kubeconfig("explain-nobody")
    with pytest.raises(LiveError) as forbidden:
        await asyncio.to_thread(
            read_live, kubeconfig=str(nobody), context=None, namespace=ns, name="chat"
        )
    text = str(forbidden.value)
    assert text.startswith(f"cannot read ModelDeployment {ns}/chat: "), text
    assert "forbidden" in text and "explain-nobody" in text and "read-only role" in text
    assert "\n" not in text

    with pytest.raises(LiveError, match=r"no context 'elsewhere'"):
        await asyncio.to_thread(
            read_live, kubeconfig=str(reader), context="elsewhere", namespace=ns, name="chat"
        )


def _explain_offline(argv: list[str]) -> dict[str, Any]:
    """``gpustack-render explain … -o json`` offline; exit 0 and its JSON."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["explain", *argv, "-o", "json"])
    assert code == 0, err.getvalue()
    answer: dict[str, Any] = json.loads(out.getvalue())
    return answer


async def test_live_explain_of_a_file_from_git_equals_the_offline_answer(
    kube: Kube, reader: Path, cluster: Cluster, tmp_path: Path
) -> None:
    """Issue 37 item 2: the edited file comes from Git, so it has no ``metadata.uid``; the stored
    object has one. Explained live, a ``router.replicas`` edit scales the router's Deployment and
    leaves its ServiceAccount, Role, RoleBinding and Service alone, exactly as the offline form
    answers for the same stored object and edit."""
    ns = await new_namespace(kube, "explain-git")
    system = await new_namespace(kube, "explain-git-sys")
    cluster.apply(_role_binding(ns))
    await ensure_instance_type(kube)
    body = deployment("chat", ns)
    body["spec"]["router"] = {"name": "vllm-router"}
    await kube.create(MODEL_DEPLOYMENTS, body, ns)
    edited = tmp_path / "edited.yaml"
    body["spec"]["router"]["replicas"] = 2
    assert "uid" not in body["metadata"]
    edited.write_text(json.dumps(body))

    async def readable() -> dict[str, Any] | None:
        try:
            return await asyncio.to_thread(
                _explain_verb,
                ["md/chat", str(edited), "-n", ns, "--kubeconfig", str(reader)],
                system,
            )
        except AssertionError:
            return None  # the reader's RoleBinding may take a moment

    live = await eventually(readable, what="a live explain of the edit")
    docs = await asyncio.to_thread(
        explain_live_documents,
        "md/chat",
        namespace=ns,
        kubeconfig=str(reader),
        edited_path=str(edited),
        system_namespace=system,
    )
    stored = tmp_path / "stored.yaml"
    stored.write_text(json.dumps(docs.old))
    inputs = tmp_path / "inputs.yaml"
    inputs.write_text("\n---\n".join(text for _, text in docs.input_sources()))
    offline = _explain_offline([str(edited), str(inputs), "--old", str(stored)])

    assert live["router"]["changes"] == [
        {"kind": "Deployment", "name": "chat-router", "change": "scaled 1 -> 2"}
    ]
    assert not live["router"]["enginePodsRoll"]
    live.pop("observed", None)
    assert live == offline


async def test_live_replicas_say_whether_the_count_fits_the_cluster_queue_now(
    kube: Kube, kubeconfig_path: Path, cluster: Cluster, reader: Path
) -> None:
    """Issue 37: ``explain md/NAME --replicas ROLE=N`` reads the ClusterQueue (GET) and says
    whether what N needs beyond the deployment now fits what the queue has free now: two of
    four GPUs are reserved, so one more replica fits and five more are three short."""
    ns = await new_namespace(kube, "explain")
    cluster.apply(_role_binding(ns))
    entrance = await new_entrance(kube, cluster, gpus=4)
    async with running_controller(kubeconfig_path):
        await deploy_serving(kube, deployment("fit", ns, entrance.role(replicas=2)), 2)

        async def reserved() -> bool:
            _, cq = cluster.control_plane.request(
                "GET", f"/apis/kueue.x-k8s.io/v1beta2/clusterqueues/{entrance.name}"
            )
            totals = [
                r.get("total")
                for f in (cq.get("status") or {}).get("flavorsReservation") or ()
                for r in f.get("resources") or ()
                if r.get("name") == "nvidia.com/gpu"
            ]
            return totals == ["2"]

        await eventually(reserved, what="two GPUs reserved on the ClusterQueue")
        argv = ["md/fit", "-n", ns, "--kubeconfig", str(reader)]
        answer = await eventually(
            lambda: asyncio.to_thread(
                _explain_verb,
                [*argv, "--replicas", "server=3", "--replicas", "server=7"],
                "gpustack-system",
            ),
            what="the live answer",
        )
        await tear_down(kube, ns, "fit")

    one_more, five_more = answer["scaling"]
    (fits,) = one_more["queues"]
    assert fits["clusterQueue"] == entrance.name and fits["fits"] is True, fits
    assert (fits["needed"]["nvidia.com/gpu"], fits["free"]["nvidia.com/gpu"]) == ("1", "2")
    assert fits["short"] == {}
    (short,) = five_more["queues"]
    assert short["fits"] is False and short["short"] == {"nvidia.com/gpu": "3"}, short
    assert (short["needed"]["nvidia.com/gpu"], short["free"]["nvidia.com/gpu"]) == ("5", "2")
