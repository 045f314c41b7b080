# SPDX-License-Identifier: MIT
"""Memory statistics of librbln's caching allocator, the allocator of rbln tensors, and offload()."""

import collections
import contextlib
import ctypes

from ._device import c_index, device_index
from ._lib import MemoryStats, check, lib


def _index(device, what):
    return c_index(device_index(device, f"torch.rbln.{what}"))


def empty_cache(device=None):
    """Releases the cached device memory no tensor uses (unsplit segments only)."""
    check(lib.rbln_empty_cache(_index(device, "empty_cache")))


def memory_allocated(device=None):
    """Device memory occupied by tensors, in bytes (lazy tensors' host memory is not counted)."""
    return check(lib.rbln_memory_allocated(_index(device, "memory_allocated")))


def memory_reserved(device=None):
    """Device memory held by the caching allocator, in bytes."""
    return check(lib.rbln_memory_reserved(_index(device, "memory_reserved")))


def max_memory_allocated(device=None):
    """The peak of memory_allocated() since the start or reset_peak_memory_stats()."""
    return check(lib.rbln_max_memory_allocated(_index(device, "max_memory_allocated")))


def max_memory_reserved(device=None):
    """The peak of memory_reserved() since the start or reset_peak_memory_stats()."""
    return check(lib.rbln_max_memory_reserved(_index(device, "max_memory_reserved")))


def memory_stats(device=None):
    """The allocator's statistics, under the seed's keys, then the lazy.* ones, in librbln's order."""
    stats = MemoryStats()
    check(lib.rbln_memory_stats(_index(device, "memory_stats"), ctypes.byref(stats)))
    out = collections.OrderedDict()
    key, value = ctypes.c_char_p(), ctypes.c_int64()
    i = 0
    # The key names come from librbln so that C and Python cannot disagree on them.
    while lib.rbln_memory_stats_entry(ctypes.byref(stats), i, ctypes.byref(key), ctypes.byref(value)):
        out[key.value.decode()] = value.value
        i += 1
    return out


def reset_peak_memory_stats(device=None):
    """Sets every *.peak statistic to its current value."""
    check(lib.rbln_reset_peak_memory_stats(_index(device, "reset_peak_memory_stats")))


def reset_accumulated_memory_stats(device=None):
    """Zeroes the totals (*.total_allocated, *.total_freed) and the num_* counters."""
    check(lib.rbln_reset_accumulated_memory_stats(_index(device, "reset_accumulated_memory_stats")))


@contextlib.contextmanager
def offload():
    """File-backed (pageable) host memory for the rbln tensors created inside the block.

    The switch is process-wide; blocks nest, and only the outermost exit
    turns it off.
    """
    check(lib.rbln_offload_enter())
    try:
        yield
    finally:
        check(lib.rbln_offload_exit())
