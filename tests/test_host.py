"""What the host lets the process use (``tiankong.host``): the cores ``--threads`` defaults to,
and the memory limit a split of two engines is weighed against, with the rule that keeps a
split or serves one engine (``engines.within_memory``)."""

from __future__ import annotations

import mmap
import os
import sys
from pathlib import Path
from typing import Any

import psutil
import pytest

from tiankong import Settings
from tiankong.engines import SPLIT_MEMORY_SHARE, within_memory
from tiankong.host import (
    MemoryLimit,
    cgroup_cpus,
    cgroup_limit,
    machine_memory,
    memory_limit,
    resident_mb,
    usable_cores,
    usable_cpus,
)

GB = 2**30
LINE = "int8 (onnx) for batches under 8 texts, bf16 (openvino) from 8"


def pair(lone_mb: float | None, batch_mb: float | None, lone_faster: bool) -> dict[str, Any]:
    """A split choice as ``PrecisionChoice.describe`` writes it: ONNX Runtime INT8 for small
    batches, OpenVINO bf16 from 8 texts; ``lone_faster``: whether ONNX Runtime INT8 is the one
    the measurement picked to serve alone (the smaller product of its two times)."""
    lone_batch_ms = 10.0 if lone_faster else 30.0
    alone = "onnx int8" if lone_faster else "openvino bf16"
    return {
        "engine": "openvino", "precision": "bf16", "file": "bf16.xml", "line": LINE,
        "split": {"engine": "onnx", "precision": "int8", "file": None, "below_rows": 8, "ms": {},
                  "alone": alone},
        "candidates": [
            {"engine": "onnx", "precision": "fp32", "b1_ms": 3.0, "batch_ms": 40.0,
             "memory_mb": 300.0},
            {"engine": "onnx", "precision": "int8", "b1_ms": 1.0, "batch_ms": lone_batch_ms,
             "memory_mb": lone_mb},
            {"engine": "openvino", "precision": "bf16", "b1_ms": 2.0, "batch_ms": 6.0,
             "memory_mb": batch_mb},
        ],
    }  # fmt: skip


def membership(tmp_path: Path, *lines: str) -> Path:
    """A ``/proc/self/cgroup`` naming the process's cgroups."""
    file = tmp_path / "proc-self-cgroup"
    file.write_text("".join(line + "\n" for line in lines))
    return file


def test_a_container_that_sees_its_own_cgroup_at_the_root_reads_the_root_file(
    tmp_path: Path,
) -> None:
    root, inside = tmp_path / "cgroup", membership(tmp_path, "4:memory:/docker/abc", "0::/")
    root.mkdir()
    assert cgroup_limit(root, inside) is None  # no memory hierarchy is here
    (root / "memory").mkdir()
    (root / "memory" / "memory.limit_in_bytes").write_text("1073741824\n")
    assert cgroup_limit(root, inside) == GB  # v1: /docker/abc is not under the mount
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "memory.max").write_text("max\n")
    assert cgroup_limit(v2, membership(tmp_path, "0::/")) is None  # v2 says there is none
    (v2 / "memory.max").write_text("2147483648\n")
    assert cgroup_limit(v2, membership(tmp_path, "0::/")) == 2 * GB


def test_a_hybrid_host_reads_v1_where_the_unified_hierarchy_holds_no_memory_limit(
    tmp_path: Path,
) -> None:
    """cgroup v2 mounted beside v1 (``/sys/fs/cgroup/unified``), memory controlled by v1."""
    root = tmp_path / "cgroup"
    (root / "unified").mkdir(parents=True)
    (root / "unified" / "cgroup.procs").write_text("")
    (root / "memory" / "job").mkdir(parents=True)
    (root / "memory" / "job" / "memory.limit_in_bytes").write_text(f"{3 * GB}\n")
    inside = membership(tmp_path, "4:memory:/job", "0::/")
    assert cgroup_limit(root, inside) == 3 * GB


def test_a_path_that_climbs_out_of_the_hierarchy_is_not_followed(tmp_path: Path) -> None:
    root = tmp_path / "cgroup"
    root.mkdir()
    (tmp_path / "memory.max").write_text(f"{GB}\n")  # outside the mount
    (root / "memory.max").write_text("max\n")
    assert cgroup_limit(root, membership(tmp_path, "0::/../")) is None  # the root's own


def test_the_lowest_limit_on_the_way_up_from_the_process_cgroup_holds(tmp_path: Path) -> None:
    root = tmp_path / "cgroup"
    own = root / "memory" / "slice" / "service"
    own.mkdir(parents=True)
    (own / "memory.limit_in_bytes").write_text("9223372036854771712\n")  # v1's "none"
    (own.parent / "memory.limit_in_bytes").write_text(f"{3 * GB}\n")
    (root / "memory" / "memory.limit_in_bytes").write_text("9223372036854771712\n")
    inside = membership(tmp_path, "9:name=systemd:/", "4:memory:/slice/service", "0::/")
    assert cgroup_limit(root, inside) == 3 * GB
    unified = membership(tmp_path, "0::/slice/service")
    (root / "slice" / "service").mkdir(parents=True)
    (root / "slice" / "service" / "memory.max").write_text(f"{GB}\n")
    assert cgroup_limit(root, unified) == GB  # v2's own file


