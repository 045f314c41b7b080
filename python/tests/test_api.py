# SPDX-License-Identifier: MIT
"""torch.rbln has every name of the seed, with the seed's signatures."""

import inspect

import pytest
import torch

import torch_rbln  # noqa: F401

# From shared/seed/rbln-pytorch-api.txt: name -> parameters (name, default).
EMPTY = inspect.Parameter.empty
SEED = {
    "device": [("device", EMPTY)],
    "device_of": [("obj", EMPTY)],
    "get_amp_supported_dtype": [],
    "is_available": [],
    "current_device": [],
    "device_count": [],
    "physical_device_count": [],
    "set_device": [("device", EMPTY)],
    "synchronize": [("device", None)],
    "empty_cache": [("device", None)],
    "memory_allocated": [("device", None)],
    "memory_reserved": [("device", None)],
    "max_memory_allocated": [("device", None)],
    "max_memory_reserved": [("device", None)],
    "memory_stats": [("device", None)],
    "reset_peak_memory_stats": [("device", None)],
    "reset_accumulated_memory_stats": [("device", None)],
    "offload": [],
    "explain": [("with_stack", False), ("trace", None)],
    "profile": [("with_stack", False), ("trace", None)],
}


@pytest.mark.parametrize("name", SEED)
def test_signature(name):
    fn = getattr(torch.rbln, name)
    assert callable(fn)
    params = [(p.name, p.default) for p in inspect.signature(fn).parameters.values()]
    assert params == SEED[name]
    assert name in torch.rbln.__all__


@pytest.mark.parametrize("name", ["device", "device_of", "RBLNExplain", "RBLNProfile"])
def test_classes(name):
    assert inspect.isclass(getattr(torch.rbln, name))


@pytest.mark.parametrize("method", ["report", "verdict", "dump"])
def test_explain_methods(method):
    params = inspect.signature(getattr(torch.rbln.RBLNExplain, method)).parameters
    assert list(params) == ["self"]
    assert getattr(torch.rbln.RBLNProfile, method) is getattr(torch.rbln.RBLNExplain, method)
