"""Scaling a prefill/decode ratio group by hand (``kubectl scale``) on the simulated cluster, with
the controller in this event loop and the real Kueue (D27, docs/autoscaling.md): whole units in
the ratio, a unit beyond quota queued and reported with its ClusterQueue and missing resource,
the bounds refused by the API server, a scale-down removing the queued unit first, and turning
the group off keeping the count."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpustack_controller.kube import MODEL_DEPLOYMENTS, SCALERS, Kube

from .cluster import Cluster
from .controller_fixtures import (
    condition,
    deployment,
    ensure_instance_type,
    eventually,
    get_md,
    live,
    new_entrance,
    new_namespace,
    pods_of,
    running_controller,
    seats_of,
    serving,
    steady,
    tear_down,
)

pytestmark = [pytest.mark.integration, pytest.mark.asyncio(loop_scope="session")]

NAME = "pd"
SCALER = "pd-pd"


@pytest.fixture
async def kube(kubeconfig_path: Path) -> Any:
    client = await Kube.connect(kubeconfig=str(kubeconfig_path))
    try:
        await ensure_instance_type(client)
        yield client
    finally:
        await client.close()


def _units(n: int) -> list[tuple[str, int]]:
    return sorted([("prefill", u) for u in range(n)] + [("decode", o) for o in range(2 * n)])


def _condition(obj: dict[str, Any] | None, type_: str) -> dict[str, Any]:
    return condition(obj or {}, type_) or {}


async def test_kubectl_scales_a_ratio_group_by_whole_units_within_quota_and_bounds(
    cluster: Cluster, kube: Kube
) -> None:
    ns = await new_namespace(kube, "scale-pd")
    # Six GPUs: two units of three one-GPU replicas; a third unit cannot be held.
    entrance = await new_entrance(kube, cluster, gpus=6)
    md = deployment(
        NAME,
        ns,
        entrance.role("prefill", kind="Prefill", replicas=1),
        entrance.role("decode", kind="Decode", replicas=2),
    )
    md["spec"]["scalingGroups"] = [
        {
            "name": "pd",
            "roles": [{"name": "prefill", "perUnit": 1}, {"name": "decode", "perUnit": 2}],
            "minUnits": 1,
            "maxUnits": 3,
        }
    ]

    def scale(units: int, check: bool = True) -> Any:
        return cluster.kubectl(
            "scale", "-n", ns, f"mdscaler/{SCALER}", f"--replicas={units}", check=check
        )

    async def scaler_status(**wanted: int) -> dict[str, Any] | None:
        obj = await kube.get(SCALERS, SCALER, ns)
        status = (obj or {}).get("status") or {}
        return obj if all(status.get(k) == v for k, v in wanted.items()) else None

    async with running_controller(cluster.control_plane.kubeconfig):
        await kube.create(MODEL_DEPLOYMENTS, md, ns)
        unit0 = seats_of(
            await eventually(
                lambda: serving(kube, ns, NAME, 3), timeout=60, what="one unit serving"
            )
        )
        assert sorted(unit0) == _units(1)

        # Up by one unit: prefill 1 and decode 2, 3 created together; unit 0 untouched.
        scale(2)
        two = seats_of(
            await eventually(
                lambda: serving(kube, ns, NAME, 6), timeout=60, what="two units serving"
            )
        )
        assert sorted(two) == _units(2)
        assert {k: two[k] for k in unit0} == unit0
        await eventually(
            lambda: scaler_status(desired=2, ready=2, admitted=2, quotaPending=0),
            what="the scaler at 2 ready units",
        )

        # Beyond quota: the third unit is created whole and waits; status names the queue
        # and the resource; the ready count stays 2 (what /scale reports).
        scale(3)

        async def third_waits() -> dict[str, Any] | None:
            pods = live(await pods_of(kube, ns, NAME))
            if sorted(seats_of(pods)) != _units(3):
                return None
            obj = await scaler_status(desired=3, ready=2, admitted=2, quotaPending=1)
            # Kueue writes why each of the unit's three groups waits once it has tried them;
            # until then the status names the replicas but not yet the resource they lack.
            message = _condition(obj or {}, "QuotaReserved").get("message", "")
            return obj if "cannot hold 3 replica(s)" in message and "it lacks" in message else None

        obj = await eventually(third_waits, timeout=60, what="the third unit queued")
        quota = _condition(obj, "QuotaReserved")
        assert (quota["status"], quota["reason"]) == ("False", "QuotaPending"), quota
        assert "1 unit(s) of scaling group pd of 3 wait for quota" in quota["message"]
        assert (
            f"ClusterQueue {entrance.name} cannot hold 3 replica(s) (prefill 2, decode 4, "
            "decode 5): it lacks nvidia.com/gpu in flavor"
        ) in quota["message"]
        _, scale_obj = cluster.control_plane.request(
            "GET",
            f"/apis/worker.gpustack.ai/v1/namespaces/{ns}/modeldeploymentscalers/{SCALER}/scale",
        )
        assert scale_obj["spec"]["replicas"] == 3 and scale_obj["status"]["replicas"] == 2
        stored = await get_md(kube, ns, NAME)
        assert stored is not None
        roles = {r["name"]: r for r in stored["status"]["roles"]}
        assert (roles["prefill"]["desired"], roles["decode"]["desired"]) == (3, 6)
        assert roles["decode"]["quotaPending"] == 2 and roles["prefill"]["quotaPending"] == 1
        assert "cannot hold 3 replica(s)" in _condition(stored, "QuotaReserved")["message"]

        # The API server refuses a count outside the bounds.
        refused = scale(4, check=False)
        assert refused.returncode != 0 and "replicas is above maxReplicas" in refused.stderr

        # Down to 2: the queued third unit leaves whole; the two admitted units stay as they are.
        scale(2)

        async def back_to_two() -> list[dict[str, Any]] | None:
            pods = live(await pods_of(kube, ns, NAME))
            return pods if sorted(seats_of(pods)) == _units(2) else None

        assert seats_of(await eventually(back_to_two, what="the third unit removed")) == two
        await eventually(
            lambda: scaler_status(desired=2, ready=2, quotaPending=0), what="no unit waiting"
        )

        # The group turned off: the count stays (no scale-down to the roles' replicas 1 and 2),
        # the scaler goes, and status remembers where the count came from.
        stored = await get_md(kube, ns, NAME)
        assert stored is not None
        spec = stored["spec"]
        del spec["scalingGroups"]
        await kube.replace(MODEL_DEPLOYMENTS, {**stored, "spec": spec}, ns)

        async def scaler_gone() -> bool:
            return await kube.get(SCALERS, SCALER, ns) is None

        await eventually(scaler_gone, what="the scaler deleted")

        async def still_two() -> bool:
            pods = live(await pods_of(kube, ns, NAME))
            return sorted(seats_of(pods)) == _units(2)

        await steady(still_two, seconds=4, what="the count held after the group was removed")
        stored = await get_md(kube, ns, NAME)
        assert stored is not None
        held = {r["name"]: r.get("scaling") for r in stored["status"]["roles"]}
        assert held == {
            "prefill": {"source": "Held", "specReplicas": 1},
            "decode": {"source": "Held", "specReplicas": 2},
        }
        await tear_down(kube, ns, NAME)
