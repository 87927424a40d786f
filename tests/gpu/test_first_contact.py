"""What a first real GPU host would show: NVML errors after a measurement, NUMA from sysfs,
MIG, which GPUs a run used, PCIe trained up under load. All through the NVML stand-in.

Upstream: nvml.h (CUDA 12.x/13.x) for nvmlDeviceGetNumaNodeId ("only applies to platforms
where the GPUs are NUMA nodes"), nvmlDeviceGetMigMode / nvmlDeviceGetMaxMigDeviceCount /
nvmlDeviceGetMigDeviceHandleByIndex, nvmlDeviceGetCurrPcieLinkGeneration; torch 2.13
torch/cuda/__init__.py ``_parse_visible_devices`` for CUDA_VISIBLE_DEVICES.
"""

from __future__ import annotations

import json
from pathlib import Path

from collectors.inventory import env, gpu_used, nvml, nvml_types
from collectors.upkeep.doctor import check_nvml
from tests.gpu.conftest import MIXED, NVLINK, PCIE, fake_sysfs
from tests.helpers import query, run_cli


def test_nvml_errors_after_a_measurement_become_a_note(use_spec, spec_variant) -> None:
    # GPU lost between nvmlInit and the reads (or no permission in a container).
    use_spec(spec_variant(PCIE, errors={"nvmlDeviceGetMemoryInfo": "GPU_IS_LOST",
                                        "nvmlSystemGetDriverVersion": "NO_PERMISSION"}))
    snap = env.snapshot()
    assert snap["gpu_count"] == 8 and all(g["memory_bytes"] is None for g in snap["gpus"])
    use_spec(spec_variant(PCIE, errors={"nvmlDeviceGetCount": "GPU_IS_LOST"}))
    assert env.snapshot()["gpu_count"] == 0


def test_nvml_error_does_not_lose_a_comm_sweep(store_path: Path, spec_variant) -> None:
    """The sweep finishes on gloo, then env.snapshot() meets a failing NVML: it commits."""
    spec = spec_variant(PCIE, errors={"nvmlDeviceGetHandleByIndex": "GPU_IS_LOST",
                                      "nvmlDeviceGetName": "UNKNOWN"})
    res = run_cli(store_path, "comm", "--json", "--ops", "all_reduce", "--tokens", "1",
                  "--hidden", "64", "--iters", "3", "--warmup", "1", "--nproc", "2",
                  STEPSCOPE_NVML_MODULE="tests.fakes.fake_pynvml",
                  STEPSCOPE_FAKE_NVML_SPEC=str(spec))  # fmt: skip
    assert res.code == 0, res.stderr
    assert query(store_path, "SELECT count(*) FROM v_comm_results")[0][0] == 1


def test_numa_from_sysfs_not_nvml(use_spec, spec_variant, tmp_path: Path, monkeypatch) -> None:
    use_spec(PCIE)
    topo = nvml.topology_inventory()
    assert [g.numa_node for g in topo.gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert "nvmlDeviceGetNumaNodeId" not in topo.unsupported
    # sysfs says -1 (one node) and NVML cannot say: None, still no warning.
    spec = json.loads(PCIE.read_text())
    for g in spec["gpus"]:
        g.pop("numa_node")
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps(spec))
    use_spec(bare)
    topo = nvml.topology_inventory()
    assert all(g.numa_node is None for g in topo.gpus) and not topo.unsupported
    # No sysfs entry at all (a GPU that is its own NUMA node, Grace-style): NVML's answer.
    use_spec(spec_variant(PCIE, gpu={**spec["gpu"], "gpu_numa_id": 4}))
    monkeypatch.setenv(nvml_types.SYSFS_ENV, str(tmp_path / "empty-sys"))
    assert {g.numa_node for g in nvml.topology_inventory().gpus} == {4}


def test_bus_ids_map_to_sysfs_names(tmp_path: Path) -> None:
    root = fake_sysfs(MIXED, tmp_path / "sys")
    assert (root / "bus/pci/devices/0000:01:00.0/numa_node").read_text().strip() == "0"


def mig_spec(spec_variant, instances: int = 3) -> Path:
    gpus = json.loads(NVLINK.read_text())["gpus"]
    gpus[0] = {**gpus[0], "mig": {"mode": 1, "instances": instances}}
    gpus[1] = {**gpus[1], "mig": {"mode": 0}}
    return spec_variant(NVLINK, gpus=gpus)


