"""minikafka: protocol package (see ARCHITECTURE.md)."""
