"""The files a workflow may override, shipped with the package: kernel categories, the bandwidth
table, the config schema.

A workflow's own ``config/`` folder wins where it holds a file of the same name
(``config/kernel_categories.yaml``, ``config/bandwidth.yaml``), so a deployed
workflow changes a default by copying the file there and editing it; nothing
reaches outside the package for its defaults.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from embprof.errors import ConfigError

KERNEL_CATEGORIES = "kernel_categories.yaml"
BANDWIDTH_TABLE = "bandwidth.yaml"
CONFIG_SCHEMA = "config.schema.yaml"
OVERRIDABLE = (KERNEL_CATEGORIES, BANDWIDTH_TABLE)


def default_file(name: str) -> Path:
    """The packaged default ``name`` (a file of ``embprof/data/``)."""
    return Path(str(resources.files("embprof").joinpath("data", name)))


def config_file(name: str, config_dir: str | os.PathLike[str] = "config") -> Path:
    """``config_dir/name`` where the workflow has one, else the packaged default."""
    if name not in OVERRIDABLE:
        raise ValueError(f"{name} is not a file a workflow's config/ may override ({OVERRIDABLE})")
    own = Path(config_dir) / name
    return own if own.is_file() else default_file(name)


def read_yaml(path: str | os.PathLike[str], what: str) -> Any:
    """The parsed YAML file; one line (:class:`ConfigError`) when it is missing, unreadable, not
    text or not YAML. ``what`` names what the file should hold."""
    try:
        return yaml.safe_load(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read {what}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text (UTF-8) file; expected {what} in YAML") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({' '.join(str(exc).split())}); expected {what}") from None