def test_mig_is_recorded_and_warned(use_spec, spec_variant, store_path: Path) -> None:
    spec = mig_spec(spec_variant)
    use_spec(spec)
    topo = nvml.topology_inventory()
    assert topo.gpus[0].mig_enabled and len(topo.gpus[0].mig_uuids) == 3
    assert topo.gpus[0].mig_uuids[0].startswith("MIG-")
    assert topo.gpus[1].mig_enabled is False and topo.gpus[2].mig_enabled is None
    assert not topo.unsupported  # NotSupported from a non-MIG GPU is its normal answer
    check = check_nvml(expect_gpus=True)
    assert check.status == "WARN" and "MIG is enabled on GPU 0" in check.detail
    from tests.gpu.conftest import fake_env

    res = run_cli(store_path, "gpu", "--json", **fake_env(spec))
    assert res.code == 0, res.stderr
    assert "MIG is enabled on GPU 0 (3 instance(s))" in res.stderr
    rows = query(store_path, "SELECT gpu_index, mig_enabled, mig_devices FROM v_gpu_devices "
                 "ORDER BY gpu_index LIMIT 3")  # fmt: skip
    assert rows == [(0, True, 3), (1, False, None), (2, None, None)]


def test_interconnect_of_the_gpus_used(use_spec, spec_variant) -> None:
    use_spec(MIXED)  # pairs 0-1 and 2-3 bridged by NVLink, PCIe between the pairs
    topo = nvml.topology_inventory()
    uuids = [g.uuid for g in topo.gpus]
    torch_form = [u.removeprefix("GPU-") for u in uuids]  # torch prints the bare UUID
    assert gpu_used.positions_by_uuid(topo.gpus, torch_form[:2]) == [0, 1]
    assert gpu_used.used_interconnect(topo, [0, 1]).interconnect == "nvlink"
    assert gpu_used.used_interconnect(topo, [1, 2]).interconnect == "pcie-only"
    assert gpu_used.used_interconnect(topo, [0, 1, 2, 3]).interconnect == "mixed"
    assert gpu_used.positions_by_uuid(topo.gpus, ["not-a-gpu"]) is None
    use_spec(mig_spec(spec_variant))
    topo = nvml.topology_inventory()
    mig = topo.gpus[0].mig_uuids[1]
    assert gpu_used.positions_by_uuid(topo.gpus, [mig]) == [0]
    assert gpu_used.used_interconnect(topo, [0]).mig


def test_cuda_visible_devices_as_cuda_reads_it(use_spec) -> None:
    use_spec(MIXED)
    gpus = nvml.topology_inventory().gpus
    u2 = gpus[2].uuid
    assert gpu_used.visible_positions(None, gpus) is None
    assert gpu_used.visible_positions("2,3", gpus) == [2, 3]
    assert gpu_used.visible_positions(f"{u2},1", gpus) == [2, 1]  # a UUID, then an index
    assert gpu_used.visible_positions(u2[:-1], gpus) is None  # prefix of 4 GPUs: ambiguous
    assert gpu_used.visible_positions("1,bogus,2", gpus) == [1]  # stops at an invalid entry
    assert gpu_used.visible_positions("1,1", gpus) == []  # a repeated id hides every device
    assert gpu_used.visible_positions("GPU-", gpus) is None  # ambiguous prefix


def test_pcie_generation_is_read_under_load(use_spec, spec_variant) -> None:
    base = json.loads(PCIE.read_text())["gpu"]
    spec = spec_variant(PCIE, gpu={**base, "pcie": {**base["pcie"], "gen_current": [1, 1, 5, 5]}})
    use_spec(spec)
    topo = nvml.topology_inventory()
    assert topo.gpus[0].pcie_gen_current == 1  # the gpu collector's idle reading
    with nvml.session() as lib:
        read = nvml.Reader(lib)
        handle = lib.nvmlDeviceGetHandleByIndex(0)
        sampler = gpu_used.PcieSampler("x")
        for _ in range(3):
            sampler.sample_once(read, handle)
    assert (sampler.gen, sampler.width) == (5, 16)
    # The thread path: a UUID NVML knows; one it does not leaves None, never raises.
    with gpu_used.PcieSampler(topo.gpus[0].uuid) as live:
        pass
    assert live.gen in (1, 5)
    with gpu_used.PcieSampler("GPU-unknown") as missing:
        pass
    assert missing.gen is None
