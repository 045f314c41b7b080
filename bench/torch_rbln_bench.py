# SPDX-License-Identifier: MIT
"""torch.rbln's cost: a one-element add through torch against librbln's C API.

Usage: torch_rbln_bench.py LIBRBLN_ADD1_BENCH

The C API's add runs in this process, from the library given
(rbln_add1_bench.c: adds queued, each result freed, one synchronize per
round); the same op through torch (`c = a + b` on rbln tensors of one f32
element, each result dropped, one synchronize per round) runs in rounds
between its rounds. Each side's time is its fastest of 7 rounds of 500
after a warm-up round; the ratio is the torch layer's cost (target: at
most 1.5). torch on the CPU is shown for scale.
"""

import ctypes
import sys
import time

import torch
import torch_rbln  # noqa: F401

ROUNDS = 7
N = 500


def torch_round(a, b, sync):
    start = time.perf_counter_ns()
    for _ in range(N):
        c = a + b  # noqa: F841
    sync()
    return (time.perf_counter_ns() - start) / N


def main():
    c_api = ctypes.CDLL(sys.argv[1])
    c_api.rbln_add1_round.restype = ctypes.c_double
    c_api.rbln_add1_round.argtypes = [ctypes.c_int]
    a = torch.ones(1, device="rbln")
    b = torch.ones(1, device="rbln")
    c_ns, rbln_ns = [], []
    with torch.rbln.explain() as region:
        for r in range(ROUNDS + 1):
            c = c_api.rbln_add1_round(N)
            t = torch_round(a, b, torch.rbln.synchronize)
            if c < 0:
                sys.exit("torch_rbln_bench: the C API's round failed")
            if r:  # the first round compiles and warms up
                c_ns.append(c)
                rbln_ns.append(t)
    dump = region.dump()["dispatch"]
    # Only the first add compiles (a new process): the rest are warm hits.
    assert dump["cpu_fallback"]["count"] == 0 and dump["recompile"]["count"] <= 1, dump
    x, y = torch.ones(1), torch.ones(1)
    cpu_ns = min(torch_round(x, y, lambda: None) for _ in range(ROUNDS))
    print(f"one-element add through torch on rbln: {min(rbln_ns) / 1000:.1f} us")
    print(f"the same warm-hit add through librbln's C API: {min(c_ns) / 1000:.1f} us")
    print(f"torch / C API: {min(rbln_ns) / min(c_ns):.2f} (target: at most 1.5)")
    print(f"torch on the CPU, for scale: {cpu_ns / 1000:.2f} us")


if __name__ == "__main__":
    main()
