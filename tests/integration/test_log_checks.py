"""The log checks the install tests make, on lines the servers write (no cluster needed)."""

from __future__ import annotations

import json

from .webhook_fixtures import forbidden_answers

# Two review records from a passing run: their uids hold the digits 4034, which are no answer.
REVIEWS = [
    json.dumps(
        {
            "time": "2026-12-01T21:36:59.522+00:00",
            "level": "info",
            "msg": "review",
            "webhook": "modeldeployment-mutate",
            "uid": "49c8da29-1aae-4402-93ed-d1ded0874035",
            "user": "envtest-admin",
            "durationMs": 403.299,
            "allowed": True,
            "verdict": "allowed",
        }
    ),
    json.dumps(
        {
            "msg": "review",
            "uid": "046d9888-3208-4034-8492-2d5722404e2e",
            "durationMs": 43.564,
            "allowed": True,
        }
    ),
]

STATUS_BODY = json.dumps(
    {
        "kind": "Status",
        "status": "Failure",
        "message": 'secrets "gpustack-webhook-tls" is forbidden: User cannot get',
        "reason": "Forbidden",
        "code": 403,
    }
)


def test_digits_in_uids_and_durations_are_no_refusal() -> None:
    assert forbidden_answers(REVIEWS) == []


def test_each_way_a_server_logs_a_403_is_found() -> None:
    webhook_lookup = json.dumps(
        {
            "msg": "lookup failed",
            "uid": "x",
            "error": f"the API server answered 403 {STATUS_BODY}",
        }
    )
    webhook_write = json.dumps(
        {"msg": "secret", "error": "PUT /api/v1/secrets/s: the API server answered 403"}
    )
    controller = json.dumps({"msg": "watch failed", "error": "HTTP 403 Forbidden: {}"})
    status_only = json.dumps({"msg": "apply failed", "body": STATUS_BODY})
    plain = "WARNING apply refused: 403 Forbidden"
    lines = [*REVIEWS, webhook_lookup, webhook_write, controller, status_only, plain]
    found = [webhook_lookup, webhook_write, controller, status_only, plain]
    assert forbidden_answers(lines) == found
