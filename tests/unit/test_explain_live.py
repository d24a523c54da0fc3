"""``explain``'s live reader (gpustack_render.cli.live) against a canned API server on loopback:
what it reads, that it sends GET only, and that every failure is one line naming what failed
and the way out. The real API server is in tests/integration/test_explain_live.py."""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpustack_render.cli import live
from gpustack_render.cli.documents import read_bundle
from gpustack_render.cli.live import LiveError, read_live
from gpustack_render.core import naming
from gpustack_render.core.settings import CONFIGMAP_NAME

NS = "team-a"
MD = "/apis/worker.gpustack.ai/v1/namespaces/team-a/modeldeployments/chat"
IT = "/apis/worker.gpustack.ai/v1/instancetypes/gpu-a"
PODS = "/api/v1/namespaces/team-a/pods"
SERVICES = "/api/v1/namespaces/team-a/services"
WORKLOADS = "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/workloads"
LOCAL_QUEUES = "/apis/kueue.x-k8s.io/v1beta2/namespaces/team-a/localqueues"
SETTINGS = f"/api/v1/namespaces/gpustack-system/configmaps/{CONFIGMAP_NAME}"
GROUP0 = naming.group_name(NS, "chat", "server", 0)


def _md(instance_type: str = "gpu-a") -> dict[str, Any]:
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelDeployment",
        "metadata": {"name": "chat", "namespace": NS, "uid": "md-uid", "managedFields": [{}]},
        "spec": {
            "model": {"name": "Qwen/Qwen3-8B"},
            "engine": {"name": "vLLM", "image": "vllm/vllm-openai:v0.25.1"},
            "roles": [{"name": "server", "replicas": 1, "instanceType": instance_type}],
        },
    }


def _instance_type(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "InstanceType",
        "metadata": {"name": name},
        "spec": {"acceleratable": True, "unitResources": {"cpu": "8", "ram": "32Gi"}},
    }


def _list(*items: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "List", "metadata": {}, "items": list(items)}


def _status(code: int, message: str) -> dict[str, Any]:
    return {"kind": "Status", "status": "Failure", "code": code, "message": message}


def _owner_pod(uid: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "name": "chat-server-x", "uid": uid}


def cluster() -> dict[str, tuple[int, dict[str, Any]]]:
    """path → (status, body): one deployment Ready on one queue."""
    pod = {"metadata": {"name": "chat-server-x", "uid": "pod-uid", "managedFields": [{}]}}
    return {
        MD: (200, _md()),
        IT: (200, _instance_type("gpu-a")),
        SETTINGS: (200, {"data": {"native-sidecars": "false", "bogus": "1"}}),
        PODS: (200, _list(pod)),
        SERVICES: (200, _list({"metadata": {"name": "chat"}})),
        WORKLOADS: (
            200,
            _list(
                {"metadata": {"name": "other"}},  # another deployment's
                {"metadata": {"name": "owned", "ownerReferences": [_owner_pod("pod-uid")]}},
                # Owned by something of that uid that is not a Pod: not the deployment's.
                {
                    "metadata": {
                        "name": "odd",
                        "ownerReferences": [{"kind": "Job", "uid": "pod-uid"}],
                    }
                },
                {"metadata": {"name": GROUP0}},  # outlives its Pods
            ),
        ),
        LOCAL_QUEUES: (200, _list({"metadata": {"name": "q"}, "spec": {"clusterQueue": "cq"}})),
        "/apis/kueue.x-k8s.io/v1beta2/clusterqueues/cq": (200, {"metadata": {"name": "cq"}}),
    }


class _Server(ThreadingHTTPServer):
    answers: dict[str, tuple[int, dict[str, Any]]]
    seen: list[tuple[str, str, str]]
    tokens: set[str]


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def _answer(self) -> None:
        path = self.path.split("?", 1)[0]
        self.server.seen.append((self.command, self.path, self.headers.get("User-Agent", "")))
        self.server.tokens.add(self.headers.get("Authorization", ""))
        status, body = self.server.answers.get(path, (404, _status(404, "not found")))
        data = json.dumps(body).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the reader cancelled the request (a sibling read failed first)

    # http.server's names.
    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer  # noqa: N815

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def server() -> Iterator[_Server]:
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.answers = cluster()
    httpd.seen = []
    httpd.tokens = set()
    thread = threading.Thread(target=httpd.serve_forever, args=(0.02,), daemon=True)
    thread.start()
    try:
        yield httpd
    finally:
        httpd.shutdown()
        httpd.server_close()


