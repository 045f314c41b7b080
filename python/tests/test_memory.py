# SPDX-License-Identifier: MIT
"""torch.rbln's memory statistics: torch tensors seen by librbln's C API."""

import collections
import ctypes
import gc
import os

import pytest
import torch

from torch_rbln._lib import MemoryStats, lib

TWO = torch.rbln.device_count() >= 2

SEED_KEYS = [
    "allocated.current", "allocated.peak", "allocated.total_allocated", "allocated.total_freed",
    "reserved.current", "reserved.peak", "reserved.total_allocated", "reserved.total_freed",
    "active.current", "active.peak",
    "cached.current", "cached.peak",
    "num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free",
]


def c_stats(device=0):
    """memory_stats() as librbln's C API reports it, read through the struct's fields."""
    s = MemoryStats()
    assert lib.rbln_memory_stats(device, ctypes.byref(s)) == 0, lib.rbln_last_error()
    out = {}
    for group in ("allocated", "reserved"):
        for f in ("current", "peak", "total_allocated", "total_freed"):
            out[f"{group}.{f}"] = getattr(getattr(s, group), f)
    for group in ("active", "cached"):
        for f in ("current", "peak"):
            out[f"{group}.{f}"] = getattr(getattr(s, group), f)
    for f in ("num_alloc_retries", "num_ooms", "num_device_alloc", "num_device_free"):
        out[f] = getattr(s, f)
    out["lazy.host_bytes"] = s.lazy_host_bytes
    out["lazy.tensors"] = s.lazy_tensors
    out["lazy.materializations"] = s.lazy_materializations
    for f in ("current", "peak", "total_allocated", "total_freed"):
        out[f"staging.{f}"] = getattr(s.staging, f)
    return out


@pytest.fixture(autouse=True)
def clean():
    """No tensor of another test holds device memory any more."""
    gc.collect()
    torch.rbln.synchronize()


def test_keys():
    stats = torch.rbln.memory_stats()
    assert type(stats) is collections.OrderedDict
    assert list(stats)[:len(SEED_KEYS)] == SEED_KEYS
    assert list(stats)[len(SEED_KEYS):] == ["lazy.host_bytes", "lazy.tensors", "lazy.materializations",
                                            "staging.current", "staging.peak",
                                            "staging.total_allocated", "staging.total_freed"]
    assert all(type(v) is int for v in stats.values())


def test_stats_equal_the_c_api_after_creating_and_freeing():
    before = c_stats()
    assert torch.rbln.memory_stats() == before
    x = torch.ones(1000, device="rbln")  # lazy: host memory only
    y = x + 1  # a device op: x goes to device memory, y is made there
    torch.rbln.synchronize()
    during = c_stats()
    assert torch.rbln.memory_stats() == during
    # allocated counts the bytes tensors asked for: two of 4000 bytes.
    assert during["allocated.current"] - before["allocated.current"] == 8000
    assert during["allocated.total_allocated"] - before["allocated.total_allocated"] == 8000
    assert during["active.current"] - before["active.current"] == 2 * 4096  # 512-byte blocks
    assert during["reserved.current"] >= during["active.current"]
    assert torch.equal(y.cpu(), torch.full((1000,), 2.0))
    del x, y
    gc.collect()
    torch.rbln.synchronize()
    after = c_stats()
    assert torch.rbln.memory_stats() == after
    assert after["allocated.current"] == before["allocated.current"]
    assert after["allocated.total_freed"] - before["allocated.total_freed"] == 8000
    # Freed blocks stay in the cache.
    assert after["reserved.current"] == during["reserved.current"]
    assert after["cached.current"] == during["cached.current"] + 8192


def test_scalar_functions_equal_the_c_api():
    x = torch.ones(300, 300, device="rbln")
    y = x * 2
    torch.rbln.synchronize()
    s = torch.rbln.memory_stats()
    assert torch.rbln.memory_allocated() == lib.rbln_memory_allocated(0) == s["allocated.current"]
    assert torch.rbln.memory_reserved() == lib.rbln_memory_reserved(0) == s["reserved.current"]
    assert torch.rbln.max_memory_allocated() == lib.rbln_max_memory_allocated(0) == s["allocated.peak"]
    assert torch.rbln.max_memory_reserved() == lib.rbln_max_memory_reserved(0) == s["reserved.peak"]
    assert s["allocated.current"] >= 2 * 300 * 300 * 4
    for d in (0, "rbln:0", "rbln", torch.device("rbln:0"), torch.device("rbln")):
        assert torch.rbln.memory_allocated(d) == s["allocated.current"], d
        assert torch.rbln.memory_stats(d) == s, d
    del x, y


def test_lazy_allocation():
    before = c_stats()
    x = torch.empty(1024, device="rbln")
    lazy = c_stats()
    # Created: host memory only, counted apart from device memory.
    assert lazy["allocated.current"] == before["allocated.current"]
    assert lazy["lazy.tensors"] == before["lazy.tensors"] + 1
    assert lazy["lazy.host_bytes"] == before["lazy.host_bytes"] + 4096
    assert torch.rbln.memory_stats()["lazy.tensors"] == lazy["lazy.tensors"]
    x.fill_(1.0)  # may stay in host memory: nothing needs the device yet
    y = x + 2.0  # a device op: x moves to device memory, y is made there
    torch.rbln.synchronize()
    used = c_stats()
    assert used["allocated.current"] == before["allocated.current"] + 2 * 4096
    assert used["lazy.tensors"] == before["lazy.tensors"]
    assert used["lazy.host_bytes"] == before["lazy.host_bytes"]
    assert used["lazy.materializations"] == before["lazy.materializations"] + 1
    assert torch.equal(y.cpu(), torch.full((1024,), 3.0))
    assert torch.rbln.memory_stats() == used
    del y
    del x


