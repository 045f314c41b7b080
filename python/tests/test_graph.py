# SPDX-License-Identifier: MIT
"""torch.rbln.graph and RBLNGraph, as torch.cuda.graph and CUDAGraph.

Captured ops replay with whatever the captured inputs hold, bit for bit
what eager mode computes; what cannot be captured raises, names the op,
and leaves nothing behind; explain() sees replays.
"""

import inspect

import pytest
import torch
import torch_rbln  # noqa: F401


def step(x, w):
    return ((x @ w) * 0.5 + 1.0).relu() - x.sum(-1, keepdim=False).amax(-1) * 0


def on_device(t):
    """@t in device memory (a capture takes no operand still in host memory)."""
    return t.rbln() + 0


def test_replay_equals_eager_bit_for_bit():
    g = torch.Generator().manual_seed(1)
    w = on_device(torch.randn(16, 8, generator=g))
    x = on_device(torch.randn(4, 16, generator=g))
    graph = torch.rbln.RBLNGraph()
    with torch.rbln.graph(graph):
        a = x @ w
        b = (a * 0.5 + 1.0).relu()
        y = b - a.abs()
    assert graph.ops() >= 5
    for seed in range(3):
        new = torch.randn(4, 16, generator=torch.Generator().manual_seed(10 + seed))
        x.copy_(new)
        graph.replay()
        eager_a = new.rbln() @ w
        eager = (eager_a * 0.5 + 1.0).relu() - eager_a.abs()
        assert torch.equal(y.cpu(), eager.cpu())
    graph.reset()
    # The outputs are the caller's and stay readable after the graph goes.
    assert y.cpu().shape == (4, 8)


def test_replays_are_counted_not_recompiles():
    x = on_device(torch.ones(64))
    graph = torch.rbln.RBLNGraph()
    with torch.rbln.graph(graph):
        y = x * 3 + 1
    with torch.rbln.explain() as region:
        for _ in range(4):
            graph.replay()
        torch.rbln.synchronize()
    dump = region.dump()
    assert dump["graph_replay"]["count"] == 4
    assert dump["graph_replay"]["ops"] == 4 * graph.ops()
    assert dump["dispatch"]["recompile"]["count"] == 0
    assert torch.equal(y.cpu(), torch.full((64,), 4.0))


@pytest.mark.parametrize("what,fn", [
    ("a copy from the device to the host", lambda x: x.cpu()),
    ("item", lambda x: x[0].item()),
    ("CPU fallback", lambda x: x.exp()),
    ("synchronize", lambda x: torch.rbln.synchronize()),
])
def test_what_cannot_be_captured_raises(what, fn):
    x = on_device(torch.ones(8))
    before = torch.rbln.memory_allocated()
    graph = torch.rbln.RBLNGraph()
    with pytest.raises(RuntimeError) as err:
        with torch.rbln.graph(graph):
            y = x * 2  # noqa: F841
            fn(x)
    assert "captur" in str(err.value), str(err.value)
    assert not torch.rbln.is_current_stream_capturing()
    with pytest.raises(RuntimeError, match="nothing captured"):
        graph.replay()
    del y
    # Nothing left behind, and eager mode works again.
    assert torch.rbln.memory_allocated() == before
    assert torch.equal((x * 2).cpu(), torch.full((8,), 2.0))


def test_rejections():
    graph = torch.rbln.RBLNGraph()
    with pytest.raises(RuntimeError, match="nothing captured"):
        graph.replay()
    with pytest.raises(RuntimeError):
        with torch.rbln.graph(graph, device=9):
            pass
    x = on_device(torch.ones(2))
    with torch.rbln.graph(graph):
        x + x
        with pytest.raises(RuntimeError, match="captur"):
            torch.rbln.RBLNGraph().capture_begin()
    with pytest.raises(RuntimeError, match="captured already"):
        graph.capture_begin()
    with pytest.raises(ValueError):
        torch.rbln.graph(torch.rbln.RBLNGraph(), device="cpu").__enter__()


def test_memory_history_names_the_python_line():
    """With stacks, each allocation an op makes names the op's Python line first."""
    x = on_device(torch.ones(4096))
    torch.rbln.memory._record_memory_history(max_entries=1000)
    try:
        line = inspect.currentframe().f_lineno + 1
        y = x + x
        torch.rbln.synchronize()
        snap = torch.rbln.memory._snapshot()
    finally:
        torch.rbln.memory._record_memory_history(enabled=None)
    here = [b for s in snap["segments"] for b in s["blocks"]
            if b["state"] == "active_allocated" and b["frames"]
            and b["frames"][0]["filename"] == __file__]
    assert here and all(b["frames"][0]["line"] == line for b in here), snap["segments"]
    # y's shards: one block per member of a logical device.
    assert sum(b["requested_size"] for b in here) == y.nbytes
    events = [e for trace in snap["device_traces"] for e in trace
              if e["action"] == "alloc" and e["frames"] and e["frames"][0]["filename"] == __file__]
    assert events and all(e["frames"][0]["line"] == line for e in events)


def test_memory_snapshot_and_history():
    torch.rbln.memory._record_memory_history(max_entries=1000)
    try:
        x = on_device(torch.ones(1024))
        snap = torch.rbln.memory._snapshot()
    finally:
        torch.rbln.memory._record_memory_history(enabled=None)
    assert snap["segments"], snap.keys()
    sizes = [b["size"] for s in snap["segments"] for b in s["blocks"]
             if b["state"] == "active_allocated"]
    # On a logical device each member holds its shard.
    assert sum(sizes) >= x.nbytes
    actions = {e["action"] for trace in snap["device_traces"] for e in trace}
    assert "alloc" in actions
    with pytest.raises(ValueError):
        torch.rbln.memory._record_memory_history(enabled="sometimes")
    with pytest.raises(RuntimeError):
        torch.rbln.memory._snapshot(device=9)
