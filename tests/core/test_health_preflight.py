"""Preflight end to end: host checks, probes, the Delta record of verdicts and exclusions."""

from datetime import timedelta

from robodata.health.config import HealthConfig, HostPolicy, ProbePolicy
from robodata.health.findings import Level
from robodata.health.host_checks import _clock, check_host
from robodata.health.preflight import run_preflight
from robodata.health.probes import allreduce_probe, matmul_probe
from robodata.health.store import latest_by_node, split_assignable, write_results
from robodata_testing.fake_nvml import FakeGpu, FakeNvml

NO_PROBES = HealthConfig()


def test_host_checks_block_on_low_memory_and_full_disk(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       16000000 kB\nMemAvailable:     512000 kB\n")
    findings = check_host(HostPolicy(min_disk_free_gib=1e9, disk_paths=(str(tmp_path),)), meminfo=meminfo)
    by_check = {f.check: f for f in findings}
    assert by_check["host.memory"].level is Level.BLOCKING and "0.5 GiB" in by_check["host.memory"].message
    assert by_check["host.disk"].level is Level.BLOCKING
    assert by_check["host.shm"].level is Level.INFO
    missing = check_host(HostPolicy(shm_path=str(tmp_path / "nope")), meminfo=tmp_path / "absent")
    assert {f.check for f in missing if f.level is Level.BLOCKING} == {"host.memory", "host.shm"}


def test_clock_before_plausible_epoch_is_a_fault():
    (f,) = _clock(HostPolicy(), now=0.0)
    assert f.level is Level.FAULT


def test_matmul_probe_passes_on_cpu():
    (f,) = matmul_probe(ProbePolicy(matmul_size=64))
    assert f.level is Level.INFO and f.data["device"] == "cpu"


def test_gloo_allreduce_probe_two_local_processes():
    f = allreduce_probe(ProbePolicy(allreduce_timeout_s=60))
    assert f.level is Level.INFO, f
    assert f.data["exit_codes"] == [0, 0]


def test_preflight_records_healthy_and_excluded_nodes(tmp_path):
    good = run_preflight(NO_PROBES, node="node-a", nvml=FakeNvml([FakeGpu(aggregate_uncorrected=4)]), probes=False)
    bad = run_preflight(
        NO_PROBES,
        node="node-b",
        nvml=FakeNvml([FakeGpu(volatile_uncorrected=1, aggregate_uncorrected=1)]),
        probes=False,
    )
    assert good.verdict.assignable and good.backend == "FakeNvml"
    assert bad.verdict.excluded
    uri = str(tmp_path / "node_health")
    assert write_results(uri, [good, bad]) == 2
    again = run_preflight(NO_PROBES, node="node-b", nvml=FakeNvml([FakeGpu()]), probes=False)
    write_results(uri, [again])
    latest = latest_by_node(uri, max_age=timedelta(hours=1))
    assert set(latest) == {"node-a", "node-b"}
    assert latest["node-b"]["assignable"] and latest["node-b"]["run_id"] == again.run_id
    assert latest_by_node(str(tmp_path / "missing")) == {}
    ok, excluded = split_assignable(uri, ["node-a", "node-b", "node-c"], max_age=timedelta(hours=1))
    assert ok == ["node-a", "node-b"] and "no preflight record" in excluded["node-c"][0]
    ok, excluded = split_assignable(
        uri, ["node-a"], max_age=timedelta(hours=1), now=good.checked_at + timedelta(hours=2)
    )
    assert ok == [] and list(excluded) == ["node-a"]  # stale evidence is no evidence


def test_crashing_backend_excludes_instead_of_passing():
    class Broken(FakeNvml):
        def nvmlDeviceGetCount(self):
            raise RuntimeError("driver wedged")

    r = run_preflight(NO_PROBES, node="n", nvml=Broken([]), probes=False)
    assert r.verdict.excluded and "driver wedged" in r.verdict.exclusion_reasons()[0]
