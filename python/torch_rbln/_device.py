# SPDX-License-Identifier: MIT
"""Device selection: what torch.rbln.device(), set_device() and the rest name.

librbln keeps the current device per thread, and the extension's device
guard is that same current device: selecting one here is what torch's
device guard sees, and the reverse.
"""

import ctypes
import operator

import torch

from ._lib import check, lib

CURRENT = -1  # librbln's "the current device"


def c_index(idx):
    """For librbln: None (the current device) is CURRENT."""
    return CURRENT if idx is None else idx


def _type_error(device, what):
    return ValueError(
        f"{what}: expected an rbln device (an int, \"rbln\", \"rbln:N\" or a torch.device "
        f"of type 'rbln'), got {device!r}")


def device_index(device, what, *, optional=True):
    """The index @device names; None for the current one (None, "rbln", torch.device("rbln")).

    Indices are not checked against the devices here: librbln does that,
    with a message naming how many there are. Other device types are a
    ValueError, as in torch.cuda.
    """
    if device is None:
        if optional:
            return None
        raise _type_error(device, what)
    if isinstance(device, str):
        try:
            device = torch.device(device)
        except RuntimeError as err:
            raise _type_error(device, what) from err
    if isinstance(device, torch.device):
        if device.type != "rbln":
            raise _type_error(device, what)
        return device.index
    if isinstance(device, bool):
        raise _type_error(device, what)
    try:
        return operator.index(device)
    except TypeError:
        raise _type_error(device, what) from None


def _no_device_error():
    # rbln_current_device() only says -1; the summary says why (no /dev/accel, ...).
    n = lib.rbln_device_summary(None, 0)
    if n < 0:
        return check(n)
    raise RuntimeError("no RBLN device")


def is_available():
    """True if at least one RBLN device can be used."""
    return bool(lib.rbln_is_available())


def device_count():
    """The number of RBLN devices: logical devices when RBLN_DEVICE_MAP or RBLN_NPUS_PER_DEVICE group NPUs."""
    return lib.rbln_device_count()


def physical_device_count():
    """The number of physical RBLN devices, whatever the grouping into logical devices."""
    return lib.rbln_physical_device_count()


def current_device():
    """The calling thread's current RBLN device (0 until set)."""
    d = lib.rbln_current_device()
    if d < 0:
        _no_device_error()
    return d


def set_device(device):
    """Makes @device (int, "rbln:N", "rbln" or torch.device) the calling thread's current device.

    A negative index is a no-op, as in torch.cuda.set_device(); a device
    that does not exist raises RuntimeError.
    """
    d = device_index(device, "torch.rbln.set_device", optional=False)
    if d is not None and d >= 0:
        check(lib.rbln_set_device(d))


def synchronize(device=None):
    """Waits for all the work queued on @device (default: the current device)."""
    check(lib.rbln_synchronize(c_index(device_index(device, "torch.rbln.synchronize"))))


class device:
    """Context manager that changes the selected device.

    ``device(None)`` and a negative index are no-ops; a device that does not
    exist raises RuntimeError on entering. Leaving restores the device that
    was current on entering, in the thread that entered. librbln's device
    guard does both.
    """

    def __init__(self, device):
        # None: no-op; "rbln": the current device, whichever it is on entering.
        self.idx = -1 if device is None else device_index(device, "torch.rbln.device")
        self.guard = None

    def __enter__(self):
        idx = current_device() if self.idx is None else self.idx
        guard = lib.rbln_device_enter(idx)
        check(guard.status)
        self.guard = guard
        return self

    def __exit__(self, *exc):
        if self.guard is not None:
            lib.rbln_device_exit(ctypes.byref(self.guard))
            self.guard = None
        return False


class device_of(device):
    """Context manager that selects the device of a tensor or storage.

    A no-op for an object that is not on an RBLN device.
    """

    def __init__(self, obj):
        d = getattr(obj, "device", None)
        if isinstance(d, torch.device) and d.type == "rbln":
            super().__init__(d)
        else:
            super().__init__(None)
