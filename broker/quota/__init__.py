"""Client quotas and throttling, as Kafka's ``kafka.server`` quota managers.

``client_quota_store`` (the cluster's quotas: entities, validation, ``client-quotas.json``),
``sampled_rate`` (Kafka's ``Rate`` over ``SampledStat`` windows), ``client_quota_manager``
(``ClientQuotaManager``, ``ClientRequestQuotaManager``), ``controller_mutation_quota``
(KIP-599's token bucket for CreateTopics, CreatePartitions, DeleteTopics), ``throttled_channel``
(``ThrottledChannel`` and its reaper on a timing wheel), ``quota_managers`` (Kafka's
``QuotaManagers`` and what ``KafkaApis`` records per API: the dispatcher's one call),
``quota_metrics`` (their ``/metrics`` families).
"""
