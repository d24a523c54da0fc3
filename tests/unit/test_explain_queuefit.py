"""``explain --replicas``: whether what an asked count needs fits a ClusterQueue's free quota
now (issue 37, item 5; gpustack_render/explain/queuefit.py)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from gpustack_render.explain.queuefit import extra_needed, fit_text, held_quota, queue_fit


def _queue(gpus: int | str, reserved: str | None) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if reserved is not None:
        status["flavorsReservation"] = [
            {"name": "default-flavor", "resources": [{"name": "nvidia.com/gpu", "total": reserved}]}
        ]
    return {
        "metadata": {"name": "q"},
        "spec": {
            "resourceGroups": [
                {
                    "coveredResources": ["cpu", "nvidia.com/gpu"],
                    "flavors": [
                        {
                            "name": "default-flavor",
                            "resources": [
                                {"name": "cpu", "nominalQuota": 64},
                                {"name": "nvidia.com/gpu", "nominalQuota": gpus},
                            ],
                        }
                    ],
                }
            ]
        },
        "status": status,
    }


def test_the_extra_replicas_fit_what_is_free() -> None:
    fit = queue_fit("q", _queue(8, "3"), needed={"nvidia.com/gpu": Fraction(5)})
    assert fit.fits and fit.free == {"nvidia.com/gpu": "5"} and fit.short == {}
    assert (
        fit_text(fit)
        == "ClusterQueue q: fits: needs nvidia.com/gpu=5 more, has nvidia.com/gpu=5 free now"
    )


def test_short_by_how_much_and_which_resource() -> None:
    fit = queue_fit(
        "q", _queue("8", "6"), needed={"nvidia.com/gpu": Fraction(3), "cpu": Fraction(4)}
    )
    assert not fit.fits and fit.short == {"nvidia.com/gpu": "1"}
    assert "nvidia.com/gpu short by 1 (needs 3 more, has 2 free)" in fit_text(fit)


def test_nothing_reserved_yet_and_an_uncovered_resource() -> None:
    fit = queue_fit("q", _queue(2, None), needed={"huawei.com/npu": Fraction(1)})
    assert not fit.fits and fit.uncovered == ("huawei.com/npu",)
    assert "huawei.com/npu is not covered by it" in fit_text(fit)


def test_a_scale_down_needs_nothing_more() -> None:
    assert extra_needed({"nvidia.com/gpu": Fraction(4)}, {"nvidia.com/gpu": Fraction(2)}) == {}
    fit = queue_fit("q", _queue(0, "0"), needed={})
    assert fit.fits and "needs no more quota" in fit_text(fit)


def test_nothing_free_reads_zero() -> None:
    """A ClusterQueue whose quota is all reserved has 0 free, written as Kubernetes writes it
    (format_decimal wrote ``0E``)."""
    fit = queue_fit("q", _queue(2, "2"), needed={"nvidia.com/gpu": Fraction(1)})
    assert fit.free == {"nvidia.com/gpu": "0"}
    assert "(needs 1 more, has 0 free)" in fit_text(fit)


def test_what_the_deployment_holds_is_its_admitted_workloads_on_that_queue() -> None:
    """A replica that waits for quota holds nothing: what an ask needs more of is measured from
    the reservations of the deployment's own Workloads on that ClusterQueue."""

    def workload(queue: str, gpus: str, *, reserved: bool) -> dict[str, Any]:
        return {
            "metadata": {"name": f"w-{queue}-{gpus}"},
            "status": {
                "conditions": [
                    {"type": "QuotaReserved", "status": "True" if reserved else "False"}
                ],
                "admission": {
                    "clusterQueue": queue,
                    "podSetAssignments": [
                        {"name": "server", "resourceUsage": {"nvidia.com/gpu": gpus, "cpu": "8"}}
                    ],
                },
            },
        }

    held = held_quota(
        [
            workload("q", "1", reserved=True),
            workload("q", "1", reserved=True),
            workload("q", "1", reserved=False),
            workload("other", "4", reserved=True),
        ],
        "q",
    )
    assert held == {"nvidia.com/gpu": Fraction(2), "cpu": Fraction(16)}
    needed = extra_needed(held, {"nvidia.com/gpu": Fraction(4), "cpu": Fraction(32)})
    assert needed == {"nvidia.com/gpu": Fraction(2), "cpu": Fraction(16)}