def test_the_limit_is_the_smaller_of_the_cgroup_and_the_machine(tmp_path: Path) -> None:
    machine = machine_memory()
    assert machine is not None and machine > GB  # Linux says
    inside = membership(tmp_path, "0::/")
    assert memory_limit(tmp_path, inside) == MemoryLimit(machine, "the machine's memory")
    (tmp_path / "memory.max").write_text(f"{GB}\n")
    assert memory_limit(tmp_path, inside) == MemoryLimit(GB, "the cgroup's limit")
    (tmp_path / "memory.max").write_text(f"{machine * 4}\n")  # a limit above the machine
    assert memory_limit(tmp_path, inside) == MemoryLimit(machine, "the machine's memory")


@pytest.mark.parametrize("psutil_installed", [True, False])
def test_resident_memory_grows_with_what_this_process_holds(
    psutil_installed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not psutil_installed:  # the library without the serve extra: Linux's /proc says
        monkeypatch.setitem(sys.modules, "psutil", None)
    size = 64 * 2**20
    # fresh pages from the kernel (an anonymous mapping, not the allocator, which may hand back
    # memory that is resident already), each written, so each is resident
    with mmap.mmap(-1, size) as held:
        before = resident_mb()
        held[::4096] = b"x" * (size // 4096)
        after = resident_mb()
    assert before is not None and after is not None and after - before > 48


def test_a_split_within_its_share_serves_and_the_line_says_what_it_holds() -> None:
    choice = pair(lone_mb=240.0, batch_mb=835.0, lone_faster=True)
    served = within_memory(choice, MemoryLimit(24 * GB, "the machine's memory"))
    assert served == {**choice, "line": served["line"]}  # the split stands
    assert served["line"] == (
        f"{LINE}; the second engine, bf16 (openvino), holds 835 MB, 3.4% of 24,576 MB (the "
        "machine's memory)"
    )


@pytest.mark.parametrize(
    ("lone_faster", "alone", "second"),
    [
        (True, "int8 (onnx)", "bf16 (openvino), holds 835 MB, 40.8%"),
        (False, "bf16 (openvino)", "int8 (onnx), holds 240 MB, 11.7%"),
    ],
)
def test_a_split_over_its_share_serves_the_faster_engine_alone(
    lone_faster: bool, alone: str, second: str
) -> None:
    """In a 2 GB cgroup either engine is over a tenth: the one with the smaller product of its
    two times serves, whichever end of the split it served."""
    choice = pair(lone_mb=240.0, batch_mb=835.0, lone_faster=lone_faster)
    served = within_memory(choice, MemoryLimit(2 * GB, "the cgroup's limit"))
    assert served["split"] is None
    assert f"{served['precision']} ({served['engine']})" == alone
    assert served["file"] == (None if lone_faster else "bf16.xml")  # the part's own file
    assert served["line"] == (
        f"{LINE}; the second engine, {second} of 2,048 MB (the cgroup's limit), over the 10% a "
        f"split may take, so {alone} serves alone"
    )


def test_the_share_is_compared_at_its_edge() -> None:
    limit = MemoryLimit(10_000 * 2**20, "the cgroup's limit")
    at = pair(lone_mb=240.0, batch_mb=SPLIT_MEMORY_SHARE * 10_000, lone_faster=True)
    assert within_memory(at, limit)["split"] is not None
    over = pair(lone_mb=240.0, batch_mb=SPLIT_MEMORY_SHARE * 10_000 + 1, lone_faster=True)
    assert within_memory(over, limit)["split"] is None


def test_without_a_measurement_or_a_limit_the_split_serves_and_the_line_says_why() -> None:
    unmeasured = pair(lone_mb=240.0, batch_mb=None, lone_faster=True)  # the second's unknown
    served = within_memory(unmeasured, MemoryLimit(GB, "the cgroup's limit"))
    assert served["split"] is not None
    unknown = "the second engine's memory was not measured"
    assert served["line"] == f"{LINE}; the split serves: {unknown}"
    served = within_memory(pair(240.0, 835.0, True), None)
    assert served["line"] == f"{LINE}; the split serves: this machine's memory is unknown"
    one = {"engine": "onnx", "precision": "int8", "split": None, "line": "int8 (onnx)"}
    assert within_memory(one, MemoryLimit(GB, "the cgroup's limit")) is one


def test_the_cpu_quota_is_read_from_v2_then_v1_and_none_means_no_quota(tmp_path: Path) -> None:
    v2 = tmp_path / "v2"
    (v2 / "pod" / "app").mkdir(parents=True)
    inside = membership(tmp_path, "0::/pod/app")
    assert cgroup_cpus(v2, inside) is None  # no cpu.max anywhere
    (v2 / "pod" / "app" / "cpu.max").write_text("max 100000\n")
    assert cgroup_cpus(v2, inside) is None
    (v2 / "pod" / "cpu.max").write_text("250000 100000\n")  # the pod's limit: 2.5 CPUs
    assert cgroup_cpus(v2, inside) == 2.5
    (v2 / "pod" / "app" / "cpu.max").write_text("50000 100000\n")  # the container's: half
    assert cgroup_cpus(v2, inside) == 0.5
    v1 = tmp_path / "v1"
    (v1 / "cpu" / "docker" / "abc").mkdir(parents=True)
    inside = membership(tmp_path, "5:cpu,cpuacct:/docker/abc", "0::/")
    (v1 / "cpu" / "docker" / "abc" / "cpu.cfs_quota_us").write_text("-1\n")
    (v1 / "cpu" / "docker" / "abc" / "cpu.cfs_period_us").write_text("100000\n")
    assert cgroup_cpus(v1, inside) is None
    (v1 / "cpu" / "docker" / "abc" / "cpu.cfs_quota_us").write_text("200000\n")
    assert cgroup_cpus(v1, inside) == 2.0


def topology(tmp_path: Path) -> Path:
    """A 32-core host with hyper-threads, as Linux numbers it: CPU i and CPU i + 32 are the two
    threads of core i."""
    sysfs = tmp_path / "sysfs"
    for cpu in range(64):
        folder = sysfs / f"cpu{cpu}" / "topology"
        folder.mkdir(parents=True)
        (folder / "physical_package_id").write_text("0\n")
        (folder / "core_id").write_text(f"{cpu % 32}\n")
    return sysfs


@pytest.mark.parametrize(
    ("affinity", "quota", "cores"),
    [
        (set(range(64)), None, 32),  # the whole machine: one thread a core
        (set(range(8)), None, 8),  # --cpuset-cpus 0-7: eight separate cores
        ({0, 32, 1, 33}, None, 2),  # two cores' both threads
        (set(range(64)), "270000 100000", 2),  # --cpus 2.7: 2 threads, never over the quota
        (set(range(64)), "50000 100000", 1),  # half a CPU: still one thread
        ({0, 1}, "400000 100000", 2),  # the affinity binds before a larger quota
    ],
)
def test_usable_cores_count_the_cores_of_the_allowed_cpus_within_the_quota(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    affinity: set[int],
    quota: str | None,
    cores: int,
) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: affinity, raising=False)
    if quota is not None:
        (tmp_path / "cpu.max").write_text(quota + "\n")
    inside = membership(tmp_path, "0::/")
    assert usable_cores(tmp_path, inside, topology(tmp_path)) == cores


@pytest.mark.parametrize(
    ("affinity", "logical", "cores"),
    [
        (64, 64, 32),  # every CPU: the physical cores
        (8, 64, 4),  # without the topology, the machine's share of its cores
        (64, 2, 32),  # os.cpu_count() told 2 (PYTHON_CPU_COUNT): psutil counts the machine
        (1, 64, 1),
    ],
)
def test_without_a_topology_the_cores_are_the_machines_share(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, affinity: int, logical: int, cores: int
) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(affinity)), raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: logical)
    monkeypatch.setattr(psutil, "cpu_count", lambda logical=True: 64 if logical else 32)
    inside = membership(tmp_path, "0::/")
    assert usable_cores(tmp_path, inside, tmp_path / "no-sysfs") == cores
    monkeypatch.setitem(sys.modules, "psutil", None)  # no psutil: every allowed CPU a core
    assert usable_cores(tmp_path, inside, tmp_path / "no-sysfs") == affinity


