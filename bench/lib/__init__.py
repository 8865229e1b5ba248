"""What the benchmarks share: percentiles, a process's RSS, aligned tables, another
checkout's codec. Broker processes and Spark clusters are in ``testkit`` (the tests use
them too)."""
