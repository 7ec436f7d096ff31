"""A cache that processes on several hosts share (a network or cluster file system) uses the rollback journal and
file locks, not WAL, whose shared memory only processes on one host share (``UCUDNN_DATABASE_JOURNAL``)."""

from __future__ import annotations

import errno
import fcntl
import logging
from pathlib import Path

import pytest

from ucudnn import _cache_fs, _cache_store, config
from ucudnn._cache_fs import filesystem_type, mounts, shared_across_hosts
from ucudnn.cache import Cache, CacheError
from ucudnn.optimizer import AlgoPerf


def mountinfo(*lines: tuple[str, str]) -> str:
    """A mountinfo text mounting each (mount point, type), in order."""
    return "".join(
        f"{20 + i} 1 0:{i} / {point.replace(' ', chr(92) + '040')} rw,relatime shared:{i} - {fstype} src{i} rw\n"
        for i, (point, fstype) in enumerate(lines)
    )


def journal_of(c: Cache) -> str:
    return str(c._store.connection().execute("PRAGMA journal_mode").fetchone()[0])


def rows(b: int) -> list[AlgoPerf]:
    return [AlgoPerf(b, 0, 1.0 * b, 0)]


def test_the_mount_that_holds_a_path_names_its_file_system(tmp_path: Path) -> None:
    spaced = tmp_path / "my data"
    (spaced / "deeper").mkdir(parents=True)
    text = mountinfo(("/", "ext4"), (str(tmp_path), "nfs4"), (str(spaced), "lustre"), (str(spaced / "deeper"), "tmpfs"))
    assert ("/", "ext4") in mounts(text) and (str(spaced), "lustre") in mounts(text)  # \040 is a space
    assert filesystem_type(tmp_path / "cache.sqlite", text) == "nfs4"
    assert filesystem_type(spaced / "cache.sqlite", text) == "lustre"  # the deepest mount that holds it
    assert filesystem_type(spaced / "not" / "yet" / "cache.sqlite", text) == "lustre"  # its nearest existing folder
    assert filesystem_type(spaced / "deeper" / "x", text) == "tmpfs"
    assert filesystem_type(tmp_path.parent / "x", text) == "ext4"
    # A later mount over the same point hides the earlier one; lines that do not parse are skipped.
    over = text + "garbage line\n99 1 0:9 / " + str(tmp_path) + " rw - cifs //srv/x rw\n"
    assert filesystem_type(tmp_path / "cache.sqlite", over) == "cifs"
    assert filesystem_type(tmp_path / "x", "") is None
    assert shared_across_hosts("nfs4") and shared_across_hosts("NFS") and shared_across_hosts("fuse.sshfs")
    assert not any(shared_across_hosts(t) for t in ("ext4", "xfs", "btrfs", "tmpfs", "overlay", "zfs", None))


def test_this_machines_own_mount_table_is_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert filesystem_type(tmp_path) not in (None, "")  # /proc/self/mountinfo names the file system of tmp_path
    monkeypatch.setattr(_cache_fs, "MOUNTINFO", tmp_path / "no-such-file")
    assert filesystem_type(tmp_path) is None  # no mount table: cannot tell (auto then keeps WAL)


@pytest.mark.parametrize(("fstype", "expected"), [("ext4", "wal"), ("nfs4", "delete"), ("lustre", "delete")])
def test_auto_uses_the_rollback_journal_where_other_hosts_mount_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, fstype: str, expected: str
) -> None:
    monkeypatch.setattr(_cache_store, "filesystem_type", lambda path: fstype)
    with caplog.at_level(logging.INFO, logger="ucudnn"), Cache(tmp_path / "c.sqlite") as c:
        c.put_benchmark("k", "backend", 4, rows(4))
        assert journal_of(c) == expected
        assert (tmp_path / "c.sqlite-wal").exists() == (expected == "wal")
        assert c.get_benchmarks("k", "backend", [4]) == {4: rows(4)}
    said = [r.getMessage() for r in caplog.records if "UCUDNN_DATABASE_JOURNAL" in r.getMessage()]
    if expected == "delete":
        assert len(said) == 1 and f"({fstype})" in said[0] and "rollback journal" in said[0], said
    else:
        assert said == []


