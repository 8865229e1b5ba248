"""The simulated clients beyond aiokafka's mix (issue 33), each in a module of its own, on
the project's client over the simulated network (`client_io.ClientShell`, `raw`):

- a transactions-v2 pipeline (`tv2`), a DeleteRecords caller (`deleter`), a quota-throttled
  producer (`throttled`), and the recording of aiokafka's transactions (`aiokafka_txn`),
  started by `workload.start_more_clients`;
- KIP-848 members and share consumers (ConsumerGroupHeartbeat, ShareGroupHeartbeat,
  ShareFetch, ShareAcknowledge: what aiokafka does not speak), their history and the
  checkers that read it; `mix.protocol_clients` is what `workload.run_clients` starts;
- a Kafka Streams application (`streams_app`): a streams group whose members die, leave
  and come back;
- a SCRAM client on the SASL_PLAINTEXT listener with ACLs, the admin that revokes and gives
  back its WRITE, and a client with a wrong password (`sasl_app`), their history
  (`sasl_history`) and checks (`sasl_checks`); `sasl_app.sasl_clients` is what
  `workload.run_clients` starts.
"""
