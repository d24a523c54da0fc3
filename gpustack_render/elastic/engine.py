"""The engine's own answers about its width (docs/contract/elastic-ep.md §4.4; D29: vLLM 0.33.0's
routes): what the controller sends to the master Pod, and how each answer reads.

The controller sends, to the master Pod's IP on the port of its ``prometheus.io/port`` annotation
(plain ``http``, redirects not followed, one pass bounded to :data:`PASS_BUDGET_SECONDS`):

- **is scaling**: ``POST /is_scaling_elastic_ep`` with ``{}``. vLLM 0.33.0 keeps this route (and
  ``/health``) answering while it scales; every other route answers 503 meanwhile
  (``vllm/entrypoints/serve/elastic_ep/middleware.py``). Its answer carries
  ``is_scaling_elastic_ep`` (a boolean; anything else is malformed) beside the phase fields
  0.33.0 added.
- **bound**: ``POST /v1/completions`` with ``X-data-parallel-rank: -1``: the engine refuses it with
  400 and ``data_parallel_rank -1 is out of range [0, N).``, naming its width N
  (``vllm/v1/engine/input_processor.py``).
- **forward**: the same request to each rank r in 0..N-1: 200, a ``text_completion`` of one
  token.
- **scale**: ``POST /scale_elastic_ep`` ``{"new_data_parallel_size": T, "drain_timeout": 120}``,
  held open by vLLM until the resize ends, bounded here to :data:`SCALE_TIMEOUT_SECONDS`.
  :func:`classify_scale` reads its answer.

A pass proves a width with: is scaling (false), bound, N forwards, bound again
(:class:`EngineAnswers`).
"""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass, field
from typing import Any, Final

from gpustack_render.core import jsonview, nesting

SCALE_PATH: Final = "/scale_elastic_ep"
IS_SCALING_PATH: Final = "/is_scaling_elastic_ep"
COMPLETIONS_PATH: Final = "/v1/completions"
RANK_HEADER: Final = "X-data-parallel-rank"
#: The drain the scale call asks for, and the bound on the whole call (§4.4).
DRAIN_TIMEOUT_SECONDS: Final = 120
SCALE_TIMEOUT_SECONDS: Final = 150.0
#: The bound on one pass's engine calls other than the scale call.
PASS_BUDGET_SECONDS: Final = 180.0
#: The bound on each probe request.
PROBE_TIMEOUT_SECONDS: Final = 30.0
#: How much of an answer a message quotes.
QUOTED: Final = 300

_BOUND: Final = re.compile(r"data_parallel_rank -1 is out of range \[0, (\d+)\)\.")


@dataclass(frozen=True)
class EngineRequest:
    """One call to the master: method, path, JSON body, headers, timeout."""

    path: str
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    timeout_seconds: float = PROBE_TIMEOUT_SECONDS
    method: str = "POST"


def scale_request(target: int) -> EngineRequest:
    return EngineRequest(
        SCALE_PATH,
        {"new_data_parallel_size": target, "drain_timeout": DRAIN_TIMEOUT_SECONDS},
        timeout_seconds=SCALE_TIMEOUT_SECONDS,
    )


def is_scaling_request() -> EngineRequest:
    return EngineRequest(IS_SCALING_PATH, {})


def completion_request(rank: int, model: str) -> EngineRequest:
    """The bound probe (``rank`` -1) or the forward to ``rank``; ``model`` is the first
    ``--served-model-name``, else the deployment's model name."""
    return EngineRequest(
        COMPLETIONS_PATH,
        {"model": model, "prompt": "Hello", "max_tokens": 1, "stream": False},
        headers={RANK_HEADER: str(rank)},
    )


def _json(body: str | bytes) -> Any:
    try:
        return nesting.loads(body)
    except ValueError:
        return None


def error_text(body: str | bytes) -> str:
    """What an engine's error answer says: ``error.message`` (vLLM's ErrorResponse), a string
    ``error`` (its scaling middleware), ``detail``, else the start of the body."""
    doc = _json(body)
    if isinstance(doc, dict):
        err = doc.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return str(err["message"])[:QUOTED]
        for key in ("error", "detail", "message"):
            if isinstance(doc.get(key), str):
                return str(doc[key])[:QUOTED]
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
    return text.strip()[:QUOTED]


# ---- the probes --------------------------------------------------------------------------------


def read_is_scaling(status: int | None, body: str | bytes = b"") -> tuple[bool | None, str]:
    """(scaling, problem): the answer to :func:`is_scaling_request`; ``None`` with the problem
    when it is not a 200 carrying a boolean ``is_scaling_elastic_ep``."""
    if status is None:
        return None, "the engine did not answer /is_scaling_elastic_ep"
    if status != 200:
        return None, f"/is_scaling_elastic_ep answered HTTP {status} ({error_text(body)})"
    value = jsonview.view(_json(body)).get("is_scaling_elastic_ep")
    if not isinstance(value, bool):
        return None, "/is_scaling_elastic_ep answered without a boolean is_scaling_elastic_ep"
    return value, ""


