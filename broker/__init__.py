"""minikafka: broker package (see ARCHITECTURE.md)."""
