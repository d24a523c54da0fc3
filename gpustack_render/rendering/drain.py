"""The ``preStop`` drain hook of a managed role's ``main`` container (docs/contract/render.md §13).

The hook waits 5 s (so endpoints stop routing new requests here), then polls the engine's own
``/metrics`` once per second with a 1 s timeout and returns on the second consecutive idle
read — never later than the grace period minus 5 s — and always exits 0. A refused connection,
an HTTP error or a TLS error ends it (nothing left to drain); a timeout or an unparsable sample
reads as busy. Idle = the engine's queue gauges sum to 0. The script text is this project's own:
it is covered by the render-version, not the pod-spec-hash.
"""

from __future__ import annotations

from typing import Any, Final, assert_never

from gpustack_render.core.vocabulary import EngineFamily

#: The gauges whose sum is 0 on an idle engine.
VLLM_GAUGES: Final = ("vllm:num_requests_running", "vllm:num_requests_waiting")
SGLANG_GAUGES: Final = (
    "sglang:num_running_reqs",
    "sglang:num_queue_reqs",
    "sglang:num_prefill_bootstrap_queue_reqs",
    "sglang:num_prefill_inflight_queue_reqs",
    "sglang:num_decode_prealloc_queue_reqs",
    "sglang:num_decode_transfer_queue_reqs",
)
#: Initial wait before the first poll, seconds.
SETTLE_SECONDS: Final = 5
#: The hook returns at the latest this many seconds before the grace period ends.
MARGIN_SECONDS: Final = 5

_SCRIPT: Final = """\
import ssl, sys, time, urllib.error as ue, urllib.request as ur
deadline = time.monotonic() + {budget}
gauges = {gauges}
url = "{url}"
ctx = ssl._create_unverified_context()
time.sleep(max(0, min({settle}, deadline - time.monotonic())))
idle = 0
while time.monotonic() < deadline:
    try:
        text = ur.urlopen(url, timeout=1, context=ctx).read().decode()
    except TimeoutError:
        text = None
    except ue.HTTPError:
        break
    except ue.URLError as err:
        if not isinstance(err.reason, TimeoutError):
            break
        text = None
    except Exception:
        break
    total = None
    if text is not None:
        try:
            values = []
            for line in text.splitlines():
                name = line.split("{{", 1)[0].split(" ", 1)[0]
                if name in gauges:
                    rest = line[line.rfind("}}") + 1:] if "{{" in line else line[len(name):]
                    values.append(float(rest.split()[0]))
            total = sum(values) if values else None
        except (ValueError, IndexError):
            total = None
    idle = idle + 1 if total == 0 else 0
    if idle >= 2:
        break
    time.sleep(max(0, min(1, deadline - time.monotonic())))
sys.exit(0)
"""


def idle_gauges(engine_family: EngineFamily) -> tuple[str, ...]:
    """The gauges whose sum is 0 when an engine of ``engine_family`` is idle."""
    match engine_family:
        case EngineFamily.VLLM:
            return VLLM_GAUGES
        case EngineFamily.SGLANG:
            return SGLANG_GAUGES
        case _:
            assert_never(engine_family)


def drain_script(*, engine_family: EngineFamily, port: int, https: bool, grace_seconds: int) -> str:
    """The Python program the hook runs for ``engine_family``."""
    gauges = idle_gauges(engine_family)
    scheme = "https" if https else "http"
    return _SCRIPT.format(
        budget=max(0, grace_seconds - MARGIN_SECONDS),
        gauges="(" + ", ".join(f'"{g}"' for g in gauges) + ")",
        url=f"{scheme}://127.0.0.1:{port}/metrics",
        settle=SETTLE_SECONDS,
    )


def prestop_hook(
    *, engine_family: EngineFamily, port: int, https: bool, grace_seconds: int
) -> dict[str, Any]:
    """The container ``lifecycle`` holding the drain hook: ``exec python3 -c <script>``."""
    script = drain_script(
        engine_family=engine_family, port=port, https=https, grace_seconds=grace_seconds
    )
    return {"preStop": {"exec": {"command": ["python3", "-c", script]}}}
