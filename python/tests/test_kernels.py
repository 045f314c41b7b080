# SPDX-License-Identifier: MIT
"""The rbln device's kernels against torch's own CPU results.

Every op the ISA runs, in every dtype the ISA has, with NaN, +-inf and -0
among the inputs, compared with what torch computes on the CPU from the
same inputs; explain() shows each ran on the NPU, not through the CPU
fallback. What the ISA cannot run (broadcasting, strides, integer true
division, int64) must still give torch's answer, through the fallback.
"""

import math

import pytest
import torch
import torch_rbln  # noqa: F401  registers the device

ISA_DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.int8]
FLOATS = [torch.float32, torch.float16, torch.bfloat16]


def values(dtype, n=37, seed=0):
    """@n values of @dtype, the special ones first for floats."""
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        special = torch.tensor([math.nan, math.inf, -math.inf, -0.0, 0.0, 1.0, -1.0])
        rest = torch.randn(n - len(special), generator=g) * 4
        return torch.cat([special, rest]).to(dtype)
    info = torch.iinfo(dtype)
    edge = torch.tensor([info.min, info.max, 0, -1, 1], dtype=torch.int64)
    rest = torch.randint(max(info.min, -1000), min(info.max, 1000), (n - len(edge),), generator=g)
    return torch.cat([edge, rest]).to(dtype)


def same(actual, expected, exact=True):
    """Equal values (NaN where NaN), the same dtype and shape, and -0 kept when @exact."""
    actual = actual.cpu()
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if exact:
        torch.testing.assert_close(actual, expected, rtol=0, atol=0, equal_nan=True)
        if expected.dtype.is_floating_point:
            # A NaN's sign means nothing (x86 makes negative ones, the NPU positive).
            numbers = ~torch.isnan(expected)
            assert torch.equal(torch.signbit(actual)[numbers],
                               torch.signbit(expected)[numbers]), "sign of zero"
    else:
        torch.testing.assert_close(actual.float(), expected.float(), equal_nan=True,
                                   rtol=2e-2, atol=2e-2)


def on_npu(fn):
    """fn()'s result, with the check that it took no CPU fallback."""
    with torch.rbln.explain() as region:
        out = fn()
    fallbacks = region.dump()["dispatch"]["cpu_fallback"]["count"]
    assert fallbacks == 0, str(region)
    return out


BINARY = {
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
}


@pytest.mark.parametrize("dtype", ISA_DTYPES, ids=str)
@pytest.mark.parametrize("op", sorted(BINARY))
def test_binary(op, dtype):
    a, b = values(dtype, seed=1), values(dtype, seed=2).flip(0)
    fn = BINARY[op]
    out = on_npu(lambda: fn(a.rbln(), b.rbln()))
    same(out, fn(a, b))


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_div(dtype):
    a, b = values(dtype, seed=3), values(dtype, seed=4).flip(0)
    same(on_npu(lambda: a.rbln() / b.rbln()), a / b)


@pytest.mark.parametrize("dtype", ISA_DTYPES, ids=str)
@pytest.mark.parametrize("op", ["add", "sub", "mul"])
def test_scalar(op, dtype):
    a = values(dtype, seed=5)
    s = 3 if not dtype.is_floating_point else 2.5
    fn = BINARY[op]
    same(on_npu(lambda: fn(a.rbln(), s)), fn(a, s))


@pytest.mark.parametrize("dtype", ISA_DTYPES, ids=str)
@pytest.mark.parametrize("op", ["neg", "abs", "relu"])
def test_unary(op, dtype):
    a = values(dtype, seed=6)
    fn = getattr(torch, op)
    # The ISA's relu makes -0 +0 (torch's CPU kernel keeps -0): equal values.
    same(on_npu(lambda: fn(a.rbln())), fn(a), exact=op != "relu")
    if op == "relu":
        same(fn(a.rbln()), fn(a) + 0.0 if dtype.is_floating_point else fn(a))


def isa_converts(src, dst):
    """To floats and widening integers: where the ISA's rules are torch's."""
    if dst.is_floating_point or src == dst:
        return True
    return not src.is_floating_point and dst.itemsize >= src.itemsize


