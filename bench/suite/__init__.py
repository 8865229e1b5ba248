"""The test suite itself, run again and again (some runs on a loaded machine)."""
