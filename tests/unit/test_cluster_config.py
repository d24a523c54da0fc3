"""The one line the controller and the webhook server print when no cluster configuration loads
(gpustack_kube.config raises it for both; tests/unit/test_cli_conventions.py runs them)."""

from __future__ import annotations

from gpustack_render.core.clusterconfig import config_problem


def test_a_kubeconfig_that_does_not_load_is_named_with_the_first_line_of_the_error() -> None:
    exc = ValueError("Invalid kube-config file.\nExpected key current-context in kube-config")
    assert config_problem(exc, kubeconfig="/tmp/k") == (
        "--kubeconfig /tmp/k: not a usable kubeconfig (ValueError: Invalid kube-config file.)"
    )
    assert config_problem(exc) == (
        "the default kubeconfig: not a usable kubeconfig (ValueError: Invalid kube-config file.)"
    )


def test_nothing_found_names_the_in_cluster_reason_and_the_flag() -> None:
    line = config_problem(OSError("Service host/port is not set."), nothing_found=True)
    assert line == (
        "no cluster configuration: no usable in-cluster service account (OSError: Service "
        "host/port is not set.), and no kubeconfig ($KUBECONFIG, else ~/.kube/config); "
        "pass --kubeconfig"
    )


def test_an_error_without_a_message_is_named_by_its_class() -> None:
    assert (
        config_problem(KeyError(), kubeconfig="k")
        == "--kubeconfig k: not a usable kubeconfig (KeyError)"
    )
    assert "\n" not in config_problem(RuntimeError("\n\n  two\nlines  \n"), kubeconfig="k")
