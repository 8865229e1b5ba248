"""The project's tests: ``unit/`` (no sleeping, manual clock), ``integration/`` (real brokers
on 127.0.0.1 and real clients) and ``helpers/`` (what both share)."""
