# SPDX-License-Identifier: MIT
"""Logical devices seen from torch: two NPUs grouped by RBLN_DEVICE_MAP=[0,1].

librbln reads the grouping once per process, so the observations are made
by a child Python with the variable set (this file run as a script), and
checked here.
"""

import ctypes
import gc
import json
import os
import subprocess
import sys

import pytest


def child():
    import torch

    import torch_rbln  # noqa: F401
    from torch_rbln._lib import MemoryStats, lib

    obs = {}
    obs["device_count"] = torch.rbln.device_count()
    obs["physical_device_count"] = torch.rbln.physical_device_count()
    obs["c_counts"] = [lib.rbln_device_count(), lib.rbln_physical_device_count()]
    try:
        torch.rbln.set_device(1)
        obs["set_device_1"] = "no error"
    except RuntimeError as err:
        obs["set_device_1"] = str(err)

    # Ops over tensors sharded on their first dimension, against the CPU.
    a_cpu = torch.arange(24.0).reshape(6, 4)
    b_cpu = torch.linspace(-1, 1, 8).reshape(4, 2)
    a, b = a_cpu.to("rbln"), b_cpu.to("rbln")
    obs["add_ok"] = torch.equal((a + a).cpu(), a_cpu + a_cpu)
    obs["mm_ok"] = torch.allclose((a @ b).cpu(), a_cpu @ b_cpu)
    obs["sum_ok"] = torch.equal(a.sum(-1).cpu(), a_cpu.sum(-1))
    del a, b
    gc.collect()
    torch.rbln.synchronize()

    # A peak must be a value memory_allocated() had (issue #17).
    torch.rbln.reset_peak_memory_stats()
    seen = [torch.rbln.memory_allocated()]
    x = torch.ones(1, 8192, dtype=torch.int8, device="rbln")
    x.add_(1)
    torch.rbln.synchronize()
    seen.append(torch.rbln.memory_allocated())
    del x
    gc.collect()
    y = torch.ones(2, 4096, dtype=torch.int8, device="rbln")
    y.add_(1)
    torch.rbln.synchronize()
    seen.append(torch.rbln.memory_allocated())
    obs["currents"] = seen
    obs["max_memory_allocated"] = torch.rbln.max_memory_allocated()
    s = MemoryStats()
    lib.rbln_memory_stats(0, ctypes.byref(s))
    obs["c_allocated"] = [s.allocated.current, s.allocated.peak]
    obs["stats"] = dict(torch.rbln.memory_stats())
    del y
    print(json.dumps(obs))


@pytest.fixture(scope="module")
def obs():
    env = dict(os.environ, RBLN_DEVICE_MAP="[0,1]")
    p = subprocess.run([sys.executable, __file__], env=env, capture_output=True, text=True,
                       timeout=600)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_counts(obs):
    assert obs["device_count"] == 1 and obs["physical_device_count"] == 2
    assert obs["c_counts"] == [1, 2]


def test_only_device_zero(obs):
    assert "device 1 does not exist (1 device)" in obs["set_device_1"]


def test_sharded_ops(obs):
    assert obs["add_ok"] and obs["mm_ok"] and obs["sum_ok"]


def test_peak_is_a_value_that_happened(obs):
    cur = obs["currents"]
    assert cur[1] - cur[0] == 8192 and cur[2] - cur[0] == 8192
    assert obs["max_memory_allocated"] == max(cur)


def test_stats_equal_the_c_api(obs):
    assert obs["stats"]["allocated.current"] == obs["c_allocated"][0] == obs["currents"][2]
    assert obs["stats"]["allocated.peak"] == obs["c_allocated"][1]


if __name__ == "__main__":
    child()
