"""What the controller reads for an elastic deployment's facts (gpustack_render/elastic/layers.py
and engine.py helpers): a simulated node, a Node's allocatable cards, a member's cards, the
served model name."""

from __future__ import annotations

from gpustack_render.elastic.engine import served_model
from gpustack_render.elastic.layers import (
    member_cards,
    no_process,
    node_allocatable,
    simulated_node,
)


def _node(annotations: dict[str, str], allocatable: dict[str, str]) -> dict[str, object]:
    return {"metadata": {"annotations": annotations}, "status": {"allocatable": allocatable}}


def test_a_kwok_node_is_simulated_and_says_no_process_runs() -> None:
    assert simulated_node(_node({"kwok.x-k8s.io/node": "fake"}, {}))
    assert not simulated_node(_node({}, {}))
    assert not simulated_node(None)
    reason = no_process("the engine", "md-server-x", "node-1").reason
    assert "simulated node node-1 (KWOK)" in reason and "no process runs" in reason


def test_allocatable_whole_cards() -> None:
    node = _node({}, {"nvidia.com/gpu": "8", "cpu": "64"})
    assert node_allocatable(node, "nvidia.com/gpu") == 8
    assert node_allocatable(node, "amd.com/gpu") == 0
    assert node_allocatable(_node({}, {"nvidia.com/gpu": "1500m"}), "nvidia.com/gpu") == 0


def test_member_cards_read_the_main_containers_extended_resource() -> None:
    pod = {
        "spec": {
            "containers": [
                {"name": "proxy", "resources": {"limits": {"example.com/x": "9"}}},
                {
                    "name": "main",
                    "resources": {"limits": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "2"}},
                },
            ]
        }
    }
    assert member_cards(pod) == ("nvidia.com/gpu", 2)
    assert member_cards({}) == ("cards", 0)


def test_served_model_is_the_first_served_model_name_else_the_default() -> None:
    def pod(*args: str) -> dict[str, object]:
        return {"spec": {"containers": [{"name": "main", "args": list(args)}]}}

    assert served_model(pod("--served-model-name", "qwen", "other"), "Qwen/Qwen3") == "qwen"
    assert served_model(pod("--served-model-name=q2"), "Qwen/Qwen3") == "q2"
    assert served_model(pod("--port", "8000"), "Qwen/Qwen3") == "Qwen/Qwen3"
