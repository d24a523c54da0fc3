"""Self-managed certificates without a server: the reuse / issue / rotate decision, the Secret's
data, the caBundle patch, and the pass that settles them against a store that behaves like the
API server (optimistic concurrency on resourceVersion)."""

from __future__ import annotations

import base64
import copy
import datetime
import os
import ssl
from collections.abc import Mapping
from typing import Any

import pytest
from cryptography import x509

from gpustack_webhook import certificates as certs
from gpustack_webhook import rotation
from gpustack_webhook.__main__ import duration, parse_args
from gpustack_webhook.certificates import CA_CERT, CA_KEY, TLS_CERT, TLS_KEY, Action
from gpustack_webhook.metrics import RELOAD_FAILED, RELOAD_LOADED, RELOAD_RESULTS, Metrics
from gpustack_webhook.tls import load_pem

NOW = datetime.datetime(2026, 12, 1, tzinfo=datetime.UTC)
HOSTS = certs.service_hosts("gpustack-webhook", "gpustack-system")
POLICY = certs.Policy(hosts=HOSTS)
DAY = datetime.timedelta(days=1)


def fresh(now: datetime.datetime = NOW, policy: certs.Policy = POLICY) -> dict[str, bytes]:
    return certs.issue(None, Action.ISSUE_CA, policy=policy, now=now)


def test_a_fresh_secret_serves_every_service_name_from_its_ca() -> None:
    data = fresh()
    assert certs.decide(data, policy=POLICY, now=NOW).action is Action.REUSE
    (ca,) = x509.load_pem_x509_certificates(data[CA_CERT])
    cert = x509.load_pem_x509_certificate(data[TLS_CERT])
    cert.verify_directly_issued_by(ca)
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(san.get_values_for_type(x509.DNSName)) == set(HOSTS)
    assert cert.not_valid_after_utc - NOW == datetime.timedelta(days=365)
    assert ca.not_valid_after_utc - NOW == datetime.timedelta(days=3650)
    load_pem(data[TLS_CERT], data[TLS_KEY])  # the pair loads into an SSL context


