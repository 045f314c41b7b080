# SPDX-License-Identifier: MIT
"""torch.rbln's cost: a one-element add through torch against librbln's C API.

Usage: torch_rbln_bench.py C_ADD_NS

C_ADD_NS is rbln_add1_bench's time per warm-hit add through the C API,
measured in the same guest run just before. The same op through torch
(`c = a + b` on rbln tensors of one f32 element, each result dropped,
one synchronize per round) is timed the same way: fastest of 5 rounds of
500 after a warm-up round. The ratio is the torch layer's cost (target:
at most 1.5). torch on the CPU is shown for scale.
"""

import sys
import time

import torch
import torch_rbln  # noqa: F401


def per_add(a, b, sync):
    best = None
    for r in range(6):
        start = time.perf_counter_ns()
        for _ in range(500):
            c = a + b  # noqa: F841
        sync()
        ns = (time.perf_counter_ns() - start) / 500
        if r and (best is None or ns < best):
            best = ns
    return best


def main():
    c_ns = float(sys.argv[1])
    a = torch.ones(1, device="rbln")
    b = torch.ones(1, device="rbln")
    with torch.rbln.explain() as region:
        rbln_ns = per_add(a, b, torch.rbln.synchronize)
    dump = region.dump()["dispatch"]
    # Only the first add compiles (a new process): the rest are warm hits.
    assert dump["cpu_fallback"]["count"] == 0 and dump["recompile"]["count"] <= 1, dump
    x, y = torch.ones(1), torch.ones(1)
    cpu_ns = per_add(x, y, lambda: None)
    print(f"one-element add through torch on rbln: {rbln_ns / 1000:.1f} us")
    print(f"the same warm-hit add through librbln's C API: {c_ns / 1000:.1f} us")
    print(f"torch / C API: {rbln_ns / c_ns:.2f} (target: at most 1.5)")
    print(f"torch on the CPU, for scale: {cpu_ns / 1000:.2f} us")


if __name__ == "__main__":
    main()
