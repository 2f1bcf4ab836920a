"""The Runpod API client against the fake Runpod v2 server (tests/fixtures/runpod.py): every call,
the retry policies and every injected fault."""

from __future__ import annotations

import logging
import time

import pytest
import requests

from overbrainer.config.model import Runpod
from overbrainer.config.secrets import Secret
from overbrainer.errors import ConfigError, PersonMustAct
from overbrainer.runpod import errors as E
from overbrainer.runpod.api import RunpodClient
from overbrainer.runpod.catalog import Wanted, for_listing, pick
from overbrainer.runpod.transport import USER_AGENT, Timeouts
from tests.fixtures.runpod import Fault, pod_action
from tests.fixtures.runpod_catalog import Gpu
from tests.fixtures.timescale import scale

SCALE = 0.001
GPU = "NVIDIA GeForce RTX 4090"
FAKE_ONLY = True  # wire tests of the API client: their pods belong to no run; the fake kills them at teardown


def body(name: str = "overbrainer-r1-1", gpu: str = GPU, **extra) -> dict:
    doc = {"name": name, "image": "img", "cloud": "SECURE", "gpu": {"id": gpu, "count": 1, "minCudaVersion": "13.0"},
           "ports": ["22/tcp"], "env": {"OVERBRAINER_RUN_ID": "r1"}, "args": "sleep infinity"}
    doc.update(extra)
    return doc


