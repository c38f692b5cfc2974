"""The results database (embprof.results.database, ``embprof db``): a results folder as one SQLite
file, rewritten config by config, several runs in one, refused when it is of a newer schema."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pandas as pd
import pytest
from report_inputs import DYN_ROWS, LABELS, TRC_ROWS, write_results
from test_compare import scaled

from embprof.cli import main
from embprof.compare import compare_runs
from embprof.labels import parse_label
from embprof.results.database import SCHEMA_VERSION, read_run
from embprof.results.opcalls import read_opcalls
from embprof.results.paths import ResultsPaths
from embprof.results.records import read_results
from embprof.results.run import Run
from embprof.results.samples import read_samples

V1 = Path(__file__).parent / "data" / "database" / "results_v1.sqlite"

FAILED = LABELS[3]


def query(db: Path, sql: str, params: tuple = ()) -> list[tuple]:
    with sqlite3.connect(db) as con:
        return con.execute(sql, params).fetchall()


def db_write(capsys, results: Path, *args: str) -> str:
    assert main(["db", "write", "--results-dir", str(results), *args]) == 0
    return capsys.readouterr().out.strip()


def one_line_error(capsys, argv: list[str]) -> str:
    assert main(argv) == 1
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err and "\n" not in err and "Traceback" not in err, captured.err
    return err


@pytest.fixture
def results(tmp_path: Path) -> Path:
    return write_results(tmp_path / "results")


def test_a_folder_gives_every_table_with_keys_and_indexes(results, capsys) -> None:
    out = db_write(capsys, results, "--run-id", "week1")
    db = results / "embprof.sqlite"
    assert out == f"{db}: run week1: 6 config(s) written, 0 unchanged, 0 removed"
    configs = query(db, "SELECT label, status, num_tables, total_batch, batch_size, dim, optimizer, suite, cap, "
                        "cap_rows, cfr, failed_step FROM configs WHERE run_id = 'week1' ORDER BY label")
    assert [c[0] for c in configs] == sorted(LABELS)
    for label, status, tables, total, batch, dim, optimizer, suite, cap, rows, cfr, failed_step in configs:
        fields = parse_label(label)
        assert (tables, total, batch, dim, optimizer, suite) == (
            fields.num_tables, fields.total_batch, fields.total_batch // fields.num_tables, fields.dim,
            fields.optimizer, fields.mode)
        assert f"_cap={cap}" in label and rows == sum(fields.caps) and cfr == fields.cache_footprint_ratio
        assert (status, failed_step) == (("failed", "profile") if label == FAILED else ("ok", None))
    # Every number of a per-op CSV is a row, keyed to its config and run.
    for label in LABELS:
        stored = query(db, "SELECT backend, phase, parent_stages, op, avg_ms_per_iter FROM opcalls "
                           "WHERE label = ? ORDER BY rowid", (label,))
        if label == FAILED:
            assert stored == []
            continue
        frame = read_opcalls(ResultsPaths(results).opcalls(label))
        assert stored == list(frame[["backend", "phase", "parent_stages", "op", "avg_ms_per_iter"]]
                              .itertuples(index=False, name=None))
        # and every sample, one row per per-op row and iteration
        samples = query(db, "SELECT backend, phase, parent_stages, op, iteration, ms FROM op_samples "
                            "WHERE label = ? ORDER BY rowid", (label,))
        assert samples == list(read_samples(ResultsPaths(results).samples(label)).itertuples(index=False, name=None))
    records = {r["label"]: r for r in read_results(results / "benchmark_results.json")}
    timings = query(db, "SELECT label, metric, n, median FROM timings")
    assert timings and all(records[lab]["timings"][m]["median"] == med and n == 5 for lab, m, n, med in timings)
    assert query(db, "SELECT count(*) FROM busy WHERE label = ?", (FAILED,)) == [(0,)]
    assert query(db, "PRAGMA foreign_key_check") == []
    leading = set(query(db, "SELECT m.name, i.name FROM sqlite_master m, pragma_index_list(m.name) l, "
                            "pragma_index_info(l.name) i WHERE m.type = 'table' AND i.seqno = 0"))
    assert {("configs", "suite"), ("configs", "optimizer"), ("configs", "status"), ("opcalls", "op"),
            ("opcalls", "backend"), ("timings", "metric"), ("runs", "git_commit")} <= leading
    # A config's rows go with it: foreign keys cascade.
    with sqlite3.connect(db) as con:
        con.execute("PRAGMA foreign_keys = ON")
        con.execute("DELETE FROM configs WHERE label = ?", (LABELS[0],))
    assert query(db, "SELECT count(*) FROM opcalls WHERE label = ?", (LABELS[0],)) == [(0,)]
    assert query(db, "SELECT count(*) FROM op_samples WHERE label = ?", (LABELS[0],)) == [(0,)]


def test_a_rewrite_replaces_only_the_configs_whose_files_changed(results, capsys) -> None:
    db = results / "embprof.sqlite"
    db_write(capsys, results)
    [(run_id,)] = query(db, "SELECT run_id FROM runs")
    with sqlite3.connect(db) as con:  # a stamp the next write must leave on every unchanged config
        con.execute("UPDATE configs SET written_at = 'before'")
    changed = LABELS[1]
    csv = ResultsPaths(results).opcalls(changed)
    frame = read_opcalls(csv)
    frame.loc[frame["op"] == "storage_find", "avg_ms_per_iter"] *= 3
    frame.to_csv(csv, index=False)
    dropped = LABELS[5]
    (results / "configs.tsv").write_text(
        "".join(line + "\n" for line in (results / "configs.tsv").read_text().splitlines() if dropped not in line))
    path = results / "benchmark_results.json"
    path.write_text(json.dumps([r for r in json.loads(path.read_text()) if r["label"] != dropped]))

    assert db_write(capsys, results) == f"{db}: run {run_id}: 1 config(s) written, 4 unchanged, 1 removed"
    stamps = dict(query(db, "SELECT label, written_at FROM configs"))
    assert stamps.pop(changed) != "before" and set(stamps.values()) == {"before"} and dropped not in stamps
    [(ms,)] = query(db, "SELECT avg_ms_per_iter FROM opcalls WHERE label = ? AND op = 'storage_find'", (changed,))
    assert ms == frame.loc[frame["op"] == "storage_find", "avg_ms_per_iter"].item()
    assert query(db, "SELECT count(*) FROM opcalls WHERE label = ?", (dropped,)) == [(0,)]
    # Nothing changed: nothing written.
    assert db_write(capsys, results) == f"{db}: run {run_id}: 0 config(s) written, 5 unchanged, 0 removed"


def test_a_config_that_fails_now_keeps_no_number_of_its_earlier_run(tmp_path, capsys) -> None:
    results = write_results(tmp_path / "results", failed=None)
    db = results / "embprof.sqlite"
    db_write(capsys, results)
    now_failing = LABELS[2]
    assert query(db, "SELECT count(*) FROM opcalls WHERE label = ?", (now_failing,))[0][0] == len(DYN_ROWS + TRC_ROWS)
    # The re-run: its profile fails and its timing too; its old per-op files stay on disk.
    status = results / "status" / f"{now_failing}.json"
    status.write_text(json.dumps(json.loads(status.read_text()) | {
        "ok": False, "failed_step": "profile", "returncode": 1, "log_tail": "RuntimeError: out of memory"}))
    path = results / "benchmark_results.json"
    path.write_text(json.dumps([r for r in json.loads(path.read_text()) if r["label"] != now_failing]))
    assert ResultsPaths(results).opcalls(now_failing).is_file()

    db_write(capsys, results)
    assert query(db, "SELECT status, failed_step, returncode, log_tail FROM configs WHERE label = ?", (now_failing,)) == [
        ("failed", "profile", 1, "RuntimeError: out of memory")]
    for table in ("records", "timings", "opcalls", "op_samples", "busy"):
        assert query(db, f"SELECT count(*) FROM {table} WHERE label = ?", (now_failing,)) == [(0,)], table
    [row] = query(db, "SELECT status, dyn_train_ms, train_ratio, repeats FROM summary WHERE label = ?", (now_failing,))
    assert row == ("failed: profile", None, None, None)
    assert query(db, "SELECT count(*) FROM op_shares WHERE label = ?", (now_failing,)) == [(0,)]


def test_a_newer_schema_is_refused_in_one_line_naming_both_versions(results, capsys) -> None:
    db = results / "embprof.sqlite"
    db_write(capsys, results)
    newer = SCHEMA_VERSION + 1
    with sqlite3.connect(db) as con:
        con.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(newer),))
    before = db.read_bytes()
    line = f"{db}: schema version {newer} is newer than this embprof's ({SCHEMA_VERSION}): read it with a newer embprof"
    assert one_line_error(capsys, ["db", "write", "--results-dir", str(results)]) == f"embprof db: error: {line}"
    assert one_line_error(capsys, ["db", "runs", str(db)]) == f"embprof db: error: {line}"
    assert one_line_error(capsys, ["db", "merge", str(db), "--into", str(results.parent / "all.sqlite")]) == (
        f"embprof db: error: {line}")
    assert one_line_error(capsys, ["diff", "--db", str(db), "a", "b"]) == f"embprof diff: error: {line}"
    assert db.read_bytes() == before and not (results.parent / "all.sqlite").exists()


def test_bad_input_is_one_line_and_leaves_the_database_as_it_was(results, capsys, tmp_path) -> None:
    db = results / "embprof.sqlite"
    db_write(capsys, results)
    before = db.read_bytes()
    csv = ResultsPaths(results).opcalls(LABELS[0])
    good = csv.read_text()
    csv.write_text(good + good.splitlines()[1] + "\n")  # a row repeated
    err = one_line_error(capsys, ["db", "write", "--results-dir", str(results)])
    assert err == f"embprof db: error: {csv}: line {len(good.splitlines()) + 1}: backend, phase, parent_stages and op repeat an earlier row"
    assert db.read_bytes() == before
    csv.write_text(good)
    junk = tmp_path / "junk.sqlite"
    junk.write_text("not a database\n" * 100)
    assert one_line_error(capsys, ["db", "runs", str(junk)]).startswith(f"embprof db: error: {junk}: not an SQLite database")
    assert one_line_error(capsys, ["db", "write", "--results-dir", str(tmp_path / "none")]) == (
        f"embprof db: error: {tmp_path / 'none'}: no such results folder")
    assert one_line_error(capsys, ["db", "write", "--results-dir", str(results), "--run-id", "other"]) == (
        f"embprof db: error: {db}: holds this folder's run as {query(db, 'SELECT run_id FROM runs')[0][0]}; "
        "delete the file to name it other")


@pytest.fixture
def two_runs(tmp_path: Path) -> tuple[Path, Path]:
    """Last week's results and this week's, where one config got twice as slow."""
    old = write_results(tmp_path / "week1", failed=None)
    new = Path(shutil.copytree(old, tmp_path / "week2"))
    path = new / "benchmark_results.json"
    records = json.loads(path.read_text())
    records[1] = scaled(records[1], 2.0)
    path.write_text(json.dumps(records))
    return old, new


def test_merged_runs_compare_as_their_folders_do(two_runs, capsys, tmp_path) -> None:
    old, new = two_runs
    db = tmp_path / "history.sqlite"
    assert main(["db", "merge", str(old), "--into", str(db), "--run-id", "week1"]) == 0
    assert main(["db", "merge", str(new), "--into", str(db), "--run-id", "week2"]) == 0
    capsys.readouterr()
    assert [r[0] for r in query(db, "SELECT run_id FROM runs ORDER BY run_id")] == ["week1", "week2"]

    from_folders = compare_runs(Run.from_folder(old), Run.from_folder(new))
    from_db = compare_runs(read_run(db, "week1"), read_run(db, "week2"))
    pd.testing.assert_frame_equal(from_db.configs, from_folders.configs)
    pd.testing.assert_frame_equal(from_db.ops, from_folders.ops)
    renamed = [w.replace(str(old), "week1").replace(str(new), "week2") for w in from_folders.warnings]
    assert from_db.warnings == renamed

    assert main(["diff", str(old), str(new), "--gate", "50"]) == 1
    by_folder = capsys.readouterr().out
    assert main(["diff", "--db", str(db), "week1", "week2", "--gate", "50"]) == 1
    by_id = capsys.readouterr().out
    assert by_id == by_folder.replace(str(old), "week1").replace(str(new), "week2")
    assert LABELS[1] in next(line for line in by_id.splitlines() if line.startswith("gate 50%: FAILED"))
    assert one_line_error(capsys, ["diff", "--db", str(db), "week1", "week3"]) == (
        f"embprof diff: error: {db}: no run 'week3' (runs: week1, week2)")


def test_a_database_merges_into_another_run_by_run(two_runs, capsys, tmp_path) -> None:
    old, new = two_runs
    db_write(capsys, old, "--run-id", "week1")
    db_write(capsys, new, "--run-id", "week2")
    history = tmp_path / "history.sqlite"
    for source in (old / "embprof.sqlite", new / "embprof.sqlite"):
        assert main(["db", "merge", str(source), "--into", str(history)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == f"{history}: run week2: 6 config(s) written, 0 unchanged, 0 removed"
    tables = ("runs", "configs", "records", "timings", "opcalls", "op_samples", "busy")
    for table in tables:
        own = query(old / "embprof.sqlite", f"SELECT count(*) FROM {table}")[0][0] + query(
            new / "embprof.sqlite", f"SELECT count(*) FROM {table}")[0][0]
        assert query(history, f"SELECT count(*) FROM {table}") == [(own,)], table
    # A merged run is the same run: merging it again changes nothing.
    assert main(["db", "merge", str(new / "embprof.sqlite"), "--into", str(history)]) == 0
    assert capsys.readouterr().out.strip() == f"{history}: run week2: 0 config(s) written, 6 unchanged, 0 removed"
    # Another folder under a run id already taken is refused, naming the way out.
    assert one_line_error(capsys, ["db", "merge", str(new), "--into", str(old / "embprof.sqlite"), "--run-id", "week1"]) == (
        f"embprof db: error: {old / 'embprof.sqlite'}: run week1 is the run of {old.resolve()}: "
        f"pass --run-id NAME to add {new.resolve()} as another run")
    assert main(["db", "runs", str(history)]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert listing[0].split()[:4] == ["run", "own", "configs", "failed"]
    assert [line.split()[0] for line in listing[2:]] == ["week1", "week2"]


def test_a_run_reads_the_same_from_its_folder_and_from_its_database(two_runs, tmp_path) -> None:
    """read_run gives what Run.from_folder gives of the same run, as far as the database keeps it."""
    old, _ = two_runs
    db = tmp_path / "history.sqlite"
    assert main(["db", "merge", str(old), "--into", str(db), "--run-id", "week1"]) == 0
    folder, stored = Run.from_folder(old), read_run(db, "week1")
    assert stored.name == "week1" and stored.paths is None
    assert stored.records == folder.records and stored.environment == folder.environment
    assert (stored.labels, stored.shown, stored.configs) == (folder.labels, folder.shown, folder.configs)
    assert list(stored.opcalls) == list(folder.opcalls) == list(stored.samples)
    for label, frame in folder.opcalls.items():
        pd.testing.assert_frame_equal(stored.opcalls[label], frame, check_dtype=False)
        pd.testing.assert_frame_equal(stored.samples[label], folder.samples[label])
        assert stored.busy[label].ms_per_iter == folder.busy[label].ms_per_iter
        assert stored.busy[label].range_ms_per_iter == folder.busy[label].range_ms_per_iter


def test_a_database_of_schema_1_reads_and_upgrades_when_written(tmp_path, capsys) -> None:
    """Schema 1 kept the samples in opcalls.ms_by_iter: a read goes through an upgraded copy (the file
    unchanged); a write upgrades the file in its transaction, the samples moved to op_samples."""
    db = tmp_path / "v1.sqlite"
    shutil.copy(V1, db)
    before = db.read_bytes()
    legacy = query(db, "SELECT label, backend, phase, parent_stages, op, ms_by_iter FROM opcalls WHERE run_id = 'v1run'")
    run = read_run(db, "v1run")
    assert db.read_bytes() == before
    for label, backend, phase, stages, op, text in legacy:
        samples = run.samples[label]
        mine = samples[(samples.backend == backend) & (samples.phase == phase) & (samples.parent_stages == stages)
                       & (samples.op == op)]
        assert mine["ms"].tolist() == [float(v) for v in text.split(";")] and mine["iteration"].tolist() == [0, 1, 2, 3, 4]
    merged = write_results(tmp_path / "results")
    # A write refused inside its transaction (the run id is another folder's) leaves the file at schema 1.
    assert one_line_error(capsys, ["db", "merge", str(merged), "--into", str(db), "--run-id", "v1run"]).startswith(
        f"embprof db: error: {db}: run v1run is the run of ")
    assert db.read_bytes() == before
    assert main(["db", "merge", str(merged), "--into", str(db), "--run-id", "now"]) == 0
    assert query(db, "SELECT value FROM meta WHERE key = 'schema_version'") == [(str(SCHEMA_VERSION),)]
    assert "ms_by_iter" not in [c[1] for c in query(db, "PRAGMA table_info(opcalls)")]
    assert query(db, "SELECT count(*) FROM op_samples WHERE run_id = 'v1run'") == [(5 * len(legacy),)]
    assert query(db, "PRAGMA foreign_key_check") == [] and query(db, "PRAGMA integrity_check") == [("ok",)]
    assert read_run(db, "v1run").samples.keys() == run.samples.keys()
    assert main(["db", "schema", str(db)]) == 0 and "ms_by_iter" not in capsys.readouterr().out


def test_nvidias_times_are_columns_beside_ours_and_tbes(results, capsys) -> None:
    """Issue 31: a record that timed NVIDIA's dynamicemb gives its medians, its timings rows and, in the
    summary, ours against it; a record without nv has nulls there."""
    paths = ResultsPaths(results)
    label = LABELS[0]
    records = read_results(paths.benchmark_results)
    record = next(r for r in records if r["label"] == label) | {"nv_train_ms": 4.0, "nv_eval_ms": 1.0}
    merged = [record if r["label"] == label else r for r in records]
    paths.benchmark_results.write_text(json.dumps(merged))
    db_write(capsys, results, "--run-id", "nv")
    db = results / "embprof.sqlite"
    assert query(db, "SELECT nv_train_ms, nv_eval_ms FROM records WHERE label = ?", (label,)) == [(4.0, 1.0)]
    assert query(db, "SELECT median FROM timings WHERE label = ? AND metric = 'nv_train_ms'", (label,)) == [(4.0,)]
    [(ratio, eval_ratio)] = query(db, "SELECT nv_ratio, nv_eval_ratio FROM summary WHERE label = ?", (label,))
    assert ratio == pytest.approx(record["dyn_train_ms"] / 4.0) and eval_ratio == pytest.approx(record["dyn_eval_ms"])
    assert query(db, "SELECT nv_ratio FROM summary WHERE label = ?", (LABELS[2],)) == [(None,)]
