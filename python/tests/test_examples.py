# SPDX-License-Identifier: MIT
"""examples/explain.py runs and says what it says it says."""

import importlib.util
import os

import pytest
import torch

import torch_rbln  # noqa: F401

PATH = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "explain.py")


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("explain_example", PATH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_main(example, capsys):
    assert example.main() == 0
    out = capsys.readouterr().out
    assert out.count("Region wall time") == 3
    assert "== varying batch sizes (8 steps" in out and "== steady batch size (8 steps" in out


def test_varying_then_steady(example, capsys):
    torch.manual_seed(1)
    model = example.MLP().rbln()
    varying = example.steps("varying", model, [11, 12, 13])
    steady = example.steps("steady", model, [13, 13, 13])
    capsys.readouterr()
    v, s = varying.dump(), steady.dump()
    # Each new batch size recompiles the device ops; a steady one reuses them.
    assert v["dispatch"]["recompile"]["count"] >= 3
    assert s["dispatch"]["recompile"]["count"] == 0
    assert s["dispatch"]["warm_hit"]["count"] >= 3
    # What is left: softmax on the CPU, named with the example's line.
    assert s["dispatch"]["cpu_fallback"]["count"] >= 3
    assert any("softmax" in f["op"] for f in s["fallbacks_by_op"])
    assert any("explain.py:" in site["site"]
               for f in s["fallbacks_by_op"] if "softmax" in f["op"] for site in f["sites"])
    assert not steady.verdict()["clean"]
