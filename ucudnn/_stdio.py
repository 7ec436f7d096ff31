"""Keeping native code's printf() output off the program's stdout."""

from __future__ import annotations

import contextlib
import ctypes
import os
import sys
from collections.abc import Iterator


@contextlib.contextmanager
def native_stdout_to_stderr() -> Iterator[None]:
    """Send what native code printf()s meanwhile to stderr: HiGHS (inside scipy's milp) prints diagnostic lines
    during some solves, which must not land in the JSON of ``ucudnn plan`` or a host program's stdout.

    Everything buffered (Python's and C stdio's) is flushed to the real stdout first and the solver's lines to
    stderr after, since C stdio buffers them past the redirect. Output of other threads meanwhile goes to stderr
    too. Without an fd 1 or a libc there is nothing to protect and nothing is redirected.
    """
    try:
        libc = ctypes.CDLL(None)
        sys.stdout.flush()
        libc.fflush(None)
        saved = os.dup(1)
    except (OSError, AttributeError, ValueError):
        yield
        return
    try:
        os.dup2(2, 1)
        yield
    finally:
        with contextlib.suppress(OSError, AttributeError):
            libc.fflush(None)
        os.dup2(saved, 1)
        os.close(saved)
