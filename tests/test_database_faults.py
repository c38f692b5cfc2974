"""The results database under concurrent writers and on damaged files (issue 34, cases 1 and 5):
no write is lost, none dies on SQLite's lock, and a damaged file is refused in one line before
anything is written to it."""

from __future__ import annotations

import random
import shutil
import sqlite3
import threading
from pathlib import Path

import pytest
from report_inputs import write_results
from test_database import one_line_error, query

from embprof.cli import main
from embprof.results.database import load, merge_into

PAGE = 4096


@pytest.fixture
def two_folders(tmp_path: Path) -> tuple[Path, Path]:
    a = write_results(tmp_path / "a")
    return a, Path(shutil.copytree(a, tmp_path / "b"))


def _side_by_side(monkeypatch, name: str) -> None:
    """Make two writers meet at ``load.<name>``: each waits there (briefly) for the other, which
    puts them in the same window of a write every time, as a busy machine does by chance."""
    meet = threading.Barrier(2, timeout=2.0)
    original = getattr(load, name)

    def waiting(*args, **kwargs):
        try:
            meet.wait()
        except threading.BrokenBarrierError:
            pass  # the other writer is held off until this one is done: go on alone
        return original(*args, **kwargs)

    monkeypatch.setattr(load, name, waiting)


def _merge_both(sources: list[tuple[Path, str]], into: Path) -> list[BaseException]:
    errors: list[BaseException] = []

    def one(source: Path, run_id: str) -> None:
        try:
            merge_into(into, source, run_id)
        except BaseException as exc:  # noqa: BLE001 - what a writer died of is the finding
            errors.append(exc)

    threads = [threading.Thread(target=one, args=pair) for pair in sources]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return errors


def test_two_merges_into_a_new_file_at_once_both_land(two_folders, tmp_path, monkeypatch) -> None:
    a, b = two_folders
    into = tmp_path / "new.sqlite"
    _side_by_side(monkeypatch, "store_run")
    assert _merge_both([(a, "a"), (b, "b")], into) == []
    assert query(into, "SELECT run_id FROM runs ORDER BY run_id") == [("a",), ("b",)]


def test_two_merges_into_an_existing_file_at_once_both_land(two_folders, tmp_path, monkeypatch) -> None:
    a, b = two_folders
    into = tmp_path / "history.sqlite"
    merge_into(into, a, "first")
    _side_by_side(monkeypatch, "claim")  # both have read the file; each now wants to write
    assert _merge_both([(a, "a"), (b, "b")], into) == []
    assert query(into, "SELECT run_id FROM runs ORDER BY run_id") == [("a",), ("b",), ("first",)]


def _damage(db: Path, page: int, data: bytes, offset: int = 64) -> None:
    with db.open("r+b") as fh:
        fh.seek((page - 1) * PAGE + offset)
        fh.write(data)


def _a_page_that_breaks(db: Path) -> int:
    """The first page from the middle of the file on that the bytes land in data, not free space."""
    copy = db.with_name("probe.sqlite")
    for page in range(db.stat().st_size // PAGE // 2, db.stat().st_size // PAGE):
        shutil.copy(db, copy)
        _damage(copy, page, random.Random(34).randbytes(400), offset=1000)
        try:
            if query(copy, "PRAGMA integrity_check(1)") != [("ok",)]:
                return page
        except sqlite3.DatabaseError:
            return page
    raise AssertionError("no page of data in the second half of the file")


def _page_of(db: Path, table: str) -> int:
    [(page,)] = query(db, "SELECT rootpage FROM sqlite_master WHERE name = ?", (table,))
    return page


def test_a_database_with_random_bytes_is_refused_before_it_is_written(two_folders, capsys) -> None:
    a, b = two_folders
    main(["db", "write", "--results-dir", str(a)])
    db = a / "embprof.sqlite"
    _damage(db, _a_page_that_breaks(db), random.Random(34).randbytes(400), offset=1000)
    before = db.read_bytes()
    err = one_line_error(capsys, ["db", "merge", str(b), "--into", str(db), "--run-id", "other"])
    assert err.startswith(f"embprof db: error: {db}: damaged database (integrity check: ")
    assert err.endswith("restore it from a copy, or write it again from its results folders")
    assert db.read_bytes() == before
    assert one_line_error(capsys, ["db", "write", "--results-dir", str(a)]) == err
    assert db.read_bytes() == before


def test_a_zeroed_page_is_one_line_from_every_reader(two_folders, tmp_path, capsys) -> None:
    a, _ = two_folders
    main(["db", "write", "--results-dir", str(a)])
    db = a / "embprof.sqlite"
    _damage(db, _page_of(db, "configs"), bytes(PAGE), offset=0)
    with pytest.raises(sqlite3.DatabaseError, match="malformed"):
        query(db, "SELECT * FROM configs")
    into = tmp_path / "all.sqlite"
    for argv in (["db", "runs", str(db)], ["db", "schema", str(db)], ["db", "merge", str(db), "--into", str(into)],
                 ["diff", "--db", str(db), "a", "b"]):
        err = one_line_error(capsys, argv)
        assert f": error: {db}: damaged database (integrity check: " in err, argv
    assert not into.exists()


def test_an_empty_file_is_no_database_to_read(two_folders, tmp_path, capsys) -> None:
    a, _ = two_folders
    empty = tmp_path / "empty.sqlite"
    empty.write_bytes(b"")
    into = tmp_path / "all.sqlite"
    assert one_line_error(capsys, ["db", "merge", str(empty), "--into", str(into)]) == (
        f"embprof db: error: {empty}: not an embprof results database (it is empty)")
    assert one_line_error(capsys, ["db", "runs", str(empty)]) == (
        f"embprof db: error: {empty}: not an embprof results database (it is empty)")
    assert not into.exists()
    # As the file written to, an empty one is a new database.
    assert main(["db", "merge", str(a), "--into", str(empty), "--run-id", "a"]) == 0
    assert query(empty, "SELECT run_id FROM runs") == [("a",)]
