# SPDX-License-Identifier: MIT
"""torch.rbln: the RBLN NPU as a PyTorch device.

Importing this package makes "rbln" a PyTorch device (PrivateUse1 renamed):
the _torch_rbln extension registers the kernels, the allocator (librbln's
caching allocator) and the device guard (librbln's current device), and
this package becomes the device module torch.rbln with the functions of
the RBLN PyTorch API. Everything here is a thin layer over librbln.
"""

import sys

import torch

# The name first: the extension's registrations and torch.device("rbln")
# need it. Renaming again to the same name is allowed (an import after
# torch's device-backend autoload did it).
torch.utils.rename_privateuse1_backend("rbln")

import _torch_rbln  # noqa: E402,F401  registers kernels, allocator and guard at load

from ._amp import get_amp_supported_dtype  # noqa: E402
from ._device import (  # noqa: E402
    current_device,
    device,
    device_count,
    device_of,
    is_available,
    physical_device_count,
    set_device,
    synchronize,
)
from . import memory  # noqa: E402,F401  torch.rbln.memory: snapshots and history
from ._explain import RBLNExplain, RBLNProfile, explain, profile  # noqa: E402
from ._graph import RBLNGraph, graph, is_current_stream_capturing  # noqa: E402
from ._memory import (  # noqa: E402
    empty_cache,
    max_memory_allocated,
    max_memory_reserved,
    memory_allocated,
    memory_reserved,
    memory_stats,
    offload,
    reset_accumulated_memory_stats,
    reset_peak_memory_stats,
)

__all__ = [
    "RBLNExplain",
    "RBLNGraph",
    "RBLNProfile",
    "current_device",
    "device",
    "device_count",
    "device_of",
    "empty_cache",
    "explain",
    "get_amp_supported_dtype",
    "graph",
    "is_current_stream_capturing",
    "is_available",
    "manual_seed",
    "manual_seed_all",
    "max_memory_allocated",
    "max_memory_reserved",
    "memory_allocated",
    "memory_reserved",
    "memory",
    "memory_stats",
    "offload",
    "physical_device_count",
    "profile",
    "reset_accumulated_memory_stats",
    "reset_peak_memory_stats",
    "set_device",
    "synchronize",
]


# torch.manual_seed() seeds every device module that has these two, and
# warns about those that lack them. rbln has no generator of its own: its
# random tensors are drawn by the CPU generator (the CPU fallback), which
# torch.manual_seed() seeds already.
def _is_in_bad_fork():
    return False


def manual_seed(seed):
    """Nothing to seed: rbln's random numbers come from torch's CPU generator."""


def manual_seed_all(seed):
    """Nothing to seed: rbln's random numbers come from torch's CPU generator."""


def _register():
    """Makes this package torch.rbln and adds the generated rbln methods, once."""
    this = sys.modules[__name__]
    current = getattr(torch, "rbln", None)
    if current is None:
        torch._register_device_module("rbln", this)
    elif current is not this:
        raise RuntimeError(f"torch.rbln is already registered as {current!r}")
    # Each generated method refuses to be added twice.
    torch.utils.generate_methods_for_privateuse1_backend(
        for_tensor=not hasattr(torch.Tensor, "is_rbln"),
        for_module=not hasattr(torch.nn.Module, "rbln"),
        for_packed_sequence=not hasattr(torch.nn.utils.rnn.PackedSequence, "is_rbln"),
        for_storage=not hasattr(torch.UntypedStorage, "is_rbln"),
    )


_register()


def _autoload():
    """The entry point of torch's device-backend autoload: importing this package did the work."""
