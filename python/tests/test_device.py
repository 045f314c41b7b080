# SPDX-License-Identifier: MIT
"""torch.rbln's device selection against librbln and /dev/accel."""

import glob
import os
import re
import threading
import warnings

import pytest
import torch

import torch_rbln
from torch_rbln._lib import lib

# Guests of the test suite have two emulated NPUs, or four that
# RBLN_DEVICE_MAP groups into logical devices.
NODES = sorted(glob.glob("/dev/accel/accel*"))
GROUPS = re.findall(r"\[[^\]]*\]", os.environ.get("RBLN_DEVICE_MAP", ""))
TWO = torch.rbln.device_count() >= 2


@pytest.fixture(autouse=True)
def device_zero():
    """Each test starts, and leaves, on device 0."""
    torch.rbln.set_device(0)
    yield
    assert torch.rbln.current_device() == 0
    torch.rbln.set_device(0)


def test_registered():
    assert torch.rbln is torch_rbln
    assert torch._C._get_privateuse1_backend_name() == "rbln"
    assert torch.device("rbln:1").type == "rbln"
    assert hasattr(torch.Tensor, "is_rbln") and hasattr(torch.Tensor, "rbln")
    assert hasattr(torch.nn.Module, "rbln") and hasattr(torch.UntypedStorage, "is_rbln")
    assert torch.get_device_module("rbln") is torch_rbln


def test_import_twice_is_harmless():
    import importlib

    importlib.reload(torch_rbln)
    assert torch.rbln.device_count() == lib.rbln_device_count()
    assert torch.ones(2, device="rbln").is_rbln


def test_counts():
    assert torch.rbln.physical_device_count() == len(NODES) >= 2
    assert torch.rbln.physical_device_count() == lib.rbln_physical_device_count()
    assert torch.rbln.device_count() == lib.rbln_device_count() == (len(GROUPS) or len(NODES))
    assert torch.rbln.is_available() is True


def test_set_device():
    last = torch.rbln.device_count() - 1
    torch.rbln.set_device(last)
    assert torch.rbln.current_device() == last == lib.rbln_current_device()
    for name in (0, "rbln:0", torch.device("rbln", 0), torch.device("rbln:0")):
        torch.rbln.set_device(last)
        torch.rbln.set_device(name)
        assert lib.rbln_current_device() == 0, name
    torch.rbln.set_device("rbln")  # the current device: changes nothing
    assert torch.rbln.current_device() == 0


def test_set_device_negative_is_a_noop():
    torch.rbln.set_device(-1)
    assert torch.rbln.current_device() == 0
    torch.rbln.set_device(-7)
    assert torch.rbln.current_device() == 0


@pytest.mark.parametrize("bad", [9, "rbln:9", torch.device("rbln", 9)])
def test_set_device_unknown(bad):
    with pytest.raises(RuntimeError, match="device 9 does not exist"):
        torch.rbln.set_device(bad)
    assert torch.rbln.current_device() == 0


@pytest.mark.parametrize("bad", [None, "cpu", torch.device("cpu"), "cuda:0", "rbln:x", "nonsense", 1.5,
                                 [0]])
def test_set_device_not_an_rbln_device(bad):
    with pytest.raises(ValueError, match="expected an rbln device"):
        torch.rbln.set_device(bad)
    assert torch.rbln.current_device() == 0


@pytest.mark.skipif(not TWO, reason="needs two devices")
def test_device_context():
    with torch.rbln.device(1) as d:
        assert torch.rbln.current_device() == 1
        assert torch.empty(2, device="rbln").device == torch.device("rbln:1")
        with torch.rbln.device("rbln:0"):
            assert torch.rbln.current_device() == 0
        assert torch.rbln.current_device() == 1
        with torch.rbln.device(torch.device("rbln:0")):
            assert lib.rbln_current_device() == 0
    assert d is not None
    assert torch.rbln.current_device() == 0


@pytest.mark.parametrize("noop", [None, -1, -5])
def test_device_context_noop(noop):
    torch.rbln.set_device(torch.rbln.device_count() - 1)
    with torch.rbln.device(noop):
        assert torch.rbln.current_device() == torch.rbln.device_count() - 1
        torch.rbln.set_device(0)  # a no-op context restores nothing
    assert torch.rbln.current_device() == 0


def test_device_context_restores_after_an_exception():
    last = torch.rbln.device_count() - 1
    with pytest.raises(KeyError):
        with torch.rbln.device(last):
            raise KeyError("x")
    assert torch.rbln.current_device() == 0


