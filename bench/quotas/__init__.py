"""Client and replication quotas: achieved rates, Kafka's window algorithm alone."""
