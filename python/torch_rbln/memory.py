# SPDX-License-Identifier: MIT
"""torch.rbln.memory: snapshots and allocation history, as torch.cuda.memory.

    torch.rbln.memory._record_memory_history()          # start
    ...
    snapshot = torch.rbln.memory._snapshot()            # a dict
    torch.rbln.memory._dump_snapshot("snapshot.json")   # rbln-memviz draws it
    torch.rbln.memory._record_memory_history(enabled=None)  # stop

The snapshot is librbln's (rbln_memory_snapshot(3)), in PyTorch's layout:
"segments" with their "blocks", and "device_traces" with the recorded
events. With stacks, an allocation an op makes names the op's Python line
first ({"filename": "model.py", "line": 12}), then where librbln was called
from (the extension, for torch code).
"""

import ctypes
import json

from . import _device
from ._lib import check, failed, lib, take_string

# torch.cuda.memory's default.
_MAX_ENTRIES = 100000


def _record_memory_history(enabled="all", context="all", stacks="all",
                           max_entries=_MAX_ENTRIES, device=None):
    """Starts (enabled="all" or "state") or stops (enabled=None) recording the allocator's events.

    With stacks="all" or "python" (and context not None) each event has its call site.
    """
    if enabled not in (None, "all", "state"):
        raise ValueError(f"torch.rbln.memory._record_memory_history: enabled={enabled!r} "
                         "(None, 'state' or 'all')")
    if stacks not in ("all", "python"):
        raise ValueError(f"torch.rbln.memory._record_memory_history: stacks={stacks!r} "
                         "('python' or 'all')")
    idx = _device.c_index(_device.device_index(device, "torch.rbln.memory._record_memory_history"))
    check(lib.rbln_memory_record_history(idx, enabled is not None, context is not None,
                                         max(1, int(max_entries))),
          "torch.rbln.memory._record_memory_history")


def _snapshot(device=None):
    """Every segment and block of @device's allocator, and its recorded history, as a dict."""
    idx = _device.c_index(_device.device_index(device, "torch.rbln.memory._snapshot"))
    snap = ctypes.c_void_p()
    check(lib.rbln_memory_snapshot(idx, ctypes.byref(snap)), "torch.rbln.memory._snapshot")
    try:
        text = lib.rbln_memory_snapshot_json(snap)
        if not text:
            raise failed("torch.rbln.memory._snapshot")
        return json.loads(take_string(text))
    finally:
        lib.rbln_memory_snapshot_free(snap)


def _dump_snapshot(filename="dump_snapshot.json", device=None):
    """The snapshot as JSON in @filename (what rbln-memviz draws)."""
    idx = _device.c_index(_device.device_index(device, "torch.rbln.memory._dump_snapshot"))
    check(lib.rbln_memory_dump_snapshot(idx, str(filename).encode()),
          "torch.rbln.memory._dump_snapshot")
