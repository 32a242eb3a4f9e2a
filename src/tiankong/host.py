"""What this host lets the process use: cores and memory, as a container or a rented slice of a
machine sees them.

``usable_cores`` is the default of ``--threads`` (``config.Settings``): the machine's physical
cores, scaled to the CPUs the process may run on (its affinity: ``taskset``, a cpuset) and
capped by its cgroup's CPU quota (``docker run --cpus``, a Kubernetes CPU limit), so the
engine's threads never outnumber the cores it is given. ``resident_mb`` is what
``precision_choice`` records for each engine it measures (the resident memory an engine adds
when it loads and runs a full batch); ``memory_limit`` is what a split of two engines is
weighed against when the server starts (``engines.within_memory``): the lowest cgroup limit
on the way up from the process's cgroup where there is one under the machine's memory, else
the machine's.

>>> cgroup_limit(Path("/nonexistent"), Path("/nonexistent")) is None
True
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CGROUP_ROOT = Path("/sys/fs/cgroup")


def require(extra: str, modules: tuple[str, ...], what: str, otherwise: str = "") -> None:
    """``what`` needs ``modules``, the packages of the ``extra``: where one is missing, one
    sentence naming the install (``MissingPackageError``, exit 3), before anything imports it.
    ``otherwise``: another way, said after it."""
    import importlib.util

    from tiankong.errors import MissingPackageError

    missing = [module for module in modules if importlib.util.find_spec(module) is None]
    if missing:
        raise MissingPackageError(
            f"{what} needs {' and '.join(missing)}, which this install lacks: pip install "
            f"'tiankong[{extra}]' (in a clone of the repository, `bash scripts/setup.sh --full` "
            f"installs everything){otherwise}."
        )


MEMBERSHIP = Path("/proc/self/cgroup")  # this process's cgroup in each hierarchy
STATM = Path("/proc/self/statm")  # this process's memory in pages: size, resident, ...
SYSFS_CPUS = Path("/sys/devices/system/cpu")  # cpuN/topology: which core each CPU is on
# Each limit's file in cgroup v2, then in v1: (the folder under the root, the hierarchy's name
# in /proc/self/cgroup, the file). v1's CPU controller may be mounted as "cpu", or only as
# "cpu,cpuacct" where no symlink was made. Where there is no limit, v2 writes "max" and v1 a
# huge number (memory) or -1 (the CPU quota).
MEMORY_FILES = (("", "v2", "memory.max"), ("memory", "memory", "memory.limit_in_bytes"))
CPU_FILES = (
    ("", "v2", "cpu.max"),
    ("cpu", "cpu", "cpu.cfs_quota_us"),
    ("cpu,cpuacct", "cpu", "cpu.cfs_quota_us"),
)
MB = 2**20


@dataclass(frozen=True)
class MemoryLimit:
    """The memory this process may use, in bytes, and where that figure comes from."""

    bytes: int
    source: str  # "the cgroup's limit" or "the machine's memory"

    @property
    def mb(self) -> float:
        return self.bytes / MB


def usable_cores(
    root: Path = CGROUP_ROOT, membership: Path = MEMBERSHIP, sysfs: Path = SYSFS_CPUS
) -> int:
    """The physical cores this process can keep busy, at least 1: the cores that the CPUs it
    may run on (its affinity) belong to, at most the cgroup's CPU quota rounded down.
    Hyper-threads share a core, so an engine gets one thread a core."""
    allowed = allowed_cpus()
    cores = cores_of(allowed, sysfs)
    if cores is None:  # no topology to read: the machine's share of its physical cores
        try:
            import psutil

            logical = psutil.cpu_count() or len(allowed)
            physical = psutil.cpu_count(logical=False) or logical
        except ImportError:  # psutil is optional for the bare library: a CPU a core
            logical = physical = len(allowed)
        cores = min(len(allowed), physical, len(allowed) * physical // max(1, logical))
    quota = cgroup_cpus(root, membership)
    cores = max(1, cores)
    return cores if quota is None else max(1, min(cores, math.floor(quota)))


def usable_cpus(root: Path = CGROUP_ROOT, membership: Path = MEMBERSHIP) -> int:
    """The logical CPUs this process may keep busy: its affinity, at most the cgroup's CPU
    quota rounded up (half a CPU still runs one thread), at least 1."""
    cpus = len(allowed_cpus())
    quota = cgroup_cpus(root, membership)
    return max(1, cpus if quota is None else min(cpus, math.ceil(quota)))


def allowed_cpus() -> set[int]:
    """The logical CPUs this process may run on (``sched_getaffinity``; every CPU where the OS
    can't say)."""
    if hasattr(os, "sched_getaffinity"):
        return set(os.sched_getaffinity(0))
    return set(range(os.cpu_count() or 1))


def cores_of(cpus: set[int], sysfs: Path = SYSFS_CPUS) -> int | None:
    """How many physical cores ``cpus`` lie on (Linux's ``cpuN/topology``: each CPU's package
    and core); None where a CPU's topology can't be read."""
    cores = set()
    for cpu in cpus:
        topology = sysfs / f"cpu{cpu}" / "topology"
        package = read_stripped(topology / "physical_package_id")
        core = read_stripped(topology / "core_id")
        if not package or not core:
            return None
        cores.add((package, core))
    return len(cores) or None


def cgroup_cpus(root: Path = CGROUP_ROOT, membership: Path = MEMBERSHIP) -> float | None:
    """The CPUs the cgroup's quota allows (quota over period), the lowest on the way up from
    the process's cgroup; None where no quota is set."""
    return cgroup_lowest(root, membership, CPU_FILES, cpu_quota)


def cpu_quota(file: Path) -> float | None:
    """CPUs from a quota file: v2's ``cpu.max`` ("200000 100000", or "max 100000"), or v1's
    ``cpu.cfs_quota_us`` (-1: none) over the ``cpu.cfs_period_us`` beside it."""
    text = read_stripped(file)
    if file.name == "cpu.max":
        quota, _, period = text.partition(" ")
    else:
        quota, period = text, read_stripped(file.with_name("cpu.cfs_period_us"))
    if not quota.isdigit() or not period.isdigit() or int(period) == 0:
        return None  # "max", -1, or unreadable: no quota
    return int(quota) / int(period)


def resident_mb() -> float | None:
    """This process's resident memory in MB: psutil's figure, or without psutil (the library
    without the serve extra) Linux's ``/proc/self/statm``; None where neither can say."""
    try:
        import psutil
    except ImportError:
        try:
            resident_pages = int(STATM.read_text().split()[1])
            return resident_pages * os.sysconf("SC_PAGE_SIZE") / MB
        except (OSError, ValueError, IndexError):
            return None
    return float(psutil.Process().memory_info().rss) / MB


@dataclass(frozen=True)
class CpuSnapshot:
    """The busy CPU seconds of the CPUs this process may use, and this process's, at one
    moment (``others_share``)."""

    wall: float
    busy: float
    mine: float
    cpus: int = 1  # the CPUs ``busy`` counts


def cpu_snapshot() -> CpuSnapshot | None:
    """Now's ``CpuSnapshot``; None without psutil (the library without the serve extra)."""
    try:
        import psutil
    except ImportError:
        return None
    every = psutil.cpu_times(percpu=True)
    mine = [every[cpu] for cpu in sorted(allowed_cpus()) if cpu < len(every)] or every
    busy = sum(
        getattr(times, name, 0.0)
        for times in mine
        for name in ("user", "nice", "system", "irq", "softirq")
    )
    return CpuSnapshot(time.perf_counter(), busy, sum(os.times()[:2]), len(mine))


def others_share(before: CpuSnapshot | None) -> float | None:
    """The share (0-1) of the CPUs this process may use (its affinity) that other programs
    used since ``before``: a measurement taken beside them is not the quiet machine's
    (``--precision auto``'s); a program busy on a CPU the process can't use doesn't count."""
    after = None if before is None else cpu_snapshot()
    if before is None or after is None or after.wall <= before.wall:
        return None
    other = max(0.0, (after.busy - before.busy) - (after.mine - before.mine))
    return min(1.0, other / ((after.wall - before.wall) * after.cpus))


def memory_limit(root: Path = CGROUP_ROOT, membership: Path = MEMBERSHIP) -> MemoryLimit | None:
    """The smaller of the cgroup's memory limit (``cgroup_limit``) and the machine's memory;
    None where neither can be read."""
    machine = machine_memory()
    cgroup = cgroup_limit(root, membership)
    if cgroup is not None and (machine is None or cgroup < machine):
        return MemoryLimit(cgroup, "the cgroup's limit")
    return MemoryLimit(machine, "the machine's memory") if machine is not None else None


def cgroup_limit(root: Path = CGROUP_ROOT, membership: Path = MEMBERSHIP) -> int | None:
    """The lowest memory limit set on this process's cgroup or any cgroup above it, in bytes;
    None where none is set."""
    limit = cgroup_lowest(root, membership, MEMORY_FILES, memory_bytes)
    return None if limit is None else int(limit)


def memory_bytes(file: Path) -> int | None:
    text = read_stripped(file)
    return int(text) if text.isdigit() else None  # "max": no limit


def cgroup_lowest(
    root: Path,
    membership: Path,
    files: tuple[tuple[str, str, str], ...],
    value: Callable[[Path], float | None] | Callable[[Path], int | None],
) -> float | None:
    """The lowest ``value`` of a limit file on the way up from this process's cgroup to the
    hierarchy's root under ``root``: cgroup v2's file, else v1's (the first hierarchy whose
    file is there). ``membership`` (``/proc/self/cgroup``) names the process's cgroup; where
    that folder is not under ``root`` (a container that sees its own cgroup at the root) the
    root's file is its limit. None where no file there sets one."""
    paths = cgroup_paths(membership)
    for folder_name, hierarchy, name in files:
        base = root / folder_name if folder_name else root
        parts = paths.get(hierarchy, "").strip("/").split("/")
        own = base.joinpath(*parts)
        folders = [own, *own.parents] if ".." not in parts and own.is_dir() else [base]
        candidates = [folder / name for folder in folders[: folders.index(base) + 1]]
        present = [file for file in candidates if file.is_file()]
        if present:  # this hierarchy is here
            found = [limit for limit in map(value, present) if limit is not None]
            return min(found) if found else None
    return None


def read_stripped(file: Path) -> str:
    try:
        return file.read_text().strip()
    except OSError:
        return ""


def cgroup_paths(membership: Path) -> dict[str, str]:
    """This process's cgroup path in each hierarchy: ``v2`` for the unified one ("0::/..."),
    else each controller's name ("4:cpu,cpuacct:/..." gives ``cpu`` and ``cpuacct``)."""
    try:
        lines = membership.read_text().splitlines()
    except OSError:
        return {}
    paths: dict[str, str] = {}
    for line in lines:
        _, _, rest = line.partition(":")
        controllers, _, path = rest.partition(":")
        for controller in controllers.split(",") if controllers else ["v2"]:
            paths[controller] = path
    return paths


def machine_memory() -> int | None:
    """The machine's physical memory in bytes, from the OS; None where it can't say."""
    try:
        pages, size = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):
        return None
    return pages * size if pages > 0 and size > 0 else None


def process_thread(owner: Any, prefix: str) -> ThreadPoolExecutor:
    """``owner``'s one worker thread named ``prefix``, made once per process: a child forked
    from a process that had used it (a multiprocessing pool, a DataLoader's workers, gunicorn's
    preload) inherits an executor whose thread did not come with it, and its first task waited
    on that thread forever (a review: the index lookups of a FillMasker used before the fork)."""
    made = owner.__dict__.get(f"_{prefix}_thread")
    if made is None or made[0] != os.getpid():
        made = (os.getpid(), ThreadPoolExecutor(1, thread_name_prefix=prefix))
        owner.__dict__[f"_{prefix}_thread"] = made
    return made[1]
