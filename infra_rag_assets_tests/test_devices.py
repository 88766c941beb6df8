"""INFRA_RAG_DEVICE: resolution per machine, one-line errors before any work, CPU thread counts.

The GPU branches patch torch.cuda's availability answers (no test needs a GPU); everything
else runs the real resolver on this machine.
"""

from __future__ import annotations

import pytest
import torch
from click.testing import CliRunner

from infra_rag_assets.cli.main import main
from infra_rag_assets.rag import devices
from infra_rag_assets.rag.index.embedding import shared_embedder

pytestmark = pytest.mark.unit


@pytest.fixture
def one_gpu(monkeypatch):
    """torch answers as on a machine with one bf16-capable CUDA device."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.mark.parametrize("setting", ["tpu", "cpu:1", "cuda:x", "gpu", "mps:0"])
def test_a_malformed_setting_is_one_line_naming_the_setting(setting):
    with pytest.raises(devices.DeviceSettingError) as caught:
        devices.resolve(setting)
    message = str(caught.value)
    assert message.startswith(f"INFRA_RAG_DEVICE={setting!r}") and "\n" not in message
    assert "auto, cpu, cuda, cuda:N, mps" in message


def test_auto_on_a_cpu_only_machine_is_the_cpu_in_fp32(no_gpu):
    device = devices.resolve("auto")
    assert (device.torch_device, device.precision, device.kind) == ("cpu", "fp32", "cpu")
    assert device.threads == devices.cpu_threads()
    assert device.batch_size("embed") == 8  # the CPU batch measured fastest before there was a setting
    assert devices.resolve(None) == device


def test_cuda_without_cuda_fails_naming_the_setting(no_gpu):
    with pytest.raises(devices.DeviceSettingError, match=r"INFRA_RAG_DEVICE='cuda': CUDA is not available"):
        devices.resolve("cuda")


def test_a_gpu_the_machine_lacks_fails_naming_the_count(one_gpu):
    with pytest.raises(devices.DeviceSettingError, match=r"INFRA_RAG_DEVICE='cuda:7': this machine has 1 CUDA"):
        devices.resolve("cuda:7")


def test_auto_with_a_gpu_picks_it_in_mixed_precision(one_gpu, monkeypatch):
    device = devices.resolve("auto")
    assert (device.torch_device, device.precision) == ("cuda:0", "bf16")
    assert device.batch_size("embed") > devices.resolve("cpu").batch_size("embed")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: False)
    assert devices.resolve("cuda:0").precision == "fp16"


def test_the_service_stays_on_the_cpu_unless_the_setting_names_a_device(one_gpu, monkeypatch):
    monkeypatch.delenv("INFRA_RAG_DEVICE", raising=False)
    assert devices.configured().torch_device == "cuda:0"
    assert devices.for_queries().torch_device == "cpu"
    monkeypatch.setenv("INFRA_RAG_DEVICE", "cuda")
    assert devices.for_queries().torch_device == "cuda:0"
    assert devices.for_stage("cpu").torch_device == "cpu"  # a stage's own device= wins


@pytest.mark.parametrize(
    ("files", "quota"),
    [
        ({"cpu.max": "150000 100000\n"}, 1.5),
        ({"cpu.max": "max 100000\n"}, None),
        ({"cpu/cpu.cfs_quota_us": "300000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 3.0),
        ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None),
        ({}, None),
    ],
)
def test_cgroup_quota_v2_and_v1(tmp_path, files, quota):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert devices.cgroup_cpu_quota(tmp_path) == quota


def test_threads_are_the_cores_this_process_may_use(monkeypatch):
    monkeypatch.setattr(devices.os, "sched_getaffinity", lambda _pid: {0, 1, 2, 3})
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(devices, "cgroup_cpu_quota", lambda: 1.5)
    assert devices.cpu_threads() == 2  # a 1.5-CPU quota on 4 allowed cores: 2 threads
    monkeypatch.setattr(devices, "cgroup_cpu_quota", lambda: None)
    assert devices.cpu_threads() == 4
    for asked, threads in (("3", 3), ("1", 1), ("16", 4), ("0", 4), ("", 4), ("two", 4)):
        monkeypatch.setenv("OMP_NUM_THREADS", asked)  # honoured when a positive number, never above the cores
        assert devices.cpu_threads() == threads, asked


def test_metadata_names_device_precision_and_library_versions(no_gpu):
    record = devices.resolve("cpu").metadata()
    assert record["device"] == "cpu" and record["precision"] == "fp32"
    assert torch.__version__.startswith(record["torch_version"].split("+")[0])
    assert record["transformers_version"] and record["sentence_transformers_version"]


def test_a_setting_and_its_record_share_one_loaded_model(no_gpu):
    assert shared_embedder(device="cpu") is shared_embedder(device=devices.resolve("cpu"))


def test_every_cli_command_refuses_a_bad_setting_before_any_work(tmp_path, monkeypatch):
    monkeypatch.setenv("INFRA_RAG_DEVICE", "tpu")
    result = CliRunner().invoke(main, ["--home", str(tmp_path), "versions"])
    assert result.exit_code == 2
    assert "INFRA_RAG_DEVICE='tpu' is not one of" in result.output
    assert not any(tmp_path.iterdir())  # nothing was created


def test_build_refuses_cuda_on_a_cpu_only_machine_before_registering_a_version(tmp_path, monkeypatch, no_gpu):
    monkeypatch.setenv("INFRA_RAG_DEVICE", "cuda")
    result = CliRunner().invoke(main, ["--home", str(tmp_path), "build", "--quick", "--in-process"])
    assert result.exit_code == 2
    assert "INFRA_RAG_DEVICE='cuda': CUDA is not available" in result.output
    assert not (tmp_path / "warehouse.duckdb").exists() and not (tmp_path / "dagster").exists()
