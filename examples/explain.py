#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""explain - torch.rbln.explain() around a small MLP's forward pass

The seed's example, in Python, then what to do with it:

    logits = relu(x @ w1 + b1) @ w2 + b2      on the NPU
    probs  = softmax(logits)                  on the CPU (no softmax in the ISA)

First the seed's region around one forward pass; then eight steps with a
batch size that changes every step, where each new shape recompiles the
device ops; then eight with a steady batch, where the device ops are warm
hits and what is left is the softmax's CPU fallback and its host bounces,
which the report names with the Python line that caused them.

Run it in the torch root on a machine (or guest) with an rbln device:
    tools/trixie-run python3 examples/explain.py
with build/python and python/ on PYTHONPATH (docs/python.md).
"""

import sys

import torch
import torch_rbln  # noqa: F401  makes "rbln" a torch device (torch's autoload does it too)

IN, HIDDEN, OUT = 64, 128, 10


class MLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(IN, HIDDEN)
        self.fc2 = torch.nn.Linear(HIDDEN, OUT)

    def forward(self, x):
        logits = self.fc2(torch.relu(self.fc1(x)))
        return torch.softmax(logits, dim=-1)


def steps(title, model, batches):
    # with_stack: each signal names the line that caused it.
    with torch.rbln.explain(with_stack=True) as p:
        checksum = 0.0
        for i, batch in enumerate(batches):
            x = torch.rand(batch, IN, generator=torch.Generator().manual_seed(i)).to("rbln")
            checksum += model(x)[0, 0].item()
    print(f"== {title} ({len(batches)} steps, checksum {checksum:.6f}) ==")
    print(p.report())
    print(f"verdict: {p.verdict()}\n")
    return p


def main():
    if not torch.rbln.is_available():
        print("no RBLN device", file=sys.stderr)
        return 1
    torch.manual_seed(0)
    model = MLP().rbln()
    x = torch.rand(8, IN).to("rbln")

    # The seed's example.
    with torch.rbln.explain() as p:
        model(x)

    print(p.report())  # [clean] / [overhead] marker plus a signal table
    p.verdict()        # {'clean': bool, 'reasons': [...]} for CI gating
    p.dump()           # every signal as raw numbers

    steps("varying batch sizes", model, [1, 2, 3, 4, 5, 6, 7, 8])
    steps("steady batch size", model, [8] * 8)
    return 0


if __name__ == "__main__":
    sys.exit(main())
