"""The schema of a results database as Markdown, read from the file itself: its tables, views,
columns, keys and indexes from SQLite's catalogue, what each means from its ``schema_docs``."""

from __future__ import annotations

import sqlite_utils

from embprof.results.database.schema import DOCS, SCHEMA_VERSION
from embprof.results.database.store import meta_value, prepare


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def schema_markdown(db: sqlite_utils.Database) -> str:
    """One section per table and view, in the order they were made, with a row per column."""
    docs: dict[tuple[str, str], str] = {
        (row["name"], row["column_name"]): row["description"]
        for row in db.query(f"SELECT name, column_name, description FROM {DOCS.name}")
    }
    version = meta_value(db, "schema_version") or str(SCHEMA_VERSION)
    lines = [f"Schema version {version}.", ""]
    for table in db.tables:
        lines += [f"### `{table.name}`", "", docs.get((table.name, ""), ""), ""]
        keys = {column: "PK" for column in table.pks if not table.use_rowid}
        for fk in table.foreign_keys:
            target = f"→ {fk.other_table}({', '.join(fk.other_columns)})"
            for column in fk.columns:
                keys[column] = " ".join(filter(None, [keys.get(column), target]))
        lines += ["| column | type | key | meaning |", "| --- | --- | --- | --- |"]
        lines += [
            f"| `{c.name}` | {c.type} | {keys.get(c.name, '')} | {_cell(docs.get((table.name, c.name), ''))} |"
            for c in table.columns
        ]
        indexes = sorted(", ".join(i.columns) for i in table.indexes if not i.name.startswith("sqlite_autoindex"))
        lines += ["", f"Indexes: {'; '.join(f'({i})' for i in indexes)}." if indexes else "", ""]
    for view in db.views:
        lines += [f"### `{view.name}` (view)", "", docs.get((view.name, ""), ""), ""]
        lines += ["| column | meaning |", "| --- | --- |"]
        lines += [f"| `{c.name}` | {_cell(docs.get((view.name, c.name), ''))} |" for c in view.columns]
        lines.append("")
    return "\n".join(line for i, line in enumerate(lines) if line or (i and lines[i - 1])).rstrip() + "\n"


def empty_schema_markdown() -> str:
    """The schema of a database this embprof writes, from a new one in memory."""
    db = sqlite_utils.Database(memory=True)
    try:
        with db.atomic():
            prepare(db)
        return schema_markdown(db)
    finally:
        db.close()