@pytest.mark.parametrize("src", ISA_DTYPES, ids=lambda d: f"from_{d}")
@pytest.mark.parametrize("dst", ISA_DTYPES, ids=lambda d: f"to_{d}")
def test_conversion(src, dst):
    """On the NPU where it converts as torch does, else on the CPU: torch's answer either way."""
    a = values(src, seed=7)
    if src.is_floating_point and not dst.is_floating_point:
        # NaN, inf and out of range are undefined behaviour in C, so in torch too.
        info = torch.iinfo(dst)
        a = torch.nan_to_num(a.float(), nan=0.0).clamp(info.min, info.max).to(src)
        a = torch.where(a.float().abs() < 2**24, a, torch.zeros_like(a))
    if isa_converts(src, dst):
        same(on_npu(lambda: a.rbln().to(dst)), a.to(dst))
    else:
        same(a.rbln().to(dst), a.to(dst))


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_sum_amax_last_dim(dtype):
    a = values(dtype, n=48, seed=8).reshape(4, 12)
    # The NPU adds in another order than the CPU: rounding differs, not values.
    same(on_npu(lambda: a.rbln().sum(-1)), a.sum(-1), exact=False)
    same(on_npu(lambda: a.rbln().amax(-1)), a.amax(-1))


@pytest.mark.parametrize("dtype", [torch.int32, torch.int8], ids=str)
def test_amax_integers(dtype):
    a = values(dtype, n=40, seed=9).reshape(4, 10)
    same(on_npu(lambda: a.rbln().amax(-1)), a.amax(-1))


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
def test_matmul(dtype):
    g = torch.Generator().manual_seed(10)
    a = torch.randn(5, 7, generator=g).to(dtype)
    b = torch.randn(7, 3, generator=g).to(dtype)
    same(on_npu(lambda: a.rbln() @ b.rbln()), a @ b, exact=False)
    x = torch.randn(2, 5, 7, generator=g).to(dtype)
    y = torch.randn(2, 7, 3, generator=g).to(dtype)
    same(on_npu(lambda: torch.bmm(x.rbln(), y.rbln())), torch.bmm(x, y), exact=False)


@pytest.mark.parametrize("dtype", ISA_DTYPES, ids=str)
def test_copies_fill_zero_clone(dtype):
    a = values(dtype, seed=11)
    d = a.rbln()
    same(d, a)
    same(on_npu(lambda: d.clone()), a)
    e = torch.empty_like(d)
    on_npu(lambda: e.copy_(d))
    same(e, a)
    on_npu(lambda: e.fill_(7))
    same(e, torch.full_like(a, 7))
    on_npu(lambda: e.zero_())
    same(e, torch.zeros_like(a))
    # rbln to rbln across devices, and back
    if torch.rbln.device_count() > 1:
        same(d.to("rbln:1"), a)
        assert d.to("rbln:1").device == torch.device("rbln:1")


# Integer true division does not fit an integer tensor: torch refuses it (below).
IN_PLACE = [(op, dtype) for op in ["add_", "sub_", "mul_", "div_", "relu_"] for dtype in ISA_DTYPES
            if op != "div_" or dtype.is_floating_point]


@pytest.mark.parametrize("op,dtype", IN_PLACE, ids=str)
def test_in_place(op, dtype):
    """On the NPU: the result, copied into the tensor itself."""
    a, b = values(dtype, seed=15), values(dtype, seed=16).flip(0)
    d = a.rbln().clone()  # in device memory (not "+ 0", which makes -0 +0)
    args = () if op == "relu_" else (b.rbln(),)
    with torch.rbln.explain() as region:
        out = getattr(d, op)(*args)
    assert out is d
    assert region.dump()["dispatch"]["cpu_fallback"]["count"] == 0, str(region)
    expected = getattr(a.clone(), op)(*(() if op == "relu_" else (b,)))
    same(d, expected, exact=op != "relu_")


