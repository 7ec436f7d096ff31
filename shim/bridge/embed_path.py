"""Puts a ucudnn install on ``sys.path`` in the interpreter libucudnn_planner.so starts (run from C, before cffi).

The interpreter starts inside a C/C++ program, so nothing about the process says where ucudnn is installed:
the prefix is libpython's, and ``site`` only added that prefix's site-packages. This code adds the site
directories of the interpreter that built the library (baked in below: e.g. a virtual environment's
site-packages, where cffi, numpy and scipy live) and the directory holding the ``ucudnn`` package the library
belongs to, computed from the library's own path (``<root>/ucudnn/_lib/libucudnn_planner.so``). They go in
front of the base prefix's site-packages, as in a virtual environment, and their ``.pth`` files are processed, so
an editable install's import hook works. It runs before cffi's own start-up because that imports
``_cffi_backend``, which may exist only in the install's site-packages.

Inputs: ``LIBRARY_PATH`` (a global set by the C caller) and ``SITE_DIRS`` (baked in at build time).
"""

import os
import site
import sys

# Replaced at build time (see shim/build/planner_embed.py).
SITE_DIRS: list[str] = []
LIBRARY_PATH: str = globals().get("LIBRARY_PATH", "")


def package_root(library_path: str) -> str:
    if not library_path:
        return ""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(library_path))))


def setup(library_path: str, site_dirs: list[str]) -> None:
    wanted = [d for d in [*site_dirs, package_root(library_path)] if d and os.path.isdir(d)]
    base_sites = set(site.getsitepackages())
    user_site = site.getusersitepackages()
    if isinstance(user_site, str):
        base_sites.add(user_site)
    index = next((i for i, p in enumerate(sys.path) if p in base_sites), len(sys.path))
    for d in wanted:
        if d not in sys.path:
            sys.path.insert(index, d)
            index += 1
    for d in wanted:
        site.addsitedir(d)  # already on the path, so this only runs its .pth files


setup(LIBRARY_PATH, SITE_DIRS)
