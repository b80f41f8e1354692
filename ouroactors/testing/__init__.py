"""Testing support: the pytest plugin and helpers to check a system left nothing behind."""

from .leaks import assert_nothing_left as assert_nothing_left

__all__ = ["assert_nothing_left"]
