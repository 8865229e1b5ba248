"""``minikafka simulate``: how much faster than real time it runs."""