def kubeconfig(tmp_path: Path, server: str, *, namespace: str = NS) -> Path:
    path = tmp_path / "kubeconfig"
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "secret"}}],
        "contexts": [
            {"name": "work", "context": {"cluster": "c", "user": "u", "namespace": namespace}}
        ],
        "current-context": "work",
    }
    path.write_text(json.dumps(config))
    return path


def _url(server: _Server) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def _read(path: Path, **kwargs: Any) -> live.LiveInputs:
    args: dict[str, Any] = {"kubeconfig": str(path), "context": None, "namespace": NS}
    return read_live(name="chat", **{**args, **kwargs})


def _names(objects: list[dict[str, Any]]) -> list[str]:
    return [f"{o['kind']}/{o['metadata']['name']}" for o in objects]


def test_reads_the_deployment_its_inputs_settings_and_observed_state(
    server: _Server, tmp_path: Path
) -> None:
    got = _read(kubeconfig(tmp_path, _url(server)))
    assert got.deployment["metadata"]["uid"] == "md-uid"
    assert "managedFields" not in got.deployment["metadata"]
    assert _names(got.inputs) == ["InstanceType/gpu-a", f"ConfigMap/{CONFIGMAP_NAME}"]
    assert got.inputs[1]["data"]["native-sidecars"] == "false"
    assert "bogus" not in got.inputs[1]["data"]  # the Settings in force, as the controller's
    assert got.settings.native_sidecars is False
    # The deployment's Workloads in name order, as the API server lists a namespace.
    assert _names(got.observed) == [
        "Pod/chat-server-x",
        *sorted(["Workload/owned", f"Workload/{GROUP0}"]),
        "Service/chat",
        "LocalQueue/q",
        "ClusterQueue/cq",
    ]
    assert all(o["apiVersion"] for o in got.observed)
    assert "managedFields" not in got.observed[0]["metadata"]
    assert len(got.warnings) == 1 and "bogus" in got.warnings[0]
    # GET only, each with the reader's user agent and the kubeconfig's token.
    assert {verb for verb, _, _ in server.seen} == {"GET"}
    assert {agent for _, _, agent in server.seen} == {live.user_agent()}
    assert server.tokens == {"Bearer secret"}
    assert len(got.requests) == len(server.seen) == 8
    assert any("labelSelector=" in uri for _, uri, _ in server.seen if uri.startswith(PODS))


def test_namespace_defaults_to_the_contexts(server: _Server, tmp_path: Path) -> None:
    got = _read(kubeconfig(tmp_path, _url(server)), namespace=None)
    assert got.deployment["metadata"]["namespace"] == NS
    assert got.requests[0] == f"GET {MD}"  # the context's namespace, not "default"


def test_edited_deployment_adds_its_inputs(server: _Server, tmp_path: Path) -> None:
    server.answers["/apis/worker.gpustack.ai/v1/instancetypes/gpu-b"] = (
        200,
        _instance_type("gpu-b"),
    )
    edited = tmp_path / "edited.yaml"
    body = _md("gpu-b")
    del body["metadata"]["namespace"]
    edited.write_text(json.dumps(body))
    docs = live.explain_live_documents(
        "md/chat",
        namespace=None,
        kubeconfig=str(kubeconfig(tmp_path, _url(server))),
        edited_path=str(edited),
    )
    assert docs.old is not None and docs.old["metadata"]["uid"] == "md-uid"
    assert docs.new["spec"]["roles"][0]["instanceType"] == "gpu-b"
    assert docs.new["metadata"]["namespace"] == NS
    kinds = [n for n in _names(docs.inputs) if n.startswith("InstanceType/")]
    assert kinds == ["InstanceType/gpu-a", "InstanceType/gpu-b"]
    bundle = read_bundle(docs.input_sources())  # as INPUTS… are read offline
    assert sorted(i.name for i in bundle.inputs) == ["gpu-a", "gpu-b"]
    assert bundle.settings.native_sidecars is False


