import pytest

from embprof.labels import format_cap, is_config_range, make_label, parse_label, sanitize_label


@pytest.mark.parametrize(
    ("rows", "token"),
    [(25 << 20, "25M"), (1 << 20, "1M"), (3 << 10, "3K"), (1677721, "1677721"), (1000, "1000")],
)
def test_format_cap(rows: int, token: str) -> None:
    assert format_cap(rows) == token


def test_seed_caching_label_matches_design_example() -> None:
    label = make_label(10, 104857, 128, "adam", "caching", "none", [25 << 20] * 10, 1.0)
    assert label == "T10_totalB1048570_D128_adam_caching_pool=none_cap=25M_cfr=1.0"
    assert is_config_range(label)


@pytest.mark.parametrize("mode", ["gpu", "caching", "no_caching", "no_hbm"])
def test_parse_inverts_make(mode: str) -> None:
    cfr = 0.8 if mode == "caching" else None
    label = make_label(3, 64, 16, "sgd", mode, "none", [1000, 2048, 1 << 20], cfr)
    fields = parse_label(label)
    assert (fields.num_tables, fields.total_batch, fields.dim) == (3, 192, 16)
    assert (fields.optimizer, fields.mode, fields.pooling) == ("sgd", mode, "none")
    assert fields.caps == (1000, 2048, 1 << 20)
    assert fields.cache_footprint_ratio == cfr


def test_bad_label_and_mode() -> None:
    with pytest.raises(ValueError, match="not a config label"):
        parse_label("nsys_iter_0")
    with pytest.raises(ValueError, match="mode must be one of"):
        make_label(1, 1, 1, "sgd", "disk", "none", [1])


def test_sanitize() -> None:
    assert sanitize_label("T1_totalB1/x y:z=1.0-") == "T1_totalB1_x_y_z=1.0-"
