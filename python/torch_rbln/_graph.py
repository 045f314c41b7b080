# SPDX-License-Identifier: MIT
"""torch.rbln.graph and RBLNGraph: librbln's graphs, as torch.cuda.graph and CUDAGraph.

Ops issued on the capturing thread inside `with torch.rbln.graph(g):` are
recorded by librbln, not run; g.replay() submits them all again as one
job (or as few as a command buffer allows), asynchronously. The tensors
they touch keep their device memory for the graph's life: copy new
inputs into the captured input tensors (x.copy_(new)) before a replay,
and read the captured outputs after it. What cannot be captured (a copy
to the host, .item(), a CPU fallback, a synchronize) raises and ends the
capture with nothing kept (docs/graphs.md).
"""

import ctypes

from . import _device
from ._lib import check, lib


class RBLNGraph:
    """A captured sequence of rbln ops (torch.cuda.CUDAGraph's counterpart)."""

    def __init__(self):
        self._graph = None
        self._device = None

    def capture_begin(self, device=None):
        """Starts capturing this thread's ops on @device (default: the current one)."""
        if self._graph is not None:
            raise RuntimeError("RBLNGraph: this graph was captured already; make a new one")
        index = _device.device_index(device, "torch.rbln.graph")
        check(lib.rbln_graph_capture_begin(_device.c_index(index)), "torch.rbln.graph")
        self._device = index

    def capture_end(self):
        """Ends the capture: the graph holds it, or the capture's error is raised."""
        graph = ctypes.c_void_p()
        check(lib.rbln_graph_capture_end(ctypes.byref(graph)), "torch.rbln.graph")
        self._graph = graph

    def replay(self):
        """Submits the captured ops again, in order with the device's other work."""
        if self._graph is None:
            raise RuntimeError("RBLNGraph.replay: nothing captured")
        check(lib.rbln_graph_replay(self._graph), "RBLNGraph.replay")

    def ops(self):
        """How many ops the graph replays."""
        return lib.rbln_graph_ops(self._graph) if self._graph is not None else 0

    def reset(self):
        """Frees the graph and what it holds (waiting for its replays in flight)."""
        if self._graph is not None:
            lib.rbln_graph_free(self._graph)
            self._graph = None

    def __del__(self):
        self.reset()


class graph:
    """Context manager capturing the ops of its body into @rbln_graph.

    As torch.cuda.graph: `with torch.rbln.graph(g): y = model(x)`, then
    `g.replay()`. A failed body ends the capture and re-raises.
    """

    def __init__(self, rbln_graph, device=None):
        self.rbln_graph = rbln_graph
        self.device = device

    def __enter__(self):
        self.rbln_graph.capture_begin(self.device)
        return self.rbln_graph

    def __exit__(self, exc_type, exc, tb):
        try:
            self.rbln_graph.capture_end()
        except RuntimeError:
            if exc_type is None:
                raise
        return False


def is_current_stream_capturing():
    """True while this thread captures a graph (torch.cuda's name for it)."""
    return lib.rbln_graph_capturing() >= 0