def test_live_arguments() -> None:
    parser = argparse.ArgumentParser()
    live.add_live_arguments(parser)
    args = parser.parse_args(["--kubeconfig", "k", "--context", "c"])
    assert (args.kubeconfig, args.context, args.system_namespace) == ("k", "c", "gpustack-system")


def test_without_an_edit_the_stored_object_is_explained(server: _Server, tmp_path: Path) -> None:
    docs = live.explain_live_documents(
        "md/chat", namespace=NS, kubeconfig=str(kubeconfig(tmp_path, _url(server)))
    )
    assert docs.old is None and docs.new["metadata"]["uid"] == "md-uid"


def test_optional_reads_that_fail_are_warnings(server: _Server, tmp_path: Path) -> None:
    server.answers[SETTINGS] = (403, _status(403, 'configmaps is forbidden: User "u"'))
    server.answers["/apis/kueue.x-k8s.io/v1beta2/clusterqueues/cq"] = (404, _status(404, "x"))
    del server.answers[WORKLOADS]
    got = _read(kubeconfig(tmp_path, _url(server)))
    assert "ConfigMap" not in {o["kind"] for o in got.inputs}
    assert got.settings.native_sidecars is True  # the defaults
    text = "\n".join(got.warnings)
    assert "the default Settings are assumed" in text
    assert "ClusterQueue cq (a LocalQueue points at it) does not exist" in text
    assert "does not serve workloads.kueue.x-k8s.io/v1beta2" in text


@pytest.mark.parametrize(
    ("path", "status", "expected"),
    [
        pytest.param(
            MD, 404, f"ModelDeployment {NS}/chat not found (check the name and -n", id="md"
        ),
        pytest.param(
            MD,
            403,
            f"cannot read ModelDeployment {NS}/chat: no (grant the read-only role",
            id="403",
        ),
        pytest.param(IT, 403, "cannot read InstanceType gpu-a: no (grant", id="input-403"),
        pytest.param(PODS, 403, f"cannot read pods in namespace {NS}: no (grant", id="pods-403"),
        pytest.param(MD, 401, "refused the credentials (401 Unauthorized): log in again", id="401"),
        pytest.param(MD, 500, f"cannot read ModelDeployment {NS}/chat: HTTP 500: no", id="500"),
    ],
)
def test_refusals_are_one_line(
    server: _Server, tmp_path: Path, path: str, status: int, expected: str
) -> None:
    server.answers[path] = (status, _status(status, "no"))
    with pytest.raises(LiveError) as caught:
        _read(kubeconfig(tmp_path, _url(server)))
    assert expected in str(caught.value)
    assert "\n" not in str(caught.value)


