"""Which file system a cache file is on, and whether processes on other hosts can reach it.

SQLite's write-ahead log (WAL) coordinates its readers and writers through memory shared in the ``-shm`` file, so
every process using the file must be on one host; on a file system that other hosts mount too (the home or project
directory of a cluster, where multi-node training keeps its cache), processes on different hosts would each see
their own copy of that memory. There the cache uses the rollback journal and file locks instead
(``UCUDNN_DATABASE_JOURNAL``). The file system is read from ``/proc/self/mountinfo``: the mount that holds the
cache's directory, found by the longest mount point that contains it.
"""

from __future__ import annotations

import os
from pathlib import Path

MOUNTINFO = Path("/proc/self/mountinfo")

# File systems that several hosts mount at once: network ones, and cluster ones on shared disks.
SHARED_ACROSS_HOSTS = frozenset(
    {
        "nfs", "nfs4", "cifs", "smb3", "smbfs", "ncpfs", "afs", "9p", "ceph", "lustre", "gpfs", "beegfs",
        "glusterfs", "orangefs", "pvfs2", "ocfs2", "gfs2", "wekafs", "panfs", "quobyte", "cvfs", "davfs",
        "fuse.glusterfs", "fuse.sshfs", "fuse.ceph", "fuse.cephfs", "fuse.s3fs", "fuse.gcsfuse", "fuse.rclone",
        "fuse.juicefs", "fuse.quobyte",
    }
)  # fmt: skip


def _unescape(field: str) -> str:
    """A mountinfo path field: spaces, tabs, newlines and backslashes are written as octal escapes."""
    out, i = [], 0
    while i < len(field):
        code = field[i + 1 : i + 4]
        if field[i] == "\\" and len(code) == 3 and all(c in "01234567" for c in code):
            out.append(chr(int(code, 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mounts(text: str) -> list[tuple[str, str]]:
    """(mount point, file system type) of each line of a mountinfo text; lines that do not parse are skipped."""
    found = []
    for line in text.splitlines():
        fields = line.split()
        if "-" not in fields:
            continue
        sep = fields.index("-")
        if sep < 5 or sep + 1 >= len(fields):
            continue
        found.append((_unescape(fields[4]), fields[sep + 1]))
    return found


def filesystem_type(path: Path, mountinfo: str | None = None) -> str | None:
    """The type of the file system holding ``path`` (or, where it does not exist yet, its nearest existing
    ancestor), e.g. ``ext4`` or ``nfs4``; None where it cannot be told (no /proc, an unreadable mount table)."""
    if mountinfo is None:
        try:
            mountinfo = MOUNTINFO.read_text(errors="replace")
        except OSError:
            return None
    target = Path(os.path.abspath(path))
    while not target.exists() and target != target.parent:
        target = target.parent
    try:
        target = target.resolve()
    except OSError:
        pass
    best: tuple[int, str] | None = None
    for point, fstype in mounts(mountinfo):
        mount = Path(point)
        if (target == mount or mount in target.parents) and (best is None or len(mount.parts) >= best[0]):
            best = (len(mount.parts), fstype)  # the last of equal depth: a mount over an earlier one
    return best[1] if best else None


def shared_across_hosts(fstype: str | None) -> bool:
    """Whether processes on other hosts may open files on a file system of this type."""
    return fstype is not None and fstype.lower() in SHARED_ACROSS_HOSTS
