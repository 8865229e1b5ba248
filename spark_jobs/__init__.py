"""minikafka: spark_jobs package (see ARCHITECTURE.md)."""
