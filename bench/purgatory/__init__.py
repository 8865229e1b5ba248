"""The purgatory's timing wheel: Kafka's TestPurgatoryPerformance, share-group locks."""
