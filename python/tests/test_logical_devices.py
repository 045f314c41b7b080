# SPDX-License-Identifier: MIT
"""Logical devices seen from torch: NPUs grouped by RBLN_DEVICE_MAP.

librbln reads the grouping once per process, from the environment: meson
runs this file in a guest of four NPUs with RBLN_DEVICE_MAP=[0,1],[2,3]
(any map of groups of two or more works).
"""

import ctypes
import gc
import glob
import os
import re

import pytest
import torch

from torch_rbln._lib import MemoryStats, lib

MAP = os.environ.get("RBLN_DEVICE_MAP", "")
GROUPS = [[int(m) for m in g.split(",")] for g in re.findall(r"\[([^\]]*)\]", MAP)]

pytestmark = pytest.mark.skipif(
    not GROUPS or min(map(len, GROUPS)) < 2,
    reason="needs RBLN_DEVICE_MAP with groups of two NPUs or more, e.g. [0,1],[2,3]")


def c_allocated(device):
    s = MemoryStats()
    assert lib.rbln_memory_stats(device, ctypes.byref(s)) == 0, lib.rbln_last_error()
    return s.allocated.current, s.allocated.peak


def settle():
    gc.collect()
    for d in range(torch.rbln.device_count()):
        torch.rbln.synchronize(d)


def test_counts():
    assert torch.rbln.device_count() == lib.rbln_device_count() == len(GROUPS)
    assert torch.rbln.physical_device_count() == len(glob.glob("/dev/accel/accel*"))
    n = len(GROUPS)
    with pytest.raises(RuntimeError, match=f"device {n} does not exist \\({n} device"):
        torch.rbln.set_device(n)
    with pytest.raises(RuntimeError, match="does not exist"):
        torch.ones(2, device=f"rbln:{n}")


@pytest.mark.parametrize("device", range(len(GROUPS)))
def test_sharded_ops(device):
    # Tensors are sharded on their first dimension: an odd one leaves the
    # members unequal shards.
    a_cpu = torch.arange(35.0).reshape(7, 5)
    b_cpu = torch.linspace(-1, 1, 10).reshape(5, 2)
    a, b = a_cpu.to(f"rbln:{device}"), b_cpu.to(f"rbln:{device}")
    assert torch.equal((a + a).cpu(), a_cpu + a_cpu)
    torch.testing.assert_close((a @ b).cpu(), a_cpu @ b_cpu)
    assert torch.equal(a.sum(-1).cpu(), a_cpu.sum(-1))
    assert torch.equal(torch.relu(a - 10).cpu(), torch.relu(a_cpu - 10))
    assert (a + 1).device == torch.device(f"rbln:{device}")


def test_memory_stats_equal_the_c_api():
    settle()
    base = torch.rbln.memory_allocated(0)
    x = torch.ones(8, 1024, device="rbln:0")
    y = x * 2
    settle()
    assert torch.rbln.memory_allocated(0) - base == 2 * 8 * 1024 * 4
    assert (torch.rbln.memory_allocated(0), torch.rbln.max_memory_allocated(0)) == c_allocated(0)
    s = torch.rbln.memory_stats(0)
    assert (s["allocated.current"], s["allocated.peak"]) == c_allocated(0)
    del x, y


def test_peak_is_a_value_that_happened():
    # Issue #17: a {1,8192} int8 tensor lives on the first member only, a
    # {2,4096} one on two; summing the members' peaks gave more than the
    # device ever held. Each `+ 0` holds its lazy input (materialized) and
    # its result at once: 2 * 8192 bytes, on the first member the first
    # time, over two the second.
    settle()
    base = torch.rbln.memory_allocated(0)
    torch.rbln.reset_peak_memory_stats(0)
    x = torch.ones(1, 8192, dtype=torch.int8, device="rbln:0") + 0
    settle()
    assert torch.rbln.memory_allocated(0) - base == 8192
    assert torch.rbln.max_memory_allocated(0) - base == 2 * 8192
    del x
    settle()
    y = torch.ones(2, 4096, dtype=torch.int8, device="rbln:0") + 0
    settle()
    assert torch.rbln.memory_allocated(0) - base == 8192
    # Summed member peaks would be 3 * 8192 here.
    assert torch.rbln.max_memory_allocated(0) - base == 2 * 8192
    assert c_allocated(0) == (base + 8192, base + 2 * 8192)
    assert torch.equal(y.cpu(), torch.ones(2, 4096, dtype=torch.int8))
    del y


@pytest.mark.skipif(len(GROUPS) < 2, reason="needs two logical devices")
def test_devices_are_counted_apart():
    settle()
    before0 = c_allocated(0)[0]
    before1 = c_allocated(1)[0]
    x = torch.ones(6, 512, device="rbln:1")
    y = x + x
    settle()
    assert c_allocated(0)[0] == before0
    assert torch.rbln.memory_allocated(1) - before1 == 2 * 6 * 512 * 4
    with torch.rbln.device_of(y):
        assert torch.rbln.current_device() == 1
        assert torch.rbln.memory_allocated() == c_allocated(1)[0]
    del x, y
