"""The benchmarks: figures and ratios, never pass/fail (bench/README.md).

Run from the repository root as modules, ``.venv/bin/python -m bench.<subject>.<script>``:
the root is then on ``sys.path`` and every bench imports ``bench.lib``, ``testkit`` and the
product packages absolutely. ``lib/`` is what the benches share; ``testkit`` (top level)
is what they share with the tests.
"""
