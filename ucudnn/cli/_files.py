"""Files the commands are given: read-only commands never create one; commands that write say when they create a
directory."""

from __future__ import annotations

import sys
from pathlib import Path


class MissingFile(Exception):
    """A read-only command was given a path that does not exist (the message names it)."""


def existing_cache(path: Path) -> Path:
    """``path`` if a cache file is there; else MissingFile, and nothing is created (a typo must not become an empty
    cache)."""
    if path.is_file():
        return path
    if path.exists():
        raise MissingFile(f"{path} is not a file")
    where = "its directory does not exist either" if not path.parent.is_dir() else "nothing has been cached there"
    raise MissingFile(f"no cache at {path} ({where}; --database or UCUDNN_DATABASE names the file)")


def ensure_parent(path: Path, prog: str) -> None:
    """Create the directory ``path`` will be written in, saying so on stderr (once: later calls find it)."""
    parent = path.expanduser().parent
    if not parent.exists():
        parent.mkdir(parents=True, exist_ok=True)
        print(f"{prog}: created directory {parent}", file=sys.stderr)
