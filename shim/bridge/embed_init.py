"""Start-up code of libucudnn_planner.so (cffi ``embedding_init_code``), run once in the fresh interpreter.

``embed_path.py`` has already put the install on ``sys.path``. This checks that the ``ucudnn`` it finds is the
one the library was built for and imports ``ucudnn._runtime``, which registers the planner with the shim.
Any failure is reported on stderr and makes ``ucudnn_embed_start`` return 0; nothing escapes into C.
"""

from _ucudnn_planner import ffi  # the module cffi created for this library

# Replaced at build time (see shim/build/planner_embed.py).
PACKAGE_VERSION = ""


def _start() -> bool:
    import os

    from _ucudnn_planner import lib

    import ucudnn

    where = os.path.dirname(ucudnn.__file__ or "?")
    if ucudnn.__version__ != PACKAGE_VERSION:
        raise ImportError(
            f"libucudnn_planner.so was built for ucudnn {PACKAGE_VERSION} but imported ucudnn "
            f"{ucudnn.__version__} from {where}; reinstall ucudnn"
        )
    library = os.fsdecode(ffi.string(lib.ucudnn_embed_library_path()))
    expected = os.path.dirname(os.path.dirname(os.path.realpath(library))) if library else ""
    if expected and os.path.realpath(where) != expected:
        import sys

        sys.stderr.write(f"ucudnn: warning: the embedded planner imported ucudnn from {where}, not {expected}\n")
    from ucudnn import _runtime

    if not _runtime.registered():
        raise RuntimeError("the preload library's control API (ucudnn_set_planner) is not in this process")
    return True


def _report(exc: BaseException) -> None:
    import os
    import sys
    import traceback

    detail = "".join(traceback.format_exception(exc)) if os.environ.get("UCUDNN_LOG_LEVEL") == "debug" else ""
    sys.stderr.write(
        f"ucudnn: error: the embedded planner could not start: {exc!r}; this C/C++ host uses cached plans or "
        f"the single-algorithm fallback (sys.path: {sys.path}).\n{detail}"
    )
    sys.stderr.flush()


try:
    _ready = _start()
except BaseException as exc:
    _report(exc)
    _ready = False


@ffi.def_extern()  # type: ignore[untyped-decorator]
def ucudnn_embed_start() -> int:
    return 1 if _ready else 0
