"""minikafka: purgatory package (see ARCHITECTURE.md)."""