@pytest.mark.skipif(not TWO, reason="needs two devices")
def test_devices_are_counted_apart():
    before0, before1 = c_stats(0), c_stats(1)
    x = torch.ones(2048, device="rbln:1")
    y = x + x
    torch.rbln.synchronize(1)
    assert c_stats(0)["allocated.current"] == before0["allocated.current"]
    assert torch.rbln.memory_allocated(1) == c_stats(1)["allocated.current"]
    assert torch.rbln.memory_allocated(1) - before1["allocated.current"] == 2 * 2048 * 4
    assert torch.rbln.memory_stats("rbln:1") == c_stats(1)
    del x, y


def test_reset_peak():
    big = torch.ones(1 << 18, device="rbln")
    big2 = big + 1
    torch.rbln.synchronize()
    del big, big2
    gc.collect()
    torch.rbln.synchronize()
    s = c_stats()
    assert s["allocated.peak"] > s["allocated.current"]
    torch.rbln.reset_peak_memory_stats()
    s = c_stats()
    for k in ("allocated", "reserved", "active", "cached"):
        assert s[f"{k}.peak"] == s[f"{k}.current"], k
    assert torch.rbln.max_memory_allocated() == s["allocated.current"]


def test_reset_accumulated():
    x = torch.ones(4096, device="rbln")
    y = x - 1
    torch.rbln.synchronize()
    s = c_stats()
    assert s["allocated.total_allocated"] > 0 and s["lazy.materializations"] > 0
    torch.rbln.reset_accumulated_memory_stats("rbln:0")
    s = c_stats()
    for k in ("allocated.total_allocated", "allocated.total_freed", "reserved.total_allocated",
              "reserved.total_freed", "num_alloc_retries", "num_ooms", "num_device_alloc",
              "num_device_free", "lazy.materializations"):
        assert s[k] == 0, k
    assert s["allocated.current"] >= 2 * 4096 * 4  # current stays
    assert torch.rbln.memory_stats() == s
    del x, y


def test_empty_cache():
    x = torch.ones(1 << 20, device="rbln")
    y = x + 1
    torch.rbln.synchronize()
    del x, y
    gc.collect()
    s = c_stats()
    assert s["cached.current"] >= 2 * (4 << 20)
    torch.rbln.empty_cache()
    after = c_stats()
    assert after["reserved.current"] < s["reserved.current"]
    assert after["num_device_free"] > s["num_device_free"]
    assert after["reserved.current"] == torch.rbln.memory_reserved()
    torch.rbln.empty_cache(0)
    torch.rbln.empty_cache("rbln:0")


FUNCTIONS = [
    torch.rbln.memory_stats, torch.rbln.memory_allocated, torch.rbln.memory_reserved,
    torch.rbln.max_memory_allocated, torch.rbln.max_memory_reserved, torch.rbln.empty_cache,
    torch.rbln.reset_peak_memory_stats, torch.rbln.reset_accumulated_memory_stats,
]


@pytest.mark.parametrize("fn", FUNCTIONS, ids=lambda f: f.__name__)
def test_unknown_device(fn):
    before = c_stats()
    with pytest.raises(RuntimeError, match="device 9 does not exist"):
        fn(9)
    with pytest.raises(RuntimeError, match="device 9 does not exist"):
        fn("rbln:9")
    with pytest.raises(ValueError, match="expected an rbln device"):
        fn("cpu")
    with pytest.raises(ValueError, match="expected an rbln device"):
        fn(torch.device("cuda", 0))
    assert c_stats() == before


def test_offload(tmp_path, monkeypatch):
    monkeypatch.setenv("RBLN_OFFLOAD_DIR", str(tmp_path))
    assert not lib.rbln_offload_active()
    with torch.rbln.offload():
        assert lib.rbln_offload_active()
        with torch.rbln.offload():
            assert lib.rbln_offload_active()
        assert lib.rbln_offload_active()  # only the outermost exit turns it off
        tensor = torch.zeros(1 << 20, device="rbln:0")  # offloaded
    assert not lib.rbln_offload_active()
    files = os.listdir(tmp_path)
    assert len(files) == 1 and os.path.getsize(tmp_path / files[0]) >= 4 << 20
    plain = torch.zeros(1 << 20, device="rbln:0")
    assert len(os.listdir(tmp_path)) == 1
    assert torch.equal((tensor + 1).cpu(), torch.ones(1 << 20))
    del tensor, plain
    gc.collect()
    assert os.listdir(tmp_path) == []


def test_offload_exits_on_an_exception():
    with pytest.raises(KeyError):
        with torch.rbln.offload():
            raise KeyError("x")
    assert not lib.rbln_offload_active()
