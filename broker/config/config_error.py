"""The error a refused broker config raises (its own module: the properties parser and
the config model both raise it)."""

from __future__ import annotations


class ConfigError(ValueError):
    """A configuration key or value the broker cannot start with."""
