# SPDX-License-Identifier: MIT
"""Automatic mixed precision: what torch.autocast("rbln") asks the device module."""

import ctypes

from ._lib import DTYPES, lib


def get_amp_supported_dtype():
    """The dtypes autocast may use on rbln devices: none yet, so [].

    torch.autocast("rbln") checks its dtype against this list and, since
    the list is empty, warns and leaves autocast disabled instead of raising.
    """
    out = (ctypes.c_int * len(DTYPES))()
    n = lib.rbln_amp_supported_dtypes(out, len(DTYPES))
    return [DTYPES[out[i]] for i in range(min(n, len(DTYPES)))]
