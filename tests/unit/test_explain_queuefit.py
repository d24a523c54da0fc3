"""``explain --replicas``: whether what an asked count needs fits a ClusterQueue's free quota
now (issue 37, item 5; gpustack_render/explain/queuefit.py)."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from gpustack_render.explain.queuefit import extra_needed, fit_text, queue_fit


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
