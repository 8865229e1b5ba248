"""The simulation's own protocol clients: KIP-848 members and share consumers on the
project's client shell, their history and the checkers that read it (issue 33).

aiokafka speaks only the classic group protocol; these clients speak what it does not
(ConsumerGroupHeartbeat, ShareGroupHeartbeat, ShareFetch, ShareAcknowledge) over
`client_io.ClientShell`, so that they run on the simulated network like any other client.
`mix.protocol_clients` is what `workload.run_clients` starts.
"""
