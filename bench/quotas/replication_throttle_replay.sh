#!/usr/bin/env bash
# A replication throttle as a what-if: the README's capture -> replay -> compare flow,
# replayed twice against clusters this script runs (figures, no verdict).
#
# 1. a 3-broker cluster captures `minikafka workload` (acks=1 and acks=all producers on
#    "workload", RF 3, a consumer group) for DURATION seconds;
# 2. the capture is replayed against a fresh 3-broker cluster ("default"), and against
#    one throttled as `kafka-reassign-partitions.sh --throttle RATE` throttles
#    ("throttled": leader.replication.throttled.rate and follower.replication.
#    throttled.rate = RATE on every broker, and "workload" created beforehand with
#    leader/follower.replication.throttled.replicas = *), both set with confluent-kafka's
#    AdminClient (IncrementalAlterConfigs, CreateTopics);
# 3. `minikafka compare` puts them side by side; the Produce purgatory row is printed.
#
# Kafka never throttles an in-sync replica (ReplicaManager.shouldLeaderThrottle,
# RemoteLeaderEndPoint.shouldFollowerThrottle), so with every follower in the ISR the
# throttle leaves acks=all alone and the two Produce purgatory rows should agree; the
# throttled side's LeaderReplication byte-rate still counts the replication traffic.
#
#   bench/quotas/replication_throttle_replay.sh    (W=/tmp/replication-throttle-replay PORT=29400
#                                            RATE=100000 DURATION=20)
set -euo pipefail
cd "$(dirname "$0")/../.."
W=${W:-/tmp/replication-throttle-replay}
PORT=${PORT:-29400}
RATE=${RATE:-100000}
DURATION=${DURATION:-20}
# REUSE=1 keeps a previous run's capture and finished replays (a rerun after a failure).
[ "${REUSE:-0}" = 1 ] || rm -rf "$W"
mkdir -p "$W"
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill -INT "$p" 2>/dev/null || true; done' EXIT

serve() {  # serve PORT CAPTURE_DIR LOG: start a 3-broker cluster, wait for its ready line
    .venv/bin/minikafka serve --brokers 3 --port "$1" --capture-dir "$2" \
        --control-port $(($1 + 100)) >"$3" 2>&1 &
    PIDS+=("$!")
    for _ in $(seq 1200); do
        grep -q "minikafka ready" "$3" && return 0
        sleep 0.1
    done
    echo "cluster on port $1 did not start: $3" >&2
    return 1
}

stop_last() {  # a clean stop (Ctrl-C) writes the capture's tail
    local pid=${PIDS[-1]}
    kill -INT "$pid"
    wait "$pid" || true
    unset 'PIDS[-1]'
}

prepare() {  # prepare PORT THROTTLED: the topic as the workload makes it, and the throttle
    .venv/bin/python - "$1" "$2" "$RATE" <<'EOF'
import sys

from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

port, throttled, rate = sys.argv[1], sys.argv[2] == "1", sys.argv[3]
admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "log_level": 3})
configs = {}
if throttled:
    configs = {
        "leader.replication.throttled.replicas": "*",
        "follower.replication.throttled.replicas": "*",
    }
for future in admin.create_topics([NewTopic("workload", 3, 3, config=configs)]).values():
    future.result()
for broker in range(3) if throttled else ():  # librdkafka: one BROKER resource a call
    resource = ConfigResource(
        "BROKER",
        str(broker),
        incremental_configs=[
            ConfigEntry(name, rate, incremental_operation=AlterConfigOpType.SET)
            for name in ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
        ],
    )
    for future in admin.incremental_alter_configs([resource]).values():
        future.result()
print(f"prepared 127.0.0.1:{port} throttled={throttled}")
EOF
}

if [ ! -d "$W/captures" ]; then
    serve "$PORT" "$W/captures" "$W/capture-cluster.log"
    .venv/bin/minikafka workload --bootstrap "127.0.0.1:$PORT" --duration "$DURATION"
    stop_last
fi

for variant in default throttled; do
    [ -f "$W/replay-$variant/_replay.json" ] && continue
    rm -rf "$W/replay-$variant" "$W/target-$variant"
    port=$((PORT + 10))
    serve "$port" "$W/target-$variant" "$W/target-$variant.log"
    prepare "$port" "$([ "$variant" = throttled ] && echo 1 || echo 0)"
    .venv/bin/minikafka replay --capture "$W/captures" --bootstrap "127.0.0.1:$port" \
        --target-capture "$W/target-$variant" --label "$variant" --out "$W/replay-$variant"
    echo "$variant: replication byte-rates at the end of the replay:"
    curl -s "http://127.0.0.1:$((port + 100))/metrics" | grep -E '^kafka_server_(leader|follower)replication_byte_rate' || true
    stop_last
done

.venv/bin/minikafka compare "$W/replay-default" "$W/replay-throttled" --out "$W/what-if"
.venv/bin/python - "$W/what-if/tables" <<'EOF'
import json
import sys
from pathlib import Path

for path in sorted(Path(sys.argv[1]).glob("*.json")):
    rows = json.loads(path.read_text())
    for row in rows:
        if any(str(v).startswith("Produce") for v in row.values()):
            print(path.stem, json.dumps(row))
EOF
