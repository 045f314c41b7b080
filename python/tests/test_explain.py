# SPDX-License-Identifier: MIT
"""torch.rbln.explain() over torch code: librbln's counters seen from Python."""

import inspect
import os
import threading
import warnings

import pytest
import torch

import torch_rbln

HERE = os.path.basename(__file__)


def line():
    """The caller's line number."""
    return inspect.currentframe().f_back.f_lineno


def test_classes_and_aliases():
    assert inspect.isclass(torch.rbln.RBLNExplain) and inspect.isclass(torch.rbln.RBLNProfile)
    assert torch.rbln.profile is torch.rbln.explain
    assert isinstance(torch.rbln.explain(), torch.rbln.RBLNProfile)
    assert isinstance(torch.rbln.profile(), torch.rbln.RBLNExplain)
    assert list(inspect.signature(torch.rbln.explain).parameters)[0] == "with_stack"


def test_clean_region():
    x = torch.ones(8, device="rbln")
    (x + x).cpu()  # compiles add for this shape
    with torch.rbln.explain() as p:
        y = x + x
    assert torch.equal(y.cpu(), torch.full((8,), 2.0))
    assert p.verdict() == {"clean": True, "reasons": [], "signals": 0}
    d = p.dump()
    assert d["clean"] is True and d["with_stack"] is False
    assert d["dispatch"]["warm_hit"]["count"] >= 1
    assert d["dispatch"]["recompile"]["count"] == 0
    assert d["dispatch"]["cpu_fallback"]["count"] == 0
    assert d["host_bounce"]["count"] == 0
    assert d["wall_ns"] > 0
    assert p.report().startswith("[clean]\n")


def test_recompile():
    x = torch.ones(37, 53, device="rbln")  # a shape no other test uses
    with torch.rbln.explain() as p:
        y = x * x
    assert torch.equal(y.cpu(), torch.ones(37, 53))
    v = p.verdict()
    assert v["clean"] is False and v["signals"] == 1
    assert v["reasons"][0].startswith("1 recompile (mul")
    d = p.dump()
    assert d["dispatch"]["recompile"]["count"] == 1
    assert "mul" in d["recompiles_by_op"][0]["op"]
    assert p.report().startswith("[overhead: 1 signals]\n")  # the seed's marker, whatever N


def test_cpu_fallback_and_host_bounces():
    cpu = torch.linspace(-2, 2, 256)
    x = cpu.to("rbln") * 1  # the result of a device op: in device memory
    with torch.rbln.explain() as p:
        y = torch.exp(x)  # no exp in the ISA: the CPU fallback
    assert y.is_rbln
    torch.testing.assert_close(y.cpu(), torch.exp(cpu))
    d = p.dump()
    assert d["dispatch"]["cpu_fallback"]["count"] == 1
    assert any("exp" in f["op"] for f in d["fallbacks_by_op"])
    b = d["host_bounce"]
    assert b["to_host_count"] == 1 and b["to_host_bytes"] == 1024
    assert b["to_device_count"] == 1 and b["to_device_bytes"] == 1024
    assert all(s["caller"] is None for s in b["by_site"])  # no with_stack
    v = p.verdict()
    assert not v["clean"]
    assert any("cpu fallback" in r for r in v["reasons"])
    assert any("host bounce" in r for r in v["reasons"])
    assert v["reasons"] == d["reasons"]
    report = p.report()
    assert report.startswith("[overhead: ")
    assert "use a device op, or keep the data on the device" in report


def test_with_stack_names_the_python_line():
    x = torch.linspace(0, 1, 64).to("rbln") * 1  # in device memory
    with torch.rbln.explain(with_stack=True) as p:
        for _ in range(3):
            y = torch.exp(x); where = line()  # noqa: E702
    assert y.is_rbln
    d = p.dump()
    assert d["with_stack"] is True
    (fallback,) = [f for f in d["fallbacks_by_op"] if "exp" in f["op"]]
    # Three calls from one line: one site, deduplicated.
    assert len(fallback["sites"]) == 1 and fallback["sites"][0]["count"] == 3
    site = fallback["sites"][0]["site"]
    assert HERE in site and str(where) in site, site
    callers = [s["caller"] for s in d["host_bounce"]["by_site"]]
    assert callers and all(HERE in c and str(where) in c for c in callers), callers
    assert f"{HERE}:{where}" in p.report()


def test_with_stack_names_the_line_of_a_recompile():
    x = torch.ones(41, 43, device="rbln")  # a shape no other test uses
    with torch.rbln.explain(with_stack=True) as p:
        y = x - x; where = line()  # noqa: E702
    assert torch.equal(y.cpu(), torch.zeros(41, 43))
    d = p.dump()
    (recompile,) = d["recompiles_by_op"]
    assert "sub" in recompile["op"] and recompile["count"] == 1
    (site,) = recompile["sites"]
    assert site["site"].endswith(f"{HERE}:{where}"), site


def test_second_region_raises():
    with torch.rbln.explain() as outer:
        with pytest.raises(RuntimeError, match="already open"):
            with torch.rbln.explain():
                pytest.fail("a second region opened")
        x = torch.ones(3, device="rbln") + 1
    # The outer region is intact and ends normally; then another may open.
    assert torch.equal(x.cpu(), torch.full((3,), 2.0))
    assert outer.dump()["dispatch"]["total"]["count"] >= 1
    with torch.rbln.explain() as again:
        pass
    assert again.verdict()["clean"]


def test_second_region_from_another_thread():
    errors = []

    def other():
        try:
            with torch.rbln.explain():
                pass
        except RuntimeError as err:
            errors.append(str(err))

    with torch.rbln.explain():
        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert len(errors) == 1 and "already open" in errors[0]


def test_region_counts_every_thread():
    x = torch.ones(5, device="rbln")
    (x + x).cpu()

    def other():
        for _ in range(4):
            x + x

    with torch.rbln.explain() as p:
        t = threading.Thread(target=other)
        t.start()
        t.join()
    assert p.dump()["dispatch"]["warm_hit"]["count"] >= 4


def test_reading_an_unfinished_region():
    p = torch.rbln.explain()
    with pytest.raises(RuntimeError, match="not run"):
        p.report()
    with p:
        for read in (p.report, p.verdict, p.dump):
            with pytest.raises(RuntimeError, match="still open"):
                read()
        assert "open" in repr(p)
    assert p.verdict()["clean"] in (True, False)
    with pytest.raises(RuntimeError, match="already been entered"):
        with p:
            pass


def test_region_ends_on_an_exception():
    with pytest.raises(KeyError):
        with torch.rbln.explain() as p:
            raise KeyError("x")
    assert "wall_ns" in p.dump()
    with torch.rbln.explain():
        pass


def test_prints_as_its_report():
    with torch.rbln.explain() as p:
        pass
    assert str(p) == repr(p) == p.report()
    assert "Signal" in str(p) and "Region wall time" in str(p)


def test_trace_is_a_deprecated_alias():
    with pytest.warns(DeprecationWarning, match="with_stack"):
        p = torch.rbln.explain(trace=True)
    assert p.with_stack is True
    with p:
        pass
    assert p.dump()["with_stack"] is True
    with pytest.warns(DeprecationWarning):
        assert torch.rbln.profile(trace=False).with_stack is False
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert torch.rbln.explain(with_stack=True).with_stack is True


def test_region_is_librbln_region():
    # The C API sees the region torch.rbln opened: its own begin is refused.
    with torch.rbln.explain():
        assert torch_rbln._lib.lib.rbln_explain_begin(False) is None
        assert "already open" in torch_rbln._lib.last_error()
