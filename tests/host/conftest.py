"""Fixtures for the host backend's API tests: a Cudnn binding over the built ``ucudnn/_lib/libcudnn.so.9``.

CI builds the host backend before testing, so a missing library is a failure with instructions, never a skip.
"""

from __future__ import annotations

import ctypes
from collections.abc import Iterator

import pytest

from ucudnn import _paths
from ucudnn import cudnn as C
from ucudnn import graph_api as G


@pytest.fixture(scope="session")
def host_lib_path() -> str:
    if not _paths.HOST_CUDNN.exists():
        pytest.fail(
            f"the host backend is not built ({_paths.HOST_CUDNN} is missing): run "
            "`python shim/build/native.py host` (or `pip install .`) first",
            pytrace=False,
        )
    return str(_paths.HOST_CUDNN)


@pytest.fixture(scope="session")
def cudnn(host_lib_path: str) -> C.Cudnn:
    return C.load(host_lib_path)


@pytest.fixture
def handle(cudnn: C.Cudnn) -> Iterator[C.Handle]:
    with cudnn.handle() as h:
        yield h


@pytest.fixture
def b(host_lib_path: str) -> Iterator[G.Backend]:
    """The graph (backend) API of the host backend, raw statuses; descriptors it made are destroyed after."""
    backend = G.Backend(ctypes.CDLL(host_lib_path))
    yield backend
    backend.destroy_all()
