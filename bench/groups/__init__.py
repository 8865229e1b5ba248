"""Consumer groups: forming and healing, classic beside KIP-848, coordinator failover,
regex subscriptions, the failover soak."""
