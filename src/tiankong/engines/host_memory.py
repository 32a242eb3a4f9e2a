"""Memory on this host: what this process holds, and what it may hold.

``resident_mb`` is what ``precision_choice`` records for each engine it measures (the resident
memory an engine adds when it loads and runs a full batch); ``memory_limit`` is what a split of
two engines is weighed against when the server starts (``engines.within_memory``): the
container's cgroup limit where there is one under the machine's memory, else the machine's.

>>> cgroup_limit(Path("/nonexistent"), Path("/nonexistent")) is None
True
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
MEMBERSHIP = Path("/proc/self/cgroup")  # this process's cgroup in each hierarchy
STATM = Path("/proc/self/statm")  # this process's memory in pages: size, resident, ...
# cgroup v2's limit file, then v1's (under its memory controller's folder); v2 writes "max"
# and v1 a huge number where there is none.
CGROUP_LIMIT_FILES = (("", "memory.max"), ("memory", "memory.limit_in_bytes"))
MB = 2**20


@dataclass(frozen=True)
class MemoryLimit:
    """The memory this process may use, in bytes, and where that figure comes from."""

    bytes: int
    source: str  # "the cgroup's limit" or "the machine's memory"

    @property
    def mb(self) -> float:
        return self.bytes / MB


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


def memory_limit(root: Path = CGROUP_ROOT, membership: Path = MEMBERSHIP) -> MemoryLimit | None:
    """The smaller of the cgroup's memory limit (``cgroup_limit``) and the machine's memory;
    None where neither can be read."""
    machine = machine_memory()
    cgroup = cgroup_limit(root, membership)
    if cgroup is not None and (machine is None or cgroup < machine):
        return MemoryLimit(cgroup, "the cgroup's limit")
    return MemoryLimit(machine, "the machine's memory") if machine is not None else None


def cgroup_limit(root: Path = CGROUP_ROOT, membership: Path = MEMBERSHIP) -> int | None:
    """The lowest memory limit set on this process's cgroup or any cgroup above it, under
    ``root``: cgroup v2's, else v1's memory controller's. ``membership`` (``/proc/self/cgroup``)
    names the process's cgroup; where that folder is not under ``root`` (a container that sees
    its own cgroup at the root) the root's file is its limit. None where no limit is set."""
    paths = cgroup_paths(membership)
    for controller, name in CGROUP_LIMIT_FILES:
        base = root / controller if controller else root
        parts = paths.get(controller or "v2", "").strip("/").split("/")
        own = base.joinpath(*parts)
        folders = [own, *own.parents] if ".." not in parts and own.is_dir() else [base]
        files = [folder / name for folder in folders[: folders.index(base) + 1]]
        present = [file for file in files if file.is_file()]
        if present:  # this hierarchy limits memory here
            numbers = [int(text) for text in map(read_stripped, present) if text.isdigit()]
            return min(numbers) if numbers else None  # "max" everywhere: no limit
    return None


def read_stripped(file: Path) -> str:
    try:
        return file.read_text().strip()
    except OSError:
        return ""


def cgroup_paths(membership: Path) -> dict[str, str]:
    """This process's cgroup path in each hierarchy: ``v2`` for the unified one ("0::/..."),
    else the controller's name ("4:memory:/...")."""
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
