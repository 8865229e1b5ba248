"""The nemesis's newer faults, each in a module of its own (`simulation.nemesis` runs them).

- `links`: FoundationDB's swizzle-clogging and turmoil's hold/release, over the mechanisms
  of `virtual_time.network` (cuts are clogs; `hold_between`/`release_between`);
- `clock_skew`: one broker's clocks off the virtual time (a step on its wall clock, a drift
  on both), handed to the brokers through the composition root (``broker_clocks``).

The crash that loses what was not flushed is `broker.app.MiniKafka.crash_broker` (the
memory logs are the simulated disk); BUGGIFY's points are `broker.buggify`.
"""
