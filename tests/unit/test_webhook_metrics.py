"""The webhook server's review metrics over its real listeners: reviews sent over HTTPS to the
library's own webhooks, the series read from ``/metrics`` on the plain-HTTP probe port and from
the registry (docs/operations.md, "Metrics")."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import Any

import aiohttp
from prometheus_client.parser import text_string_to_metric_families
from test_webhook_server import POD_KIND, deployment, instance_type, review
from test_webhook_tls import write_pair

from gpustack_render.schema.lookups import StaticLookups
from gpustack_webhook.lookups import StaticSources
from gpustack_webhook.metrics import VERDICTS
from gpustack_webhook.server import (
    PATH_MODELDEPLOYMENT_MUTATE,
    PATH_MODELDEPLOYMENT_VALIDATE,
    PATH_POD_INJECT,
    WebhookServer,
)
from gpustack_webhook.tls import CertificateFiles, ReloadingCertificate

REVIEWS = "gpustack_webhook_reviews_total"
LATENCY = "gpustack_webhook_review_duration_seconds"


def _samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """(sample name, sorted labels) -> value, parsed from the exposition text."""
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def _key(name: str, **labels: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    return name, tuple(sorted(labels.items()))


async def test_review_latency_and_totals_by_webhook_and_verdict_over_https(
    tmp_path: Path,
) -> None:
    cert_path, key_path = write_pair(tmp_path, "webhook")
    server = WebhookServer(
        StaticSources(objects=StaticLookups(instance_types={"a10g": instance_type()}))
    )
    # Every webhook's counters exist at 0 before the first review.
    for hook in server.webhooks:
        for verdict in VERDICTS:
            labels = {"webhook": hook.name, "verdict": verdict}
            assert server.metrics.registry.get_sample_value(REVIEWS, labels) == 0.0
    certificate = ReloadingCertificate(CertificateFiles(cert_path, key_path))
    await server.start(host="127.0.0.1", port=0, ssl_context=certificate.context, probe_port=0)
    insecure = ssl.create_default_context()
    insecure.check_hostname = False
    insecure.verify_mode = ssl.CERT_NONE
    https = f"https://127.0.0.1:{server.port}"
    refused = deployment(replicas=-1)
    sent: list[tuple[str, Any]] = [
        (PATH_MODELDEPLOYMENT_VALIDATE, review(deployment())),
        (PATH_MODELDEPLOYMENT_VALIDATE, review(deployment())),
        (PATH_MODELDEPLOYMENT_VALIDATE, review(refused)),
        (
            PATH_POD_INJECT,
            review({"apiVersion": "v1", "kind": "Pod", "metadata": {}}, kind=POD_KIND),
        ),
        (PATH_MODELDEPLOYMENT_MUTATE, {"apiVersion": "admission.k8s.io/v1"}),
    ]
    try:
        async with aiohttp.ClientSession() as session:
            answers: list[tuple[int, dict[str, Any]]] = []
            for path, body in sent:
                async with session.post(f"{https}{path}", json=body, ssl=insecure) as resp:
                    answers.append((resp.status, await resp.json() if resp.status == 200 else {}))
            async with session.get(f"http://127.0.0.1:{server.probe_port}/metrics") as resp:
                assert resp.status == 200
                text = await resp.text()
    finally:
        await server.stop()
    assert [status for status, _ in answers] == [200, 200, 200, 200, 400]
    assert [a["response"]["allowed"] for _, a in answers[:4]] == [True, True, False, True]
    assert answers[2][1]["response"]["status"]["reason"] == "Invalid"
    samples = _samples(text)
    expected = {
        ("modeldeployment-validate", "allowed"): 2,
        ("modeldeployment-validate", "invalid"): 1,
        ("pod-inject", "allowed"): 1,
        ("modeldeployment-mutate", "malformed"): 1,
    }
    for hook in server.webhooks:
        for verdict in VERDICTS:
            count = expected.get((hook.name, verdict), 0)
            labels = {"webhook": hook.name, "verdict": verdict}
            assert samples[_key(REVIEWS, **labels)] == count, labels
            # The exposition and the registry agree.
            assert server.metrics.registry.get_sample_value(REVIEWS, labels) == count
            if count:
                assert samples[_key(f"{LATENCY}_count", **labels)] == count
                assert samples[_key(f"{LATENCY}_bucket", le="+Inf", **labels)] == count
                assert 0 < samples[_key(f"{LATENCY}_sum", **labels)] < 5 * count
            else:
                assert _key(f"{LATENCY}_count", **labels) not in samples