def read_bound(status: int | None, body: str | bytes = b"") -> tuple[int | None, str]:
    """(width, problem): the answer to the bound probe (``rank`` -1)."""
    if status is None:
        return None, "the engine did not answer the bound probe"
    said = error_text(body)
    match = _BOUND.search(said) if status == 400 else None
    if match is None:
        return None, f"the bound probe answered HTTP {status} ({said})"
    return int(match.group(1)), ""


def read_forward(status: int | None, body: str | bytes = b"") -> str:
    """ "" when the answer to a forward is a served completion of one token, else why not."""
    if status is None:
        return "did not answer"
    if status != 200:
        return f"answered HTTP {status} ({error_text(body)})"
    doc = jsonview.view(_json(body))
    choices = jsonview.items(doc.get("choices"))
    tokens = jsonview.view(doc.get("usage")).get("completion_tokens")
    if doc.get("object") != "text_completion" or len(choices) != 1 or tokens != 1:
        return "answered 200 without a one-token text_completion"
    return ""


@dataclass(frozen=True)
class EngineAnswers:
    """One pass's answers, all from the master Pod ``master_uid``: the scaling flag, the bound
    probes before and after the forwards, and each forward's verdict (rank r: ``""`` served,
    else why not). The controller stops early (no forwards while scaling or without a bound);
    what it did not send stays empty."""

    master_uid: str
    scaling: bool | None
    scaling_problem: str = ""
    bound_before: int | None = None
    bound_after: int | None = None
    bound_problem: str = ""
    forwards: tuple[str, ...] = ()

    @property
    def native_width(self) -> int | None:
        """The width both bound probes name (``None`` when either is missing or they differ)."""
        if self.bound_before is None or self.bound_before != self.bound_after:
            return None
        return self.bound_before

    def unserved(self, width: int) -> str:
        """ "" when ranks 0..width-1 each served a completion, else which did not and why."""
        if len(self.forwards) < width:
            return f"only {len(self.forwards)} of its {width} ranks were asked to serve"
        failed = [(r, why) for r, why in enumerate(self.forwards[:width]) if why]
        if not failed:
            return ""
        rank, why = failed[0]
        return f"{len(failed)} of its {width} ranks did not serve (rank {rank} {why})"


# ---- the scale call's answer -------------------------------------------------------------------


class ScaleVerdict(enum.Enum):
    #: 200 with a string ``message``: the engine runs the target width.
    SCALED = "scaled"
    #: A definite answer that it did not scale: 400 (bad value), 408 (drain timed out), 500
    #: (failed), 503 (busy: another resize holds the engine), or any other status.
    REFUSED = "refused"
    #: No answer the controller can trust (timeout, connection error, a 200 without a string
    #: ``message``): whether it scaled is left to observation, never to a resend (§4.5).
    LOST = "lost"


@dataclass(frozen=True)
class ScaleAnswer:
    verdict: ScaleVerdict
    #: The HTTP status (``None``: none arrived).
    status: int | None
    #: The engine's words, or what went wrong with the call.
    detail: str

    @property
    def refusal(self) -> str:
        """The text a refusal records (``scaleLastError``)."""
        busy = " (busy: another resize holds the engine)" if self.status == 503 else ""
        return f"HTTP {self.status}{busy}: {self.detail}"[:QUOTED]


def classify_scale(
    status: int | None, body: str | bytes = b"", *, transport_error: str = ""
) -> ScaleAnswer:
    """The verdict on the answer to :func:`scale_request`: ``status`` ``None`` when no answer
    arrived (``transport_error`` says what happened)."""
    if status is None:
        return ScaleAnswer(ScaleVerdict.LOST, None, transport_error or "no answer")
    if status == 200:
        message = jsonview.view(_json(body)).get("message")
        if isinstance(message, str):
            return ScaleAnswer(ScaleVerdict.SCALED, 200, message[:QUOTED])
        return ScaleAnswer(ScaleVerdict.LOST, 200, "HTTP 200 without a string message")
    return ScaleAnswer(ScaleVerdict.REFUSED, status, error_text(body) or "no message")


def served_model(pod: Any, default: str) -> str:
    """The model name a completion names: the first ``--served-model-name`` of the master's
    ``main`` container argv (either spelling), else ``default`` (the deployment's model)."""
    spec = jsonview.view(jsonview.view(pod).get("spec"))
    for container in jsonview.items(spec.get("containers")):
        container = jsonview.view(container)
        if container.get("name") != "main":
            continue
        argv = [
            str(t)
            for key in ("command", "args")
            for t in jsonview.items(container.get(key))
            if isinstance(t, str)
        ]
        for i, token in enumerate(argv):
            if token == "--served-model-name" and i + 1 < len(argv):
                return argv[i + 1]
            if token.startswith("--served-model-name="):
                return token.split("=", 1)[1]
    return default
