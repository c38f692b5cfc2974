"""The options a suite of the reference system's contract takes (NVIDIA's benchmark/conftest.py has
the same names): a CPU stand-in, so that the workflow's path for another suite runs in CI."""

from __future__ import annotations


def pytest_addoption(parser):
    parser.addoption("--profile", default=None, choices=["torch", "nsys", "ncu-gen", "ncu"])
    parser.addoption("--num-iterations", type=int, default=None)
    parser.addoption("--no-torchrec", action="store_true", default=False)
