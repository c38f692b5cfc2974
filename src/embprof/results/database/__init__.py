"""The results database (``results/embprof.sqlite``, docs/database.md): a run's files as one
queryable SQLite file, written with sqlite-utils; other runs merged in make it a history.

:mod:`~embprof.results.database.schema` defines its tables and views,
:mod:`~embprof.results.database.rows` turns a run (:class:`~embprof.results.run.Run`) into
rows, :mod:`~embprof.results.database.store` opens a file (refusing a newer schema,
upgrading an older one through :mod:`~embprof.results.database.migrate`) and writes a run
config by config, :mod:`~embprof.results.database.load` puts folders and other databases'
runs in, :mod:`~embprof.results.database.read` takes runs back out (:func:`read_run`: a run
as the same :class:`~embprof.results.run.Run` its folder gives), and
:mod:`~embprof.results.database.describe` prints the schema from a file.
"""

from embprof.results.database.load import merge_into, write_folder
from embprof.results.database.read import read_run
from embprof.results.database.schema import SCHEMA_VERSION
from embprof.results.database.store import reading, writing

__all__ = ["SCHEMA_VERSION", "merge_into", "read_run", "reading", "write_folder", "writing"]
