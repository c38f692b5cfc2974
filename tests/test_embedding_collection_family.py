"""The workflow's EmbeddingCollection family file: checked with one-line errors, turned into launcher commands."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from suite.embedding_collection.config import parse_config
from suite.embedding_collection.family import FamilyError, load_family

REPO = Path(__file__).resolve().parents[1]


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "family.yaml"
    path.write_text(text)
    return path


def test_launcher_args_parse_back_to_the_run(tmp_path: Path) -> None:
    family = load_family(
        write(tmp_path, "nproc: 2\ncommon_args: ['--rows-scale', '0.25', '--optimizer', 'exact_sgd']\n"
              "runs:\n  dyn_on: [true, true, 4096]\n  trc_off: [false, false, 512]\n")
    )  # fmt: skip
    assert family.env() == "NPROC=2" and family.profile
    for name, (dedup, dynamic, batch) in (
        ("dyn_on", (True, True, 4096)),
        ("trc_off", (False, False, 512)),
    ):
        words = shlex.split(family.launcher_args(name))
        assert words[:3] == [str(dedup), str(dynamic), str(batch)]
        cfg = parse_config(
            [
                "--use-index-dedup",
                words[0],
                "--use-dynamic-embedding",
                words[1],
                "--batch-size",
                words[2],
                *words[3:],
            ]
        )
        assert (cfg.use_index_dedup, cfg.use_dynamic_embedding, cfg.batch_size) == (
            dedup,
            dynamic,
            batch,
        )
        assert cfg.rows_scale == 0.25 and cfg.optimizer == "exact_sgd"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("runs: {}\n", "non-empty 'runs'"),
        ("runs:\n  a: [true, true]\n", "runs.a must be"),
        ("runs:\n  a: [yes please, true, 8]\n", r"runs.a\[0\] must be true or false"),
        ("runs:\n  a: [true, true, 0]\n", "positive integer"),
        ("runs:\n  'a b': [true, true, 8]\n", "run name"),
        ("nproc: 0\nruns:\n  a: [true, true, 8]\n", "nproc must be"),
        ("runs: [\n", "family.yaml"),
    ],
)
def test_malformed_family_is_one_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(FamilyError, match=message) as info:
        load_family(write(tmp_path, text))
    assert "\n" not in str(info.value)
