# SPDX-License-Identifier: MIT
"""ctypes bindings of librbln, the one implementation of torch.rbln.

The library is the very librbln.so the _torch_rbln extension is linked to
(it tells its path): loading another copy would give Python a second
device registry, a second caching allocator and a second per-thread
current device that the extension's tensors and device guard never see.
"""

import ctypes

import _torch_rbln
import torch

# rbln_status (rbln/rbln.h)
OK = 0
ERROR_INVALID = -1
ERROR_NO_DEVICE = -2
ERROR_OUT_OF_MEMORY = -3
ERROR_DEVICE = -4
ERROR_BUSY = -5
ERROR_UNSUPPORTED = -6
ERROR_CAPTURE = -7
ERROR_TIMEOUT = -8

# rbln_dtype, in the order of its enum.
DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int8)


class DeviceGuard(ctypes.Structure):
    _fields_ = [("previous", ctypes.c_int), ("status", ctypes.c_int)]


class MemoryStat(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int64)
                for name in ("current", "peak", "total_allocated", "total_freed")]


class MemoryStats(ctypes.Structure):
    _fields_ = [
        ("allocated", MemoryStat),
        ("reserved", MemoryStat),
        ("active", MemoryStat),
        ("cached", MemoryStat),
        ("num_alloc_retries", ctypes.c_int64),
        ("num_ooms", ctypes.c_int64),
        ("num_device_alloc", ctypes.c_int64),
        ("num_device_free", ctypes.c_int64),
        ("lazy_host_bytes", ctypes.c_int64),
        ("lazy_tensors", ctypes.c_int64),
        ("lazy_materializations", ctypes.c_int64),
        ("staging", MemoryStat),
    ]


EXPLAIN_SIGNALS = 3


class ExplainVerdict(ctypes.Structure):
    _fields_ = [
        ("clean", ctypes.c_bool),
        ("nreasons", ctypes.c_size_t),
        ("reasons", ctypes.c_char_p * EXPLAIN_SIGNALS),
    ]


lib = ctypes.CDLL(_torch_rbln.librbln_path())

_int = ctypes.c_int
_i64 = ctypes.c_int64
_size = ctypes.c_size_t
_bool = ctypes.c_bool
_str = ctypes.c_char_p
_ptr = ctypes.c_void_p

_PROTOTYPES = {
    "rbln_last_error": (_str, []),
    "rbln_last_status": (_int, []),
    "rbln_status_name": (_str, [_int]),
    "rbln_is_available": (_bool, []),
    "rbln_device_count": (_int, []),
    "rbln_physical_device_count": (_int, []),
    "rbln_device_summary": (_i64, [ctypes.c_char_p, _size]),
    "rbln_current_device": (_int, []),
    "rbln_set_device": (_int, [_int]),
    "rbln_device_enter": (DeviceGuard, [_int]),
    "rbln_device_exit": (None, [ctypes.POINTER(DeviceGuard)]),
    "rbln_synchronize": (_int, [_int]),
    "rbln_empty_cache": (_int, [_int]),
    "rbln_memory_allocated": (_i64, [_int]),
    "rbln_memory_reserved": (_i64, [_int]),
    "rbln_max_memory_allocated": (_i64, [_int]),
    "rbln_max_memory_reserved": (_i64, [_int]),
    "rbln_memory_stats": (_int, [_int, ctypes.POINTER(MemoryStats)]),
    "rbln_memory_stats_entry": (_bool, [ctypes.POINTER(MemoryStats), _size,
                                        ctypes.POINTER(_str), ctypes.POINTER(_i64)]),
    "rbln_reset_peak_memory_stats": (_int, [_int]),
    "rbln_reset_accumulated_memory_stats": (_int, [_int]),
    "rbln_offload_enter": (_int, []),
    "rbln_offload_exit": (_int, []),
    "rbln_offload_active": (_bool, []),
    "rbln_amp_supported_dtypes": (_size, [ctypes.POINTER(_int), _size]),
    "rbln_explain_begin": (_ptr, [_bool]),
    "rbln_explain_end": (_int, [_ptr]),
    "rbln_explain_report": (_str, [_ptr]),
    "rbln_explain_verdict": (_int, [_ptr, ctypes.POINTER(ExplainVerdict)]),
    # char *: a c_void_p so that it can be given back to free().
    "rbln_explain_dump_json": (_ptr, [_ptr]),
    "rbln_explain_free": (None, [_ptr]),
    "rbln_graph_capture_begin": (_int, [_int]),
    "rbln_graph_capture_end": (_int, [ctypes.POINTER(_ptr)]),
    "rbln_graph_capturing": (_int, []),
    "rbln_graph_replay": (_int, [_ptr]),
    "rbln_graph_ops": (_i64, [_ptr]),
    "rbln_graph_free": (None, [_ptr]),
    "rbln_memory_record_history": (_int, [_int, _bool, _bool, _size]),
    "rbln_memory_snapshot": (_int, [_int, ctypes.POINTER(_ptr)]),
    "rbln_memory_snapshot_free": (None, [_ptr]),
    "rbln_memory_snapshot_json": (_ptr, [_ptr]),
    "rbln_memory_dump_snapshot": (_int, [_int, _str]),
}

for _name, (_restype, _argtypes) in _PROTOTYPES.items():
    _fn = getattr(lib, _name)
    _fn.restype = _restype
    _fn.argtypes = _argtypes

_libc = ctypes.CDLL(None)
_libc.free.restype = None
_libc.free.argtypes = [_ptr]


def last_error():
    return lib.rbln_last_error().decode(errors="replace")


def error(status, what=None):
    """The Python exception for a failed librbln call, with librbln's message."""
    msg = last_error() or lib.rbln_status_name(status).decode()
    if what:
        msg = f"{what}: {msg}"
    # Bad arguments are refused in Python, with torch's ValueError, before
    # librbln sees them; what librbln refuses is a RuntimeError, as
    # torch.cuda's errors are (OutOfMemoryError is one).
    if status == ERROR_OUT_OF_MEMORY:
        return torch.OutOfMemoryError(msg)
    return RuntimeError(msg)


def failed(what=None):
    """The exception for a call that failed without returning its status (NULL)."""
    return error(lib.rbln_last_status(), what)


def check(status, what=None):
    """Raises for a negative status (or int64 sentinel), else returns it."""
    if status < 0:
        raise error(status, what)
    return status


def take_string(ptr):
    """A malloc'ed C string as str, freed."""
    try:
        return ctypes.string_at(ptr).decode()
    finally:
        _libc.free(ptr)
