"""GPU checks over the fake NVML: every branch, judged on volatile counters only."""

import pynvml
import pytest

from robodata.config import from_dict
from robodata.errors import ConfigError
from robodata.health.config import GpuPolicy
from robodata.health.findings import Level, NodeVerdict
from robodata.health.gpu_checks import check_gpus
from robodata_testing.fake_nvml import FakeGpu, FakeNvml


def verdict(*gpus, policy=None, **kw):
    findings, facts = check_gpus(FakeNvml(list(gpus), **kw), policy or GpuPolicy(xid_listen_ms=50))
    return NodeVerdict("n1", tuple(findings)), facts


def test_clean_gpus_are_healthy_and_assignable():
    v, facts = verdict(FakeGpu(uuid="GPU-a"), FakeGpu(uuid="GPU-b"))
    assert v.healthy and v.assignable
    assert [f["uuid"] for f in facts] == ["GPU-a", "GPU-b"]
    assert facts[0]["ecc_volatile_uncorrected"] == 0


def test_lifetime_ecc_with_zero_volatile_stays_assignable():
    v, facts = verdict(FakeGpu(aggregate_uncorrected=7, aggregate_corrected=3000))
    assert v.healthy and v.assignable
    info = [f for f in v.findings if f.check == "gpu.ecc.aggregate"]
    assert info and info[0].level is Level.INFO and "not judged" in info[0].message
    assert facts[0]["ecc_aggregate_uncorrected"] == 7


def test_volatile_uncorrected_excludes_with_reason():
    v, _ = verdict(FakeGpu(), FakeGpu(volatile_uncorrected=2, aggregate_uncorrected=2))
    assert not v.assignable and not v.healthy
    (reason,) = v.exclusion_reasons()
    assert reason.startswith("gpu.ecc.volatile: gpu1 ") and "2 uncorrected" in reason


def test_corrected_errors_degrade_then_exclude():
    policy = GpuPolicy(warn_volatile_corrected=10, max_volatile_corrected=100, xid_listen_ms=0)
    warn, _ = verdict(FakeGpu(volatile_corrected=50, aggregate_corrected=50), policy=policy)
    assert not warn.healthy and warn.assignable  # the two facts differ here
    bad, _ = verdict(FakeGpu(volatile_corrected=500, aggregate_corrected=500), policy=policy)
    assert not bad.assignable


def test_pending_page_retirement_excludes_and_unsupported_is_skipped():
    v, facts = verdict(FakeGpu(retired_pending=1, retired_dbe_pages=[0x1000], remapped_rows=None))
    assert not v.assignable and "page retirement pending" in v.exclusion_reasons()[0]
    assert facts[0]["retired_pages_dbe"] == 1
    # Ampere+: page retirement NotSupported, row remapping supported and clean
    ok, facts = verdict(FakeGpu(retired_pending=None))
    assert ok.assignable and "retired_pages_pending" not in facts[0]


@pytest.mark.parametrize("rows,text", [([0, 1, 1, 0], "pending"), ([0, 1, 0, 1], "failed")])
def test_row_remap_pending_or_failed_excludes(rows, text):
    v, _ = verdict(FakeGpu(remapped_rows=rows))
    assert not v.assignable and text in v.exclusion_reasons()[0]


def test_row_remaps_in_effect_are_info():
    v, _ = verdict(FakeGpu(remapped_rows=[3, 1, 0, 0]))
    assert v.assignable and v.healthy


def test_xid_events_fatal_benign_and_unknown():
    v, _ = verdict(FakeGpu(uuid="GPU-a"), FakeGpu(uuid="GPU-b", xids=[13, 79]))
    xids = [f for f in v.findings if f.check == "gpu.xid"]
    assert [(f.gpu, f.data["xid"], f.level) for f in xids] == [(1, 13, Level.INFO), (1, 79, Level.FAULT)]
    assert not v.assignable
    unknown, _ = verdict(FakeGpu(xids=[999]))
    assert unknown.assignable and not unknown.healthy


