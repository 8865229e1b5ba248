"""The simulated clients beyond aiokafka's mix (issue 33), each in a module of its own:
the project's own client over the simulated network (`raw`), a transactions-v2 pipeline
(`tv2`), a DeleteRecords caller (`deleter`), a quota-throttled producer (`throttled`), and
the recording of aiokafka's transactions (`aiokafka_txn`). `workload.start_more_clients`
starts them."""
