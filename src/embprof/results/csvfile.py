"""Reading a CSV file of the contract: the one place that turns its failures into one line."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import TYPE_CHECKING

from embprof.errors import ContractError

if TYPE_CHECKING:
    import pandas as pd


def read_table(path: str | os.PathLike[str], text: Iterable[str]) -> pd.DataFrame:
    """The file's rows, the ``text`` columns as str ('' for an empty cell, never NaN);
    :class:`ContractError` when it is missing, empty or not a readable CSV."""
    import pandas as pd

    try:
        return pd.read_csv(path, dtype={c: str for c in text}, keep_default_na=False, na_values={})
    except FileNotFoundError:
        raise ContractError(f"{path}: no such file") from None
    except pd.errors.EmptyDataError:
        raise ContractError(f"{path}: empty file, expected a header row") from None
    except (OSError, ValueError, pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise ContractError(f"{path}: not a readable CSV ({str(exc).splitlines()[0]})") from None