@pytest.mark.parametrize("bad", [9, "rbln:9", torch.device("rbln:9")])
def test_device_context_unknown(bad):
    with pytest.raises(RuntimeError, match="device 9 does not exist"):
        with torch.rbln.device(bad):
            pytest.fail("entered a device that does not exist")
    assert torch.rbln.current_device() == 0


@pytest.mark.parametrize("bad", ["cpu", torch.device("cpu"), torch.device("meta"), "x:0", 2.0])
def test_device_context_wrong_type(bad):
    with pytest.raises(ValueError, match="expected an rbln device"):
        torch.rbln.device(bad)


@pytest.mark.skipif(not TWO, reason="needs two devices")
def test_device_of():
    t = torch.tensor([2, 64], device="rbln:1")
    with torch.rbln.device_of(t):
        assert torch.rbln.current_device() == 1
        assert torch.zeros(3, device="rbln").device == torch.device("rbln:1")
    with torch.rbln.device_of(t.untyped_storage()):
        assert torch.rbln.current_device() == 1
    assert torch.rbln.current_device() == 0


def test_device_of_cpu_is_a_noop():
    last = torch.rbln.device_count() - 1
    torch.rbln.set_device(last)
    for obj in (torch.ones(2), torch.ones(2).untyped_storage(), object()):
        with torch.rbln.device_of(obj):
            assert torch.rbln.current_device() == last
    torch.rbln.set_device(0)


@pytest.mark.skipif(not TWO, reason="needs two devices")
def test_current_device_is_per_thread():
    seen = {}

    def other():
        seen["start"] = torch.rbln.current_device()
        torch.rbln.set_device(1)
        seen["after"] = torch.rbln.current_device()
        seen["tensor"] = torch.ones(1, device="rbln").device

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert seen == {"start": 0, "after": 1, "tensor": torch.device("rbln:1")}
    assert torch.rbln.current_device() == 0


@pytest.mark.skipif(not TWO, reason="needs two devices")
def test_torch_guard_is_librbln_current_device():
    # Work on another device goes through torch's device guard, which must
    # put librbln's current device back.
    x = torch.ones(4, device="rbln:1")
    y = (x + x).cpu()
    assert torch.equal(y, torch.full((4,), 2.0))
    assert lib.rbln_current_device() == 0


def test_tensor_methods():
    t = torch.arange(4.0).rbln()
    assert t.is_rbln and t.device == torch.device("rbln:0")
    assert torch.equal(t.cpu(), torch.arange(4.0))
    m = torch.nn.Linear(2, 2).rbln()
    assert m.weight.is_rbln
    assert not torch.ones(1).is_rbln


def test_synchronize():
    x = torch.arange(6.0, device="rbln").reshape(2, 3)
    y = (x * 3).to("cpu", non_blocking=True)
    torch.rbln.synchronize()
    assert torch.equal(y, torch.arange(6.0).reshape(2, 3) * 3)
    for d in (None, 0, "rbln:0", "rbln", torch.device("rbln:0")):
        torch.rbln.synchronize(d)


def test_synchronize_unknown():
    with pytest.raises(RuntimeError, match="device 9 does not exist"):
        torch.rbln.synchronize(9)
    with pytest.raises(ValueError, match="expected an rbln device"):
        torch.rbln.synchronize("cpu")


def test_tensor_on_unknown_device():
    with pytest.raises(RuntimeError, match="9"):
        torch.empty(2, device="rbln:9")
    assert torch.rbln.current_device() == 0


@pytest.mark.skipif(not TWO, reason="needs two devices")
def test_tensors_on_different_devices():
    a = torch.ones(2, device="rbln:0")
    b = torch.ones(2, device="rbln:1")
    with pytest.raises(RuntimeError, match="device"):
        a + b
    # Nothing corrupted: both still work on their own devices.
    assert torch.equal((a + a).cpu(), torch.full((2,), 2.0))
    assert torch.equal((b + b).cpu(), torch.full((2,), 2.0))


def test_manual_seed():
    # torch.manual_seed() asks the device module to seed it too: no warning,
    # and rbln's random numbers repeat with the seed.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        torch.manual_seed(42)
    a = torch.randn(16, device="rbln").cpu()
    torch.manual_seed(42)
    b = torch.randn(16, device="rbln").cpu()
    assert torch.equal(a, b)