def test_in_place_refuses_as_torch_does():
    d = torch.tensor([1, 2, 3], dtype=torch.int32).rbln()
    with pytest.raises(RuntimeError, match="can't be cast"):
        d.add_(torch.tensor([0.5, 0.5, 0.5]).rbln())
    with pytest.raises(RuntimeError, match="can't be cast"):
        d.div_(2)
    same(d, torch.tensor([1, 2, 3], dtype=torch.int32))
    # Broadcasting in place works, through the CPU.
    m = torch.ones(2, 3).rbln()
    m.add_(torch.arange(3.0).rbln())
    same(m, torch.ones(2, 3) + torch.arange(3.0))


@pytest.mark.parametrize("dtype", [torch.int32, torch.int8], ids=str)
def test_scalars_out_of_an_integer_range(dtype):
    """torch wraps them into the dtype, the ISA would saturate: the CPU answers."""
    a = values(dtype, seed=17)
    big = 200 if dtype == torch.int8 else 3_000_000_000
    for fn in (torch.add, torch.sub, torch.mul):
        same(fn(a.rbln(), big), fn(a, big))


def test_broadcasting_falls_back_right():
    a = values(torch.float32, n=12, seed=12).reshape(3, 4)
    row = torch.arange(4, dtype=torch.float32)
    same(a.rbln() + row.rbln(), a + row)
    same(a.rbln() * row[:1].rbln(), a * row[:1])


def test_strided_and_views():
    a = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    d = a.rbln()
    same(d.t(), a.t())
    same(d.t() + 1, a.t() + 1)
    same(d[1:3, ::2], a[1:3, ::2])
    same(d.view(6, 4) * 2, a.view(6, 4) * 2)
    d[0].fill_(-1)
    a[0].fill_(-1)
    same(d, a)
    d[:, 1] = 5
    a[:, 1] = 5
    same(d, a)


def test_integer_true_division_and_int64():
    a = torch.tensor([7, -7, 9], dtype=torch.int32)
    b = torch.tensor([2, 2, -4], dtype=torch.int32)
    same(a.rbln() / b.rbln(), a / b)
    i = torch.arange(5)
    same(i.rbln() * 3, i * 3)
    same(i.rbln().sum(), i.sum())


def test_fallback_op_is_recorded():
    a = values(torch.float32, n=16, seed=13)
    d = a.rbln() + 0  # in device memory: the fallback must bring it to the host
    with torch.rbln.explain() as region:
        out = d.exp()
        out2 = out * 1  # the result goes back to the device when the NPU reads it
    same(out2, a.exp())
    dump = region.dump()
    assert dump["dispatch"]["cpu_fallback"]["count"] == 1
    assert [o["op"] for o in dump["fallbacks_by_op"]] == ["aten::exp.out"]
    bounces = dump["host_bounce"]["by_site"]
    # As librbln's own CPU ops count them: the input came from device memory,
    # so the result goes back at once.
    assert [(b["op"], b["direction"], b["bytes"]) for b in bounces] == [
        ("aten::exp.out", "device->host", 64), ("aten::exp.out", "host->device", 64)], bounces


def test_with_stack_names_the_python_line():
    a = values(torch.float32, n=16, seed=14).rbln() + 0
    with torch.rbln.explain(with_stack=True) as region:
        a.exp()  # the line the report must name
    line = test_with_stack_names_the_python_line.__code__.co_firstlineno + 3
    where = f"{__file__}:{line}"
    dump = region.dump()
    sites = [s["site"] for o in dump["fallbacks_by_op"] for s in o["sites"]]
    assert where in sites, sites
    assert any(b["caller"] == where for b in dump["host_bounce"]["by_site"])


def test_lazy_until_the_npu_reads():
    """As the seed says: created in host memory, on the device once an op needs it."""
    before = torch.rbln.memory_allocated()
    made = [torch.ones(1024, device="rbln"), torch.tensor([1.0, 2.0], device="rbln"),
            torch.randn(64, device="rbln"), torch.zeros(8, 8, device="rbln")]
    assert torch.rbln.memory_allocated() == before
    assert torch.rbln.memory_stats()["lazy.host_bytes"] >= (1024 + 2 + 64 + 64) * 4
    twice = made[0] + made[0]
    assert torch.rbln.memory_allocated() >= before + 2 * 1024 * 4
    same(twice, torch.full((1024,), 2.0))