def test_several_refusals_are_still_one_line_and_nothing_else(
    server: _Server, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    for path in (PODS, SERVICES, WORKLOADS, LOCAL_QUEUES, IT):
        server.answers[path] = (403, _status(403, "no"))
    with pytest.raises(LiveError, match=r"^cannot read .*: no \(grant"):
        _read(kubeconfig(tmp_path, _url(server)))
    assert capfd.readouterr() == ("", "")


def test_an_unreachable_server_is_named(tmp_path: Path) -> None:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"  # bound, not listening: refused
        with pytest.raises(LiveError, match=r"^cannot reach the API server http://127\.0\.0\.1:"):
            _read(kubeconfig(tmp_path, url))


def test_a_missing_kubeconfig_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(LiveError, match=r"^--kubeconfig /no/such: no such file$"):
        read_live(kubeconfig="/no/such", context=None, namespace=NS, name="chat")
    monkeypatch.setenv("KUBECONFIG", f"/no/a:{tmp_path}/b")
    with pytest.raises(LiveError, match=r"^KUBECONFIG=/no/a:.*: no such file"):
        read_live(kubeconfig=None, context=None, namespace=NS, name="chat")
    monkeypatch.delenv("KUBECONFIG")
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(LiveError, match=r"no kubeconfig: .*/\.kube/config does not exist"):
        read_live(kubeconfig=None, context=None, namespace=NS, name="chat")


def test_kubeconfig_env_list_and_home_are_read_like_kubectl(
    server: _Server, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = kubeconfig(tmp_path, _url(server))
    monkeypatch.setenv("KUBECONFIG", f"/no/such:{path}")
    assert _read(path, kubeconfig=None).deployment["metadata"]["uid"] == "md-uid"
    monkeypatch.delenv("KUBECONFIG")
    monkeypatch.setenv("HOME", str(tmp_path))
    (tmp_path / ".kube").mkdir()
    path.rename(tmp_path / ".kube" / "config")
    assert live.kubeconfig_files(None) == str(tmp_path / ".kube" / "config")


def test_an_unknown_context_is_named(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path, "http://127.0.0.1:1")
    with pytest.raises(LiveError, match=r"no context 'elsewhere' \(`kubectl config get-contexts`"):
        _read(path, context="elsewhere")


def test_no_current_context_is_named(tmp_path: Path) -> None:
    path = kubeconfig(tmp_path, "http://127.0.0.1:1")
    config = json.loads(path.read_text())
    del config["current-context"]
    path.write_text(json.dumps(config))
    with pytest.raises(LiveError, match=r"no current context \(pass --context"):
        _read(path)


def test_an_exec_credential_plugin_gives_the_token(server: _Server, tmp_path: Path) -> None:
    path = kubeconfig(tmp_path, _url(server))
    config = json.loads(path.read_text())
    credential = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": {"token": "from-plugin"},
    }
    config["users"][0]["user"] = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": sys.executable,
            "args": ["-c", f"print({json.dumps(json.dumps(credential))})"],
            "interactiveMode": "Never",
        }
    }
    path.write_text(json.dumps(config))
    _read(path)
    assert server.tokens == {"Bearer from-plugin"}


def test_a_kubeconfig_that_is_not_one_is_named(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text("[]")
    with pytest.raises(LiveError, match=r"cannot be used"):
        _read(path)


@pytest.mark.parametrize(
    ("operand", "name"),
    [
        ("md/qwen-chat", "qwen-chat"),
        ("modeldeployment/a.b", "a.b"),
        ("modeldeployments.worker.gpustack.ai/x", "x"),
        ("pods/x", None),
        ("md/", None),
        ("md/Upper", None),
        ("qwen.yaml", None),
    ],
)
def test_live_target(operand: str, name: str | None) -> None:
    assert live.live_target(operand) == name


def test_a_file_named_like_a_target_is_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "md").mkdir()
    (tmp_path / "md" / "chat").write_text("")
    assert live.live_target("md/chat") is None


@pytest.mark.parametrize(
    ("documents", "message"),
    [
        ([], "holds nothing"),
        ([_md(), _instance_type("x")], "holds exactly the ModelDeployment"),
        ([{**_md(), "metadata": {"name": "other"}}], f"names ModelDeployment {NS}/other, not"),
        ([{**_md(), "metadata": {"name": "chat", "namespace": "b"}}], "names ModelDeployment b/"),
        ([{**_md(), "metadata": "x"}], "has no metadata"),
    ],
)
def test_edited_file_holds_the_one_deployment(
    tmp_path: Path, documents: list[Mapping[str, Any]], message: str
) -> None:
    path = tmp_path / "edited.yaml"
    path.write_text("---\n".join(yaml.safe_dump(d) for d in documents))
    with pytest.raises(LiveError, match=message):
        live.edited_deployment(str(path), io.StringIO(), namespace=NS, name="chat")


def test_edited_file_from_stdin_and_unreadable() -> None:
    doc = live.edited_deployment("-", io.StringIO(json.dumps(_md())), namespace=NS, name="chat")
    assert doc["metadata"]["name"] == "chat"
    with pytest.raises(LiveError, match=r"/no/such: cannot read"):
        live.edited_deployment("/no/such", io.StringIO(), namespace=NS, name="chat")


def test_a_target_that_is_not_one_is_refused() -> None:
    with pytest.raises(LiveError, match=r"^pods/x: not md/NAME$"):
        live.explain_live_documents("pods/x", namespace=NS)