def test_usable_cpus_round_the_quota_up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """What torch's OpenMP pool is weighed against (``engines.base.spinning_pays``)."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3}, raising=False)
    inside = membership(tmp_path, "0::/")
    assert usable_cpus(tmp_path, inside) == 4
    (tmp_path / "cpu.max").write_text("150000 100000\n")
    assert usable_cpus(tmp_path, inside) == 2
    (tmp_path / "cpu.max").write_text("20000 100000\n")
    assert usable_cpus(tmp_path, inside) == 1


def test_the_lowest_quota_holds_wherever_it_is_set(tmp_path: Path) -> None:
    v2 = tmp_path / "v2"
    (v2 / "pod" / "app").mkdir(parents=True)
    (v2 / "pod" / "cpu.max").write_text("50000 100000\n")  # the parent's is the lower
    (v2 / "pod" / "app" / "cpu.max").write_text("250000 100000\n")
    assert cgroup_cpus(v2, membership(tmp_path, "0::/pod/app")) == 0.5
    v1 = tmp_path / "v1"  # cpu,cpuacct mounted without a "cpu" symlink, the quota on a parent
    own = v1 / "cpu,cpuacct" / "slice" / "job"
    own.mkdir(parents=True)
    for folder, quota in ((own, "-1"), (own.parent, "300000")):
        (folder / "cpu.cfs_quota_us").write_text(quota + "\n")
        (folder / "cpu.cfs_period_us").write_text("100000\n")
    assert cgroup_cpus(v1, membership(tmp_path, "4:cpu,cpuacct:/slice/job")) == 3.0


def test_usable_cores_is_the_default_of_threads() -> None:
    assert Settings().threads == usable_cores() >= 1