def test_ecc_disabled_blocks_but_is_not_unhealthy():
    v, _ = verdict(FakeGpu(ecc_mode=[0, 0]))
    assert v.healthy and not v.assignable
    relaxed, _ = verdict(FakeGpu(ecc_mode=[0, 0]), policy=GpuPolicy(require_ecc_enabled=False, xid_listen_ms=0))
    assert relaxed.assignable


def test_board_without_ecc_memory_is_not_a_query_failure():
    v, facts = verdict(FakeGpu(ecc_mode=None))
    assert [f.check for f in v.findings if f.level is Level.BLOCKING] == ["gpu.ecc.mode"]
    assert facts[0]["ecc_mode"] == [0, 0]


def test_real_backend_on_this_machine():
    """On a machine without a driver the real pynvml backend yields a CPU-only verdict."""
    try:
        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        pytest.skip("NVML present: covered by the device check")
    except pynvml.NVMLError:
        pass
    from robodata.health.nvml_backend import real_backend

    findings, facts = check_gpus(real_backend(), GpuPolicy())
    assert facts == [] and [(f.check, f.level) for f in findings] == [("gpu.nvml", Level.INFO)]
    bad, _ = check_gpus(real_backend(), GpuPolicy(expected_gpus=8))
    assert bad[0].level is Level.FAULT


def test_gpu_count_mismatch_and_lost_gpu():
    v, _ = verdict(FakeGpu(), policy=GpuPolicy(expected_gpus=8, xid_listen_ms=0))
    assert not v.assignable and "expected 8" in v.exclusion_reasons()[0]
    lost, _ = verdict(FakeGpu(), FakeGpu(lost=True))
    assert not lost.assignable and "GPU is lost" in lost.exclusion_reasons()[0]


def test_no_driver_is_cpu_only_unless_gpus_expected():
    v, facts = verdict(init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    assert v.assignable and facts == []
    bad, _ = verdict(init_error=pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, policy=GpuPolicy(expected_gpus=8))
    assert not bad.assignable


def test_fake_rejects_impossible_counters_and_config_validates():
    with pytest.raises(ConfigError):
        FakeGpu(volatile_uncorrected=3, aggregate_uncorrected=1)
    with pytest.raises(ConfigError):
        from_dict(GpuPolicy, {"fatal_xids": [79], "benign_xids": [79]})
    with pytest.raises(ConfigError, match="unknown key"):
        from_dict(GpuPolicy, {"max_volatile_uncorected": 1})


def test_fake_has_pynvml_shapes():
    nvml = FakeNvml([FakeGpu()])
    with pytest.raises(pynvml.NVMLError_Uninitialized):
        nvml.nvmlDeviceGetCount()
    nvml.nvmlInit()
    h = nvml.nvmlDeviceGetHandleByIndex(0)
    assert nvml.nvmlDeviceGetTotalEccErrors(h, pynvml.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, pynvml.NVML_VOLATILE_ECC) == 0
    assert nvml.nvmlDeviceGetRemappedRows(h) == (0, 0, 0, 0)
    with pytest.raises(pynvml.NVMLError_NotSupported):
        nvml.nvmlDeviceGetRetiredPagesPendingStatus(h)
    es = nvml.nvmlEventSetCreate()
    nvml.nvmlDeviceRegisterEvents(h, pynvml.nvmlEventTypeXidCriticalError, es)
    with pytest.raises(pynvml.NVMLError_Timeout):
        nvml.nvmlEventSetWait(es, 10)
    # the real backend's interface is the same names
    from robodata.health.nvml_backend import NvmlBackend

    for name in NvmlBackend.__dict__:
        if name.startswith("nvml"):
            assert callable(getattr(pynvml, name)) and callable(getattr(nvml, name)), name
