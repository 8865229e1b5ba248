"""Unit tests: timer, purgatory, coordinators and logs on a ``ManualClock`` (never a sleep);
protocol golden bytes, round trips, random chunking, malformed input; the import map."""
