"""The memory budget that large allocations are estimated against before they are made, so
that a scene too big for the machine is refused in one line (a ``ValueError`` naming what
is too big, the count, the bytes needed and what to do) instead of failing inside the
allocation.

The budget is ``MEMORY_FRACTION`` of the memory this process may use: the smallest of the
machine's physical memory (``os.sysconf``), a cgroup memory limit (containers, CI) and the
address-space limit (``ulimit -v``); ``FALLBACK_MEMORY`` where none can be read. The
environment variable ``WPSIM_MEMORY_BUDGET`` (bytes, or a number with a K, M, G or T suffix,
powers of 1024) replaces it.
"""

from __future__ import annotations

import os
from pathlib import Path

BUDGET_VARIABLE = "WPSIM_MEMORY_BUDGET"
"""Environment variable that sets the memory budget (e.g. ``64G``)."""
MEMORY_FRACTION = 0.5
"""Share of the usable memory one estimated allocation may take."""
FALLBACK_MEMORY = 8 * 2**30
"""Usable memory assumed where the machine's cannot be read (bytes)."""
_SUFFIXES = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def usable_memory() -> tuple:
    """(bytes, where from) of the memory this process may use: the smallest of physical
    memory, a cgroup limit and the address-space limit; ``FALLBACK_MEMORY`` if unreadable."""
    found = []
    try:
        found.append((os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"), "physical memory"))
    except (ValueError, OSError, AttributeError):
        pass
    for name in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(name).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 2**60:
            found.append((int(text), "the cgroup memory limit"))
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY:
            found.append((soft, "the address-space limit (ulimit -v)"))
    except (ImportError, ValueError, OSError):
        pass
    return min(found) if found else (FALLBACK_MEMORY, "an assumed machine")


def memory_budget() -> tuple:
    """(bytes, description) of the budget: ``WPSIM_MEMORY_BUDGET`` if set, else
    ``MEMORY_FRACTION`` of ``usable_memory``."""
    text = os.environ.get(BUDGET_VARIABLE, "").strip()
    if text:
        scale = _SUFFIXES.get(text[-1].upper(), 1)
        try:
            value = float(text[:-1] if scale > 1 else text) * scale
        except ValueError:
            value = float("nan")
        if not 0.0 < value < float("inf"):
            raise ValueError(f"{BUDGET_VARIABLE}={text!r}: expected a size in bytes > 0, e.g. 64G")
        return int(value), f"{BUDGET_VARIABLE}={text}"
    total, source = usable_memory()
    return int(total * MEMORY_FRACTION), f"{MEMORY_FRACTION:.0%} of {format_bytes(total)} of {source}"


def format_bytes(count: float) -> str:
    """``count`` bytes as a short human-readable size (binary units)."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(count) < 1024.0 or unit == "PiB":
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1024.0
    return f"{count:.1f} PiB"


def require_memory(what: str, needed: float, remedy: str):
    """Refuse (``ValueError``) an allocation estimated at ``needed`` bytes for ``what``
    beyond the memory budget; the message says what to do (``remedy``)."""
    budget, source = memory_budget()
    if needed > budget:
        raise ValueError(f"{what} needs about {format_bytes(needed)}, more than the memory budget of "
                         f"{format_bytes(budget)} ({source}; set {BUDGET_VARIABLE} to change it): {remedy}")