@pytest.mark.parametrize("memfd", [True, False], ids=["memfd", "temporary-file"])
def test_a_pair_loads_from_memory_or_a_private_file_and_a_mismatch_does_not(
    memfd: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where ``os.memfd_create`` is missing (not Linux) the pair goes through a private
    temporary file; either way a key that does not match its certificate is refused."""
    if not memfd:
        monkeypatch.delattr(os, "memfd_create", raising=False)
    data, other = fresh(), fresh()
    context = load_pem(data[TLS_CERT], data[TLS_KEY])
    assert isinstance(context, ssl.SSLContext)
    with pytest.raises(ssl.SSLError):
        load_pem(data[TLS_CERT], other[TLS_KEY])


def test_ip_hosts_become_ip_addresses() -> None:
    policy = certs.Policy(hosts=(*HOSTS, "127.0.0.1"))
    data = fresh(policy=policy)
    cert = x509.load_pem_x509_certificate(data[TLS_CERT])
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]


def _without(data: Mapping[str, bytes], key: str) -> dict[str, bytes]:
    return {k: v for k, v in data.items() if k != key}


@pytest.mark.parametrize(
    ("change", "action", "reason"),
    [
        pytest.param(lambda d: None, Action.ISSUE_CA, "does not exist", id="no-secret"),
        pytest.param(lambda d: {}, Action.ISSUE_CA, "no ca.crt", id="empty"),
        pytest.param(lambda d: _without(d, CA_KEY), Action.ISSUE_CA, "no ca.key", id="no-ca-key"),
        pytest.param(
            lambda d: {**d, CA_CERT: b"junk"}, Action.ISSUE_CA, "does not load", id="junk-ca"
        ),
        pytest.param(
            lambda d: {**d, CA_CERT: d[TLS_CERT]}, Action.ISSUE_CA, "not a CA", id="leaf-as-ca"
        ),
        pytest.param(
            lambda d: {**d, CA_KEY: fresh()[CA_KEY]}, Action.ISSUE_CA, "does not match",
            id="other-ca-key",
        ),
        pytest.param(
            lambda d: _without(d, TLS_CERT), Action.ISSUE_SERVING, "no readable", id="no-cert"
        ),
        pytest.param(
            lambda d: {**d, TLS_KEY: b"junk"}, Action.ISSUE_SERVING, "no readable",
            id="junk-key",
        ),
        pytest.param(
            lambda d: {**d, TLS_KEY: fresh()[TLS_KEY]}, Action.ISSUE_SERVING, "does not match",
            id="other-key",
        ),
        pytest.param(
            lambda d: {**d, TLS_CERT: (o := fresh())[TLS_CERT], TLS_KEY: o[TLS_KEY]},
            Action.ISSUE_SERVING, "not signed by the current CA", id="other-ca",
        ),
    ],
)  # fmt: skip
def test_what_is_wrong_decides_what_is_issued(change: Any, action: Action, reason: str) -> None:
    decision = certs.decide(change(fresh()), policy=POLICY, now=NOW)
    assert decision.action is action
    assert reason in decision.reason


def test_a_new_service_name_reissues_the_serving_certificate_only() -> None:
    policy = certs.Policy(hosts=(*HOSTS, "webhook.example"))
    decision = certs.decide(fresh(), policy=policy, now=NOW)
    assert decision == certs.Decision(Action.ISSUE_SERVING, "tls.crt does not name webhook.example")
    # Names the certificate has beyond those wanted are no reason (replicas of an older
    # configuration still use them during a rollout).
    assert certs.decide(fresh(policy=policy), policy=POLICY, now=NOW).action is Action.REUSE


def test_renewal_window_is_a_third_of_the_lifetime_or_renew_before() -> None:
    assert POLICY.renewal_window(365 * DAY) == 90 * DAY
    assert POLICY.renewal_window(3650 * DAY) == 90 * DAY
    assert POLICY.renewal_window(datetime.timedelta(seconds=30)) == datetime.timedelta(seconds=10)


def test_the_serving_certificate_is_renewed_inside_its_window_with_the_same_ca() -> None:
    data = fresh()
    expiry = NOW + 365 * DAY
    assert certs.decide(data, policy=POLICY, now=expiry - 91 * DAY).action is Action.REUSE
    later = expiry - 89 * DAY
    decision = certs.decide(data, policy=POLICY, now=later)
    assert decision.action is Action.ISSUE_SERVING
    renewed = certs.issue(data, decision.action, policy=POLICY, now=later)
    assert renewed[CA_CERT] == data[CA_CERT] and renewed[CA_KEY] == data[CA_KEY]
    assert renewed[TLS_CERT] != data[TLS_CERT]
    assert certs.decide(renewed, policy=POLICY, now=later).action is Action.REUSE


def test_a_ca_rotation_keeps_the_previous_ca_in_the_bundle_while_it_is_valid() -> None:
    data = fresh()
    later = NOW + 3650 * DAY - 89 * DAY
    decision = certs.decide(data, policy=POLICY, now=later)
    assert decision.action is Action.ISSUE_CA
    rotated = certs.issue(data, decision.action, policy=POLICY, now=later)
    new_ca, old_ca = x509.load_pem_x509_certificates(rotated[CA_CERT])
    assert old_ca == x509.load_pem_x509_certificates(data[CA_CERT])[0]
    x509.load_pem_x509_certificate(rotated[TLS_CERT]).verify_directly_issued_by(new_ca)
    # The next rotation drops the oldest: current + previous, never more.
    again = certs.issue(rotated, Action.ISSUE_CA, policy=POLICY, now=later + DAY)
    assert len(x509.load_pem_x509_certificates(again[CA_CERT])) == 2
    # An expired previous CA is not carried over.
    expired = certs.issue(data, Action.ISSUE_CA, policy=POLICY, now=NOW + 3651 * DAY)
    assert len(x509.load_pem_x509_certificates(expired[CA_CERT])) == 1


def test_a_serving_certificate_never_outlives_its_ca() -> None:
    short_ca = certs.Policy(hosts=HOSTS, ca_lifetime=30 * DAY)
    data = fresh(policy=short_ca)
    cert = x509.load_pem_x509_certificate(data[TLS_CERT])
    (ca,) = x509.load_pem_x509_certificates(data[CA_CERT])
    assert cert.not_valid_after_utc == ca.not_valid_after_utc


def test_secret_data_round_trips_and_bad_data_is_none() -> None:
    data = fresh()
    assert certs.decode_secret({"data": certs.secret_data(data)}) == data
    assert certs.decode_secret({}) == {}
    assert certs.decode_secret({"data": {"tls.crt": "%%%"}}) is None
    assert certs.decode_secret({"data": {"tls.crt": 3}}) is None
    assert certs.decode_secret({"data": ["x"]}) is None


TARGET = certs.Target("gpustack-system", "gpustack-webhook", (*HOSTS, "127.0.0.1"))


def _hook(name: str, client: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "clientConfig": client}


def test_ca_bundle_patch_touches_only_the_webhooks_that_call_this_server() -> None:
    ours = {"service": {"namespace": "gpustack-system", "name": "gpustack-webhook", "path": "/m"}}
    configuration: dict[str, Any] = {
        "metadata": {"name": "gpustack-worker-mutation", "resourceVersion": "7"},
        "webhooks": [
            _hook("ours.by.service", ours),
            _hook("ours.by.url", {"url": "https://127.0.0.1:9443/v"}),
            _hook("other.service", {"service": {"namespace": "x", "name": "gpustack-webhook"}}),
            _hook("other.url", {"url": "https://accelerator.example/mutate"}),
            _hook("bad.url", {"url": "https://[::1/"}),
            _hook("no.client", {}),
        ],
    }
    bundle = b"-----CA-----\n"
    patch = certs.ca_bundle_patch(configuration, bundle, target=TARGET)
    wanted = base64.b64encode(bundle).decode()
    assert patch == {
        "metadata": {"resourceVersion": "7"},
        "webhooks": [
            {"name": "ours.by.service", "clientConfig": {"caBundle": wanted}},
            {"name": "ours.by.url", "clientConfig": {"caBundle": wanted}},
        ],
    }
    done = copy.deepcopy(configuration)
    for hook in done["webhooks"][:2]:
        hook["clientConfig"]["caBundle"] = wanted
    assert certs.ca_bundle_patch(done, bundle, target=TARGET) is None


def test_durations() -> None:
    assert duration("90d") == 90 * DAY
    assert duration("8760h") == 365 * DAY
    assert duration("15s") == datetime.timedelta(seconds=15)
    assert duration("2.5") == datetime.timedelta(seconds=2.5)
    for bad in ("", "0s", "-1h", "tenh", "inf"):
        with pytest.raises(Exception, match="duration"):
            duration(bad)


def test_certificate_source_is_one_of_two(capsys: pytest.CaptureFixture[str]) -> None:
    args = parse_args(["--tls-secret=gpustack-webhook-tls"])
    assert args.ca_lifetime == 3650 * DAY and args.renew_before == 90 * DAY
    for argv in ([], ["--cert-file=c"], ["--tls-secret=s", "--cert-file=c", "--key-file=k"]):
        with pytest.raises(SystemExit) as info:
            parse_args(argv)
        assert info.value.code == 2
    assert "--tls-secret" in capsys.readouterr().err


# ---- the pass, against a store with the API server's concurrency rules ----------------------


class Store:
    """Secrets and webhook configurations with resourceVersions; a write based on an old
    version is a conflict, as the API server answers."""

    def __init__(self) -> None:
        self.secrets: dict[tuple[str, str], dict[str, Any]] = {}
        self.configurations: dict[tuple[str, str], dict[str, Any]] = {}
        self.version = 0
        self.writes: list[str] = []
        #: Called before a Secret write lands (a rival replica's write in between).
        self.before_write: Any = None
        #: Called once a Secret read has answered (a rival's pass before the reader goes on).
        self.after_read: Any = None

    def _stamp(self, obj: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        obj = copy.deepcopy(obj)
        obj.setdefault("metadata", {})["resourceVersion"] = str(self.version)
        return obj

    async def get_secret(self, namespace: str, name: str) -> dict[str, Any] | None:
        found = self.secrets.get((namespace, name))
        answer = copy.deepcopy(found) if found else None
        if self.after_read:
            hook, self.after_read = self.after_read, None
            await hook()
        return answer

    async def create_secret(self, namespace: str, body: Mapping[str, Any]) -> None:
        if self.before_write:
            hook, self.before_write = self.before_write, None
            await hook()
        key = (namespace, body["metadata"]["name"])
        if key in self.secrets:
            raise rotation.ConflictError("already exists")
        self.writes.append("create")
        self.secrets[key] = self._stamp(dict(body))

    async def update_secret(self, namespace: str, name: str, body: Mapping[str, Any]) -> None:
        if self.before_write:
            hook, self.before_write = self.before_write, None
            await hook()
        stored = self.secrets[(namespace, name)]
        if body["metadata"]["resourceVersion"] != stored["metadata"]["resourceVersion"]:
            raise rotation.ConflictError("changed")
        self.writes.append("update")
        self.secrets[(namespace, name)] = self._stamp(dict(body))

    async def get_webhook_configuration(self, kind: str, name: str) -> dict[str, Any] | None:
        found = self.configurations.get((kind, name))
        return copy.deepcopy(found) if found else None

    async def patch_webhook_configuration(
        self, kind: str, name: str, patch: Mapping[str, Any]
    ) -> None:
        stored = self.configurations[(kind, name)]
        if patch["metadata"]["resourceVersion"] != stored["metadata"]["resourceVersion"]:
            raise rotation.ConflictError("changed")
        updated = copy.deepcopy(stored)
        by_name = {h["name"]: h for h in updated["webhooks"]}
        for change in patch["webhooks"]:
            by_name[change["name"]]["clientConfig"].update(change["clientConfig"])
        self.writes.append(f"patch {name}")
        self.configurations[(kind, name)] = self._stamp(updated)


SETUP = rotation.Setup(
    namespace="gpustack-system",
    secret_name="gpustack-webhook-tls",
    policy=POLICY,
    target=TARGET,
    configurations=((rotation.MUTATING, "m"), (rotation.VALIDATING, "v")),
)


def _store_with_configurations() -> Store:
    store = Store()
    service = {"namespace": "gpustack-system", "name": "gpustack-webhook", "path": "/x"}
    for kind, name in SETUP.configurations:
        store.configurations[(kind, name)] = store._stamp(
            {
                "metadata": {"name": name},
                "webhooks": [_hook(f"{name}.hook", {"service": dict(service)})],
            }
        )
    return store


def _bundle(store: Store, kind: str, name: str) -> bytes:
    (hook,) = store.configurations[(kind, name)]["webhooks"]
    return base64.b64decode(hook["clientConfig"]["caBundle"])


def _secret(store: Store) -> dict[str, bytes]:
    data = certs.decode_secret(store.secrets[("gpustack-system", "gpustack-webhook-tls")])
    assert data is not None
    return data


async def test_first_pass_creates_the_secret_writes_the_bundle_and_serves() -> None:
    store = _store_with_configurations()
    managed = rotation.SelfManagedCertificates(store, SETUP, clock=lambda: NOW)
    context = await managed.start()
    assert isinstance(context, ssl.SSLContext)
    data = _secret(store)
    assert store.writes == ["create", "patch m", "patch v"]
    assert _bundle(store, rotation.MUTATING, "m") == data[CA_CERT]
    assert managed.last_action is Action.ISSUE_CA
    # The next pass changes nothing.
    await managed.reconcile()
    assert store.writes == ["create", "patch m", "patch v"]
    assert managed.last_action.value == "reuse"
    assert managed.certificate is not None and managed.certificate.generation == 1


async def test_a_restart_reuses_the_stored_certificate() -> None:
    store = _store_with_configurations()
    await rotation.SelfManagedCertificates(store, SETUP, clock=lambda: NOW).start()
    before = copy.deepcopy(store.secrets)
    again = rotation.SelfManagedCertificates(store, SETUP, clock=lambda: NOW + DAY)
    await again.start()
    assert store.secrets == before
    assert store.writes == ["create", "patch m", "patch v"]


async def test_the_loser_of_a_race_uses_the_winners_certificate() -> None:
    store = _store_with_configurations()
    winner = rotation.SelfManagedCertificates(store, SETUP, clock=lambda: NOW)
    loser = rotation.SelfManagedCertificates(store, SETUP, clock=lambda: NOW)
    store.before_write = winner.reconcile  # the winner writes while the loser is about to
    await loser.start()
    assert store.writes.count("create") == 1
    data = _secret(store)
    for managed in (winner, loser):
        assert managed.certificate is not None
        assert managed.certificate._pair == (data[TLS_CERT], data[TLS_KEY])


async def test_rotation_replaces_the_served_certificate_and_keeps_the_bundle() -> None:
    store = _store_with_configurations()
    clock = [NOW]
    metrics = Metrics()
    managed = rotation.SelfManagedCertificates(
        store, SETUP, clock=lambda: clock[0], metrics=metrics
    )
    await managed.start()
    first = _secret(store)
    assert _reloads(metrics) == {RELOAD_LOADED: 0.0, RELOAD_FAILED: 0.0}  # the first is no reload
    clock[0] = NOW + 300 * DAY
    await managed.reconcile()
    second = _secret(store)
    assert managed.last_action is Action.ISSUE_SERVING
    assert second[TLS_CERT] != first[TLS_CERT] and second[CA_CERT] == first[CA_CERT]
    assert managed.certificate is not None and managed.certificate.generation == 2
    assert managed.certificate._pair == (second[TLS_CERT], second[TLS_KEY])
    assert store.writes == ["create", "patch m", "patch v", "update"]  # the bundle stands
    assert _reloads(metrics) == {RELOAD_LOADED: 1.0, RELOAD_FAILED: 0.0}
    # A pair that does not load is refused and counted; the certificate in service stays.
    with pytest.raises(ssl.SSLError):
        managed.certificate.install(second[TLS_CERT], first[TLS_KEY])
    assert managed.certificate._pair == (second[TLS_CERT], second[TLS_KEY])
    assert managed.certificate.generation == 2
    assert _reloads(metrics) == {RELOAD_LOADED: 1.0, RELOAD_FAILED: 1.0}


def _reloads(metrics: Metrics) -> dict[str, float]:
    return {
        result: metrics.registry.get_sample_value(
            "gpustack_webhook_certificate_reloads_total", {"result": result}
        )
        or 0.0
        for result in RELOAD_RESULTS
    }


async def test_a_broken_secret_is_replaced_and_a_missing_configuration_is_waited_for() -> None:
    store = Store()
    store.secrets[("gpustack-system", "gpustack-webhook-tls")] = store._stamp(
        {"metadata": {"name": "gpustack-webhook-tls"}, "type": "Opaque", "data": {"x": "%"}}
    )
    managed = rotation.SelfManagedCertificates(store, SETUP, clock=lambda: NOW)
    await managed.start()
    secret = store.secrets[("gpustack-system", "gpustack-webhook-tls")]
    assert secret["type"] == "Opaque"  # immutable, kept
    assert set(secret["data"]) == {TLS_CERT, TLS_KEY, CA_CERT, CA_KEY}
    assert store.writes == ["update"]
    # The configurations appear later: the next pass fills them.
    store.configurations = _store_with_configurations().configurations
    await managed.reconcile()
    assert _bundle(store, rotation.VALIDATING, "v") == _secret(store)[CA_CERT]


async def test_a_replica_that_read_the_secret_before_a_ca_rotation_keeps_the_new_bundle() -> None:
    # Two replicas share the Secret. One rotates the CA (its clock is past the CA's window)
    # between the other's Secret read and its look at the configurations: the stale replica
    # must not write the bundle it read back over the newer one (the API server would then
    # distrust the rotating replica's new certificate), and serves the new certificate.
    store = _store_with_configurations()
    late = [NOW]
    rotating = rotation.SelfManagedCertificates(store, SETUP, clock=lambda: late[0])
    stale = rotation.SelfManagedCertificates(store, SETUP, clock=lambda: NOW)
    await rotating.start()
    await stale.start()
    old = _secret(store)
    late[0] = NOW + 3600 * DAY  # inside the CA's 90-day renewal window
    store.after_read = rotating.reconcile
    writes = len(store.writes)
    await stale.reconcile()
    assert rotating.last_action is Action.ISSUE_CA
    new = _secret(store)
    assert new[CA_CERT] != old[CA_CERT] and new[CA_CERT].endswith(old[CA_CERT])
    for kind, name in SETUP.configurations:
        assert _bundle(store, kind, name) == new[CA_CERT]
    # The rotation's writes only: the Secret, then each configuration once.
    assert store.writes[writes:] == ["update", "patch m", "patch v"]
    assert stale.certificate is not None
    assert stale.certificate._pair == (new[TLS_CERT], new[TLS_KEY])