def test_the_client_is_imported_only_when_a_cluster_is_read() -> None:
    code = (
        "import sys\nimport gpustack_render.cli.live\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('kubernetes_asyncio', 'aiohttp', 'asyncio', 'ssl')))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


def test_the_first_failed_read_cancels_the_others_before_it_is_raised() -> None:
    import asyncio

    cancelled: list[str] = []

    async def fails() -> None:
        raise LiveError("first")

    async def slow() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.append("slow")
            raise

    async def run() -> list[str]:
        with pytest.raises(LiveError, match=r"^first$"):
            await live._all(slow(), fails())
        return list(cancelled)  # as the error reaches the caller, not later

    assert asyncio.run(run()) == ["slow"]


def test_the_workload_of_an_autoscaled_replica_above_replicas_is_read() -> None:
    """Issue 32 item 4: a role an autoscaler runs at 3 while ``roles[].replicas`` is 1; replica
    2's Pod is gone but its Workload still holds quota. Live ``explain`` finds Workloads by the
    controller's rule (the status's count), so it reports that one too; a Workload of a seat the
    deployment does not run, and one of another namespace, are not its."""
    from gpustack_render.schema.decoding import decode_deployment

    raw = {
        "apiVersion": "worker.gpustack.ai/v1",
        "kind": "ModelDeployment",
        "metadata": {"name": "chat", "namespace": "team-a", "uid": "u"},
        "spec": {
            "model": {"name": "m"},
            "engine": {"name": "vLLM", "image": "i"},
            "roles": [{"name": "server", "replicas": 1, "instanceType": "t"}],
        },
        "status": {"roles": [{"name": "server", "desired": 3}]},
    }
    md, errs = decode_deployment(raw)
    assert md is not None, errs

    def workload(ordinal: int, namespace: str = "team-a") -> dict[str, Any]:
        name = naming.group_name("team-a", "chat", "server", ordinal)
        return {"kind": "Workload", "metadata": {"name": name, "namespace": namespace}}

    found = live.workloads_of(
        [workload(2), workload(3), workload(2, "team-b")], pods=[], deployments=[md]
    )
    assert [w["metadata"]["name"] for w in found] == [workload(2)["metadata"]["name"]]


DIGEST = "sha256:" + "d" * 64
ARTIFACT = "/apis/worker.gpustack.ai/v1/namespaces/team-a/modelartifacts/w"
NODE_STORES = "/apis/worker.gpustack.ai/v1/nodemodelstores"


def _node_store(name: str, digest: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "status": {"models": [{"digest": digest, "state": "Ready", "sizeBytes": 1}]},
    }


def test_the_node_stores_of_a_resolved_hub_artifact_are_listed_once(
    server: _Server, tmp_path: Path
) -> None:
    md = _md()
    md["spec"]["model"]["artifactRef"] = {"name": "w"}
    server.answers[MD] = (200, md)
    server.answers[ARTIFACT] = (
        200,
        {
            "metadata": {"name": "w", "namespace": NS, "uid": "a-uid"},
            "spec": {"source": {"huggingFace": {"repository": "org/m", "revision": "main"}}},
            "status": {
                "resolved": {"revision": "c" * 40, "manifestDigest": DIGEST, "sizeBytes": 1},
                "conditions": [{"type": "Resolved", "status": "True", "reason": "Resolved"}],
            },
        },
    )
    server.answers[NODE_STORES] = (
        200,
        _list(_node_store("gpu-1", DIGEST), _node_store("gpu-2", "sha256:" + "e" * 64)),
    )
    got = _read(kubeconfig(tmp_path, _url(server)))
    # Only the record listing the artifact's digest is kept, with its kind for the bundle.
    assert [n for n in _names(got.inputs) if n.startswith("NodeModelStore/")] == [
        "NodeModelStore/gpu-1"
    ]
    assert [uri for _, uri, _ in server.seen].count(NODE_STORES) == 1
    # Refused: a warning, and no preference.
    server.answers[NODE_STORES] = (403, _status(403, "nodemodelstores is forbidden"))
    got = _read(kubeconfig(tmp_path, _url(server)))
    assert not [n for n in _names(got.inputs) if n.startswith("NodeModelStore/")]
    assert any("cannot list nodemodelstores" in w for w in got.warnings)
