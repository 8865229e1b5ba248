"""What-if in virtual time (issue 24): a capture replayed inside a simulated cluster, and grids
of broker configs x seeds on Spark. It may import broker, protocol, spark_jobs and client_io;
nothing imports it (ARCHITECTURE.md says why it is a package of its own)."""