@pytest.mark.parametrize(("setting", "fstype", "expected"), [("delete", "ext4", "delete"), ("wal", "nfs4", "wal")])
def test_the_setting_overrides_the_file_system(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, setting: str, fstype: str, expected: str
) -> None:
    monkeypatch.setattr(_cache_store, "filesystem_type", lambda path: fstype)
    monkeypatch.setenv("UCUDNN_DATABASE_JOURNAL", setting)
    with Cache(tmp_path / "c.sqlite") as c:
        c.put_benchmark("k", "backend", 2, rows(2))
        assert journal_of(c) == expected


def test_a_bad_setting_names_the_variable_and_the_choices(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("UCUDNN_DATABASE_JOURNAL", "truncate")
    with pytest.raises(config.ConfigError) as err:
        Cache(tmp_path / "c.sqlite")
    assert "UCUDNN_DATABASE_JOURNAL" in str(err.value) and "auto" in str(err.value) and "delete" in str(err.value)
    assert not (tmp_path / "c.sqlite").exists()


def test_a_wal_cache_moves_to_the_rollback_journal_once_no_one_else_has_it_open(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "c.sqlite"
    with Cache(path) as c:  # written on this host in WAL mode (the default on a local file system)
        c.put_benchmark("k", "backend", 8, rows(8))
        assert journal_of(c) == "wal"
        monkeypatch.setenv("UCUDNN_DATABASE_JOURNAL", "delete")
        with caplog.at_level(logging.WARNING, logger="ucudnn"), Cache(path) as other:
            # The first process still has it open in WAL mode: the file keeps that mode, said once, and works.
            assert journal_of(other) == "wal" and other.get_benchmarks("k", "backend", [8]) == {8: rows(8)}
            other.put_benchmark("k", "backend", 4, rows(4))
        said = [r.getMessage() for r in caplog.records if "stays in WAL mode" in r.getMessage()]
        assert len(said) == 1 and "other hosts must not use it" in said[0]
    with Cache(path) as alone:  # now alone: the rollback journal, and what both wrote is there
        assert journal_of(alone) == "delete"
        assert alone.get_benchmarks("k", "backend", [4, 8]) == {4: rows(4), 8: rows(8)}
    assert not (tmp_path / "c.sqlite-wal").exists() and not (tmp_path / "c.sqlite-shm").exists()


def test_a_shared_cache_is_read_under_the_writers_locks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Read-only readers (ucudnn db stats/list/export) of a cache in the rollback journal see what writers commit.
    monkeypatch.setenv("UCUDNN_DATABASE_JOURNAL", "delete")
    path = tmp_path / "c.sqlite"
    with Cache(path) as writer:
        writer.put_benchmark("k", "backend", 1, rows(1))
        with Cache(path, read_only=True) as reader:
            assert reader.get_benchmarks("k", "backend", [1]) == {1: rows(1)}
            writer.put_benchmark("k", "backend", 2, rows(2))
            assert reader.get_benchmarks("k", "backend", [1, 2]) == {1: rows(1), 2: rows(2)}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.sqlite", "c.sqlite.lock"]
    # A reader whose own setting would be WAL goes by the file's mode (its header), not by that setting.
    with Cache(path) as writer:
        monkeypatch.setenv("UCUDNN_DATABASE_JOURNAL", "wal")
        with Cache(path, read_only=True) as reader:
            assert reader.stats()["journal"] == "delete"
            writer.put_benchmark("k", "backend", 4, rows(4))
            assert reader.get_benchmarks("k", "backend", [1, 2, 4]) == {1: rows(1), 2: rows(2), 4: rows(4)}


def test_a_file_system_that_refuses_locks_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Lustre mounted without flock answers flock() with ENOSYS: no process can share the file safely there.
    def refuse(fd: int, op: int) -> None:
        raise OSError(errno.ENOSYS, "Function not implemented")

    monkeypatch.setattr(_cache_store, "filesystem_type", lambda path: "lustre")
    monkeypatch.setattr(fcntl, "flock", refuse)  # the module _cache_store locks with
    with pytest.raises(CacheError) as err:
        Cache(tmp_path / "c.sqlite")
    message = str(err.value)
    assert "(lustre) refuses file locks (Function not implemented)" in message and "UCUDNN_DATABASE" in message
    assert not (tmp_path / "c.sqlite").exists()  # nothing was written
