# SPDX-License-Identifier: MIT
"""explain(): librbln's hidden-overhead region, as a context manager.

The region is librbln's own (rbln_explain_*): ops torch runs on rbln
tensors go through librbln's dispatch and the extension's CPU fallback,
which count recompilations, fallbacks and host bounces there. This only
opens, closes and reads it.
"""

import ctypes
import json
import warnings

from ._lib import ExplainVerdict, check, failed, lib, take_string


class RBLNExplain:
    """A hidden-overhead explain region: use it as a context manager, then read it.

    Regions are process-wide and must not overlap: entering one while
    another is open (in any thread) raises RuntimeError. report(),
    verdict() and dump() read a region that has ended.
    """

    def __init__(self, with_stack=False):
        self.with_stack = bool(with_stack)
        self._handle = None
        self._ended = False

    def __enter__(self):
        if self._handle is not None:
            raise RuntimeError("torch.rbln.explain: this region has already been entered; "
                               "create a new one with torch.rbln.explain()")
        h = lib.rbln_explain_begin(self.with_stack)
        if not h:
            raise failed()
        self._handle = h
        return self

    def __exit__(self, *exc):
        if self._handle is not None and not self._ended:
            self._ended = True
            check(lib.rbln_explain_end(self._handle))
        return False

    def __del__(self):
        # At interpreter exit the module's globals may be gone already.
        if self._handle is not None and lib is not None:
            lib.rbln_explain_free(self._handle)
            self._handle = None

    def _ended_handle(self, what):
        if self._handle is None:
            raise RuntimeError(f"RBLNExplain.{what}(): the region has not run; "
                               "use it as a context manager: with torch.rbln.explain() as p: ...")
        if not self._ended:
            raise RuntimeError(f"RBLNExplain.{what}(): the region is still open; "
                               "call it after the with block")
        return self._handle

    def report(self):
        """The report: a [clean] / [overhead: N signals] marker, the signal table, the details."""
        text = lib.rbln_explain_report(self._ended_handle("report"))
        if text is None:
            raise failed()
        return text.decode()

    def verdict(self):
        """{'clean': bool, 'reasons': [str, ...], 'signals': int}, for CI gating.

        clean tells whether any hidden-overhead signal fired; each reason
        names one that did, with its count and ops.
        """
        v = ExplainVerdict()
        check(lib.rbln_explain_verdict(self._ended_handle("verdict"), ctypes.byref(v)))
        reasons = [v.reasons[i].decode() for i in range(v.nreasons)]
        return {"clean": bool(v.clean), "reasons": reasons, "signals": len(reasons)}

    def dump(self):
        """Every signal as raw numbers: librbln's dump (rbln_explain_dump_json(3)) as a dict."""
        p = lib.rbln_explain_dump_json(self._ended_handle("dump"))
        if not p:
            raise failed()
        return json.loads(take_string(p))

    def __str__(self):
        if self._ended:
            return self.report()
        state = "open" if self._handle is not None else "not entered"
        return f"<torch.rbln.RBLNExplain with_stack={self.with_stack} ({state})>"

    __repr__ = __str__


# torch.rbln.RBLNProfile: the older name of the same class.
RBLNProfile = RBLNExplain


def explain(with_stack=False, trace=None):
    """A hidden-overhead explain region, usable as a context manager.

    with_stack=True records the call site of each fallback, recompilation
    and host bounce. trace= is the deprecated name of with_stack=.
    """
    if trace is not None:
        warnings.warn("torch.rbln.explain(trace=...) is deprecated: use with_stack=...",
                      DeprecationWarning, stacklevel=2)
        with_stack = with_stack or trace
    return RBLNExplain(with_stack=with_stack)


# torch.rbln.profile: the older name of explain().
profile = explain