class Sleeps(list):
    """Records each retry wait (and sleeps it: the waits are scaled down)."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)
        time.sleep(seconds)


@pytest.fixture
def sleeps(monkeypatch):
    scale(monkeypatch, SCALE)
    return Sleeps()


@pytest.fixture
def client(fake_runpod, sleeps):
    c = RunpodClient(fake_runpod.url, fake_runpod.account_key, sleep=sleeps)
    yield c
    c.close()


def test_pod_round_trip(fake_runpod, client):
    since = time.monotonic()
    pod = client.create_pod(body())
    assert pod.status == "PROVISIONING" and pod.cost_per_hour == 0.69 and pod.gpu_id == GPU
    assert pod.run_marker == "r1" and pod.name == "overbrainer-r1-1" and pod.data_center_id
    assert client.get_pod(pod.id).id == pod.id
    assert [p.id for p in client.list_pods()] == [pod.id]
    assert client.delete_pod(pod.id) is True
    with pytest.raises(E.NotFound):
        client.get_pod(pod.id)
    assert client.delete_pod(pod.id) is False  # Runpod's 404 on delete: already gone
    calls = fake_runpod.calls_to()
    assert {c.agent for c in calls} == {USER_AGENT} and {c.key for c in calls} == {"account"}
    assert fake_runpod.calls_per_minute(since, since + 60) == len(calls) == 6
    assert fake_runpod.billing() == []


def test_list_follows_pages(fake_runpod, client):
    fake_runpod.page_size = 2
    ids = {client.create_pod(body(f"overbrainer-r1-{i}")).id for i in range(5)}
    assert {p.id for p in client.list_pods()} == ids
    lists = fake_runpod.calls_to("GET", "/pods")
    assert len(lists) == 3 and [c.query.get("cursor") for c in lists] == [None, "2", "4"]
    assert all(c.query.get("includeClusterPods") == "false" and "limit" not in c.query for c in lists)


def test_the_list_is_one_page_and_leaves_terminated_pods_out(fake_runpod, client):
    kept = client.create_pod(body()).id
    gone = client.create_pod(body("overbrainer-r1-2")).id
    fake_runpod.pods.terminated_for = 30  # a deleted pod is still shown as TERMINATED for a while
    fake_runpod.routes._delete(gone)
    assert client.get_pod(gone).status == "TERMINATED" and client.get_pod(gone).terminated
    listed = f'{{"pods": [{{"id": "{kept}", "status": "RUNNING"}}, {{"id": "{gone}", "status": "TERMINATED"}}]}}'
    fake_runpod.inject(Fault(200, "GET", "/pods", raw=listed.encode()))
    assert [p.id for p in client.list_pods()] == [kept]
    [call] = fake_runpod.calls_to("GET", "/pods")
    assert call.query == {"includeClusterPods": "false"}


@pytest.mark.parametrize("fault", ["repeat", "endless"])
def test_list_that_never_ends_is_an_error(fake_runpod, client, fault):
    fake_runpod.page_size = 1
    client.create_pod(body())
    fake_runpod.page_fault = fault
    with pytest.raises(E.InvalidAnswer, match="cannot be read"):
        client.list_pods()
    assert len(fake_runpod.calls_to("GET", "/pods")) == (2 if fault == "repeat" else 100)


def test_list_500_is_retried_with_backoff(fake_runpod, client, sleeps):
    fake_runpod.fail_list(times=2, status=500)
    assert client.list_pods() == []
    assert len(fake_runpod.calls_to("GET", "/pods")) == 3
    assert len(sleeps) == 2
    assert 0.5 * SCALE <= sleeps[0] <= 1.0 * SCALE and 1.0 * SCALE <= sleeps[1] <= 2.0 * SCALE


def test_transport_failures_are_retried(fake_runpod, client, sleeps):
    fake_runpod.inject(Fault(method="GET", path="/pods", times=2, drop=True))
    assert client.list_pods() == [] and len(sleeps) == 2
    fake_runpod.inject(Fault(method="GET", path="/pods", times=6, drop=True))
    with pytest.raises(E.Unavailable, match="could not be reached") as info:
        client.list_pods()
    assert info.value.status is None and len(fake_runpod.calls_to("GET", "/pods")) == 3 + 6


def test_retries_give_up_after_six_attempts(fake_runpod, client, sleeps):
    fake_runpod.fail(503, times=10, method="GET", path="/catalog/gpus", html=True)
    with pytest.raises(E.Unavailable) as info:
        client.gpu_types()
    assert info.value.status == 503 and "503" in str(info.value)
    assert len(fake_runpod.calls_to("GET", "/catalog/gpus")) == 6 and len(sleeps) == 5


def test_retry_after_is_honoured_and_capped(fake_runpod, client, sleeps):
    fake_runpod.rate_limit(times=1, retry_after=7, method="GET")
    fake_runpod.rate_limit(times=1, retry_after=5000, method="GET")
    assert client.volumes()[0].id == "vol1abc"
    assert sleeps == [pytest.approx(7 * SCALE), pytest.approx(600 * SCALE)]


def test_delete_and_action_are_retried(fake_runpod, client):
    pod = client.create_pod(body())
    fake_runpod.fail(502, times=1, method="DELETE")
    fake_runpod.fail(408, times=1, method="DELETE")
    assert client.delete_pod(pod.id) is True
    assert len(fake_runpod.calls_to("DELETE")) == 3


def test_create_is_retried_on_429_only(fake_runpod, client, sleeps):
    fake_runpod.rate_limit(times=1, retry_after=2, method="POST", path="/pods")
    pod = client.create_pod(body())
    assert sleeps == [pytest.approx(2 * SCALE)] and len(fake_runpod.calls_to("POST", "/pods")) == 2
    assert [p["id"] for p in fake_runpod.listed()] == [pod.id]


@pytest.mark.parametrize("kind", ["500", "503", "html", "drop", "timeout"])
def test_ambiguous_create(fake_runpod, sleeps, kind):
    fake_runpod.ambiguous_create(kind, hold=2.0)
    client = RunpodClient(fake_runpod.url, fake_runpod.account_key, sleep=sleeps,
                          timeouts=Timeouts(connect=5, read=5, create=0.3))
    with pytest.raises(E.Ambiguous, match="may exist"):
        client.create_pod(body())
    # Sent once, never resent; the pod exists and bills: only a look by name finds it.
    assert len(fake_runpod.calls_to("POST", "/pods")) == 1 and sleeps == []
    [pod] = client.list_pods()
    assert pod.name == "overbrainer-r1-1" and pod.run_marker == "r1"
    assert client.delete_pod(pod.id)


def test_any_400_on_a_create_is_read_as_no_capacity_with_runpods_words(fake_runpod, client):
    from tests.fixtures.runpod_server import CAPACITY

    fake_runpod.no_capacity.add(GPU)
    with pytest.raises(E.NoCapacity) as info:
        client.create_pod(body())
    assert str(info.value) == f"Runpod answered 400 to the create request: {CAPACITY}"
    assert info.value.status == 400 and info.value.detail == CAPACITY
    fake_runpod.capacity_detail = "Sold out \x1b[31mright now"  # no machine code: any wording
    with pytest.raises(E.NoCapacity) as info:  # out of stock in the asked data center
        client.create_pod(body(gpu="NVIDIA RTX A6000", dataCenterIds=["US-KS-2"]))
    assert info.value.detail == "Sold out right now"
    with pytest.raises(E.NoCapacity) as info:  # a rule broken: a 400 too, Runpod's words tell
        client.create_pod(body(gpu="NVIDIA RTX A6000", cpu={"id": "cpu3c", "vcpuCount": 2}))
    assert info.value.status == 400 and info.value.detail == "exactly one of gpu and cpu must be set"
    assert len(fake_runpod.calls_to("POST", "/pods")) == 3 and fake_runpod.listed() == []


@pytest.mark.parametrize("status,error", [(401, E.KeyRefused), (402, E.NoCredits), (403, E.Forbidden),
                                          (422, E.Rejected)])
@pytest.mark.parametrize("call", ["create", "get"])
def test_fixed_messages(fake_runpod, client, status, error, call):
    fake_runpod.fail(status, detail="Runpod's own words")
    with pytest.raises(error) as info:
        client.create_pod(body()) if call == "create" else client.get_pod("abc123")
    assert str(info.value) == E.FIXED[status] and info.value.status == status
    assert len(fake_runpod.calls_to()) == 1  # never retried


def test_real_401_422_402(fake_runpod, sleeps):
    with RunpodClient(fake_runpod.url, "rpa_WRONGKEY1234567890", sleep=sleeps) as wrong:
        with pytest.raises(E.KeyRefused, match="OVERBRAINER_RUNPOD__API_KEY"):
            wrong.list_pods()
    with RunpodClient(fake_runpod.url, fake_runpod.account_key, sleep=sleeps) as client:
        with pytest.raises(E.Rejected) as info:
            client.create_pod(body(gpuTypeIds=[GPU]))  # a v1 field: the strict schema refuses it
        assert info.value.status == 422
        fake_runpod.balance = 0
        with pytest.raises(E.NoCredits):
            client.create_pod(body())


def test_runpod_404_storm_and_wrong_url(fake_runpod, client, sleeps):
    pod = client.create_pod(body())
    fake_runpod.storm_404(pod.id, 2)
    for _ in range(2):
        with pytest.raises(E.NotFound):
            client.get_pod(pod.id)
    assert client.get_pod(pod.id).id == pod.id  # it was there all along
    base = fake_runpod.url[: -len("/v2")]
    with RunpodClient(base, fake_runpod.account_key, sleep=sleeps) as lost:
        with pytest.raises(E.WrongUrl, match="not Runpod's"):
            lost.get_pod(pod.id)
        with pytest.raises(E.WrongUrl):
            lost.delete_pod(pod.id)  # an HTML 404 is never "already deleted"
    assert fake_runpod.pod(pod.id) is not None


def test_a_used_up_quota_waits_for_its_reset_before_a_429(fake_runpod, client, sleeps):
    fake_runpod.quota_left, fake_runpod.quota_reset = 0, 500  # "minute";r=0;t=500
    client.list_pods()  # answered, with the quota used up
    assert sleeps == []
    fake_runpod.quota_left = None
    client.list_pods()  # waits for the window's reset first
    [waited] = sleeps
    assert 500 * SCALE / 2 < waited <= 500 * SCALE  # the window's reset, less the time since its answer
    assert len(fake_runpod.calls_to("GET", "/pods")) == 2 and all(c.status == 200 for c in fake_runpod.calls)


def test_redirects_are_not_followed(fake_runpod, client):
    fake_runpod.inject(Fault(302, "GET", "/pods", headers={"Location": "https://evil.example/v2/pods"}, raw=b""))
    with pytest.raises(E.WrongUrl, match="redirect"):
        client.list_pods()
    assert len(fake_runpod.calls_to()) == 1


def test_bodies_are_capped(fake_runpod, client):
    fake_runpod.inject(Fault(200, "GET", "/network-volumes", raw=b'{"networkVolumes": [' + b" " * (9 << 20) + b"]}"))
    with pytest.raises(E.InvalidAnswer, match="larger than 8 MiB"):
        client.volumes()


def test_key_is_redacted(fake_runpod, client, caplog):
    key = fake_runpod.account_key
    fake_runpod.fail(500, times=6, method="GET", detail=f"upstream saw Bearer {key} \x1b[31mred")
    with caplog.at_level(logging.WARNING):
        with pytest.raises(E.Unavailable) as info:
            client.list_pods()
    assert key not in str(info.value) and "***" in str(info.value) and "\x1b" not in str(info.value)
    assert key not in caplog.text and "retrying" in caplog.text


def test_base_url_must_be_https_or_loopback(fake_runpod):
    for url in ("http://api.runpod.io/v2", "ftp://127.0.0.1/v2", "api.runpod.io/v2"):
        with pytest.raises(ConfigError, match="OVERBRAINER_RUNPOD__BASE_URL"):
            RunpodClient(url, "k" * 20)
    for url in ("https://api.runpod.io/v2", "http://localhost:9/v2", "http://[::1]:9/v2"):
        RunpodClient(url, "k" * 20).close()


def test_from_config(fake_runpod):
    class Cfg:
        runpod = Runpod()

    with pytest.raises(PersonMustAct, match="no Runpod API key: set OVERBRAINER_RUNPOD__API_KEY"):
        RunpodClient.from_config(Cfg())
    Cfg.runpod = Runpod(api_key=Secret(fake_runpod.account_key), base_url=fake_runpod.url)
    with RunpodClient.from_config(Cfg()) as client:
        assert client.base_url == fake_runpod.url and client.list_pods() == []


def test_the_pick_ranks_what_the_client_reads_and_a_zero_price_is_not_offered(fake_runpod, client):
    """The client's GpuTypes are the pick's and `pod gpus`' (one parser, one type): a Secure type
    listed at $0 has no price, so "auto" never tries it."""
    fake_runpod.gpus["NVIDIA Zero"] = Gpu("NVIDIA Zero", 24, 0.0, stock={"US-KS-2": 9})
    types = client.gpu_types(1)
    zero = next(g for g in types if g.id == "NVIDIA Zero")
    assert zero.secure and zero.price_per_hour is None
    picked = [c.gpu_type for c in pick(Wanted(gpu_types="auto"), types)]
    assert picked == ["NVIDIA RTX A6000", GPU, "NVIDIA A100 80GB PCIe"]  # cheapest first; L40S and Zero: no price
    assert "NVIDIA Zero" not in [g.id for g in for_listing(types, max_price=10.0)]


def test_catalog_is_parsed_and_cleaned(fake_runpod, client):
    fake_runpod.gpus["NVIDIA \x1b[2JEvil"] = Gpu("NVIDIA \x1b[2JEvil", 16, 0.2, stock={"EU-SE-1": 1})
    types = {g.id: g for g in client.gpu_types(1)}
    assert "NVIDIA Evil" in types
    g = types[GPU]
    assert g.memory_gb == 24 and g.price_per_hour == 0.69 and g.max_count == 8 and g.in_stock
    assert g.stocked_in(["US-KS-2"]) and not g.stocked_in(["EU-SE-1"])
    assert types["NVIDIA L40S"].price_per_hour is None
    assert not types["NVIDIA H100 80GB HBM3"].in_stock and types["NVIDIA H100 80GB HBM3"].data_centers == ()
    assert not {g.id: g for g in client.gpu_types(4)}["NVIDIA RTX A6000"].in_stock  # stock is per GPU count
    [call] = fake_runpod.calls_to("GET", "/catalog/gpus")[:1]
    assert call.query == {"include": "AVAILABILITY", "product": "POD", "cloud": "SECURE", "count": "1",
                          "minCudaVersion": "13.0"}
    dcs = {d.id: d for d in client.data_centers()}
    assert dcs["EU-RO-1"].region == "EUROPE" and GPU in dcs["EU-RO-1"].gpu_types_in_stock
    assert client.volume("vol1abc").size_gb == 50 and client.volume("vol1abc").data_center == "EU-RO-1"
    with pytest.raises(E.NotFound):
        client.volume("nope")


def test_tolerant_pod_parsing_and_strict_id(fake_runpod, client):
    nulls = (b'{"id": "abc9", "name": null, "status": "HIBERNATING", "cost": null, "ssh": null, "env": null, '
             b'"gpu": null}')
    fake_runpod.inject(Fault(200, "GET", "/pods/abc9", raw=nulls))
    pod = client.get_pod("abc9")
    assert (pod.status, pod.cost_per_hour, pod.ssh, pod.run_marker, pod.gpu_id) == ("UNKNOWN", 0.0, None, None, None)
    fake_runpod.inject(Fault(200, "GET", "/pods", raw=b'{"pods": [{"id": "../../etc"}]}'))
    with pytest.raises(E.InvalidAnswer, match=r"pod id overbrainer cannot use \('\.\./\.\./etc'\): only letters"):
        client.list_pods()
    fake_runpod.inject(Fault(200, "GET", "/pods/pod_abc-123", raw=b'{"id": "pod_abc-123", "status": "RUNNING"}'))
    assert client.get_pod("pod_abc-123").id == "pod_abc-123"  # letters, digits, _ and - are safe
    fake_runpod.inject(Fault(201, "POST", "/pods", raw=b"<html>ok</html>", commit=True))
    with pytest.raises(E.Ambiguous):  # created, but the answer cannot be read: the pod may exist
        client.create_pod(body())
    with pytest.raises(E.InvalidAnswer):
        client.get_pod("../x")


def test_a_pod_stopped_started_or_terminated_from_outside_is_seen_so(fake_runpod, client):
    pod = client.create_pod(body())
    assert pod_action(fake_runpod, pod.id, "stop")["status"] == "EXITED"
    assert client.get_pod(pod.id).status == "EXITED" and client.get_pod(pod.id).cost_per_hour == 0.0
    with pytest.raises(requests.HTTPError, match="409"):
        pod_action(fake_runpod, pod.id, "stop")  # not valid while EXITED
    pod_action(fake_runpod, pod.id, "start")
    assert client.get_pod(pod.id).status == "STARTING"
    assert pod_action(fake_runpod, pod.id, "terminate") is None
    with pytest.raises(E.NotFound):
        client.get_pod(pod.id)


def test_secrets(fake_runpod, client):
    made = client.create_secret("overbrainer_host_key_r1", "KEYDATA-1", "host key")
    assert made.name == "overbrainer_host_key_r1" and made.description == "host key"
    client.create_secret("OVERBRAINER_host_key_r1x", "other")
    with pytest.raises(E.SecretExists):
        client.create_secret("Overbrainer_Host_Key_R1", "again")  # names clash without regard to case
    assert [s.id for s in client.secrets("overbrainer_host_key_r1")] == [made.id]
    assert len(client.secrets()) == 2
    client.patch_secret(made.id, value="KEYDATA-2")
    assert fake_runpod.secret_values["overbrainer_host_key_r1"] == "KEYDATA-2"
    assert client.delete_secret(made.id) is True and client.delete_secret(made.id) is False
    fake_runpod.fail(403, method="POST", path="/account/secrets")
    with pytest.raises(E.Forbidden) as info:
        client.create_secret("x_y", "v")
    assert str(info.value) == E.SECRETS_403


def test_an_answer_that_is_not_utf8_is_an_invalid_answer(fake_runpod, client):
    """json.loads raises UnicodeDecodeError there (a ValueError without a line and column): it
    escaped as that error, not as the InvalidAnswer the callers handle."""
    fake_runpod.inject(Fault(200, "GET", "/pods", raw=b'{"pods": ["\xff\xfe"]}'))
    with pytest.raises(E.InvalidAnswer, match=r"answer to .* could not be read \(not UTF-8\)"):
        client.list_pods()
    fake_runpod.inject(Fault(200, "GET", "/pods", raw=b'{"pods": ['))
    with pytest.raises(E.InvalidAnswer, match=r"could not be read \(line 1, column 11\)"):
        client.list_pods()
