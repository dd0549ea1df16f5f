"""A compacted topic through confluent-kafka (librdkafka).

`produce`: creates `changelog` (3 partitions, cleanup.policy=compact, delete.retention.ms
DELETE_RETENTION_MS, min.compaction.lag.ms 0) and writes 100,000 records over 1,000 keys:
keys 100-199 get a tombstone halfway and values again after it, keys 0-99 end with a
tombstone; then one small record per partition, so the big batches are not the entry
holding the tail (which compaction leaves, as Kafka leaves its active segment). Also
`lagged` (min.compaction.lag.ms one hour): 2,000 records over 10 keys. Writes what was
acknowledged, with offsets, to STATE.

`verify`: reads both topics from offset 0 with fresh consumers until `changelog` holds
exactly each live key's last value at the offset it was acknowledged at and nothing of
the deleted keys (or the deadline passes: then fails with what it saw). `lagged` must
still hold all 2,000 records. Prints the live set's bytes.

Usage: compacted.py BOOTSTRAP produce|verify STATE"""
import json
import sys
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

BOOTSTRAP, MODE, STATE = sys.argv[1], sys.argv[2], sys.argv[3]
DELETE_RETENTION_MS = 4000
RECORDS, KEYS, PARTITIONS = 100_000, 1_000, 3
LAGGED_RECORDS = 2_000
PAD = "x" * 100


def value_of(i):
    key = i % KEYS
    if key < 100 and i >= RECORDS - KEYS:
        return None  # keys 0-99 end deleted
    if 100 <= key < 200 and RECORDS // 2 <= i < RECORDS // 2 + KEYS:
        return None  # keys 100-199 deleted halfway, then written again
    return f"{key}:{i}:{PAD}"


def produce():
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    topics = [
        NewTopic("changelog", num_partitions=PARTITIONS, config={
            "cleanup.policy": "compact",
            "delete.retention.ms": str(DELETE_RETENTION_MS),
            "min.compaction.lag.ms": "0",
        }),
        NewTopic("lagged", num_partitions=1, config={"cleanup.policy": "compact", "min.compaction.lag.ms": "3600000"}),
    ]
    for future in admin.create_topics(topics).values():
        future.result(20)
    described = admin.describe_configs([ConfigResource("topic", "changelog")])
    configs = list(described.values())[0].result(20)
    assert configs["cleanup.policy"].value == "compact", configs["cleanup.policy"]
    assert configs["delete.retention.ms"].value == str(DELETE_RETENTION_MS)

    acked, failures = {}, []

    def delivered(err, msg):
        if err is not None:
            failures.append(str(err))
            return
        value = msg.value().decode() if msg.value() is not None else None
        acked.setdefault(msg.topic(), []).append([msg.key().decode(), msg.partition(), msg.offset(), value])

    p = Producer({"bootstrap.servers": BOOTSTRAP, "enable.idempotence": True, "linger.ms": 20})
    for i in range(RECORDS):
        value = value_of(i)
        p.produce("changelog", key=f"key-{i % KEYS}", value=value, on_delivery=delivered)
        if i % 10_000 == 0:
            p.poll(0)
    p.flush(60)
    for partition in range(PARTITIONS):
        p.produce("changelog", key=f"end-{partition}", value="end", partition=partition, on_delivery=delivered)
        p.flush(30)
    for i in range(LAGGED_RECORDS):
        p.produce("lagged", key=f"k{i % 10}", value=str(i), on_delivery=delivered)
    p.flush(60)
    assert not failures, failures[:5]
    assert len(acked["changelog"]) == RECORDS + PARTITIONS, len(acked["changelog"])
    assert len(acked["lagged"]) == LAGGED_RECORDS
    # A record without a key is refused on a compacted topic, as Kafka refuses it.
    refused = []
    p.produce("changelog", value="no key", on_delivery=lambda err, msg: refused.append(err))
    p.flush(30)
    assert refused and refused[0] is not None and refused[0].name() == "INVALID_RECORD", refused
    with open(STATE, "w") as f:
        json.dump(acked, f)
    print("produced", len(acked["changelog"]))


def read_all(topic, partitions, group):
    c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": group, "enable.auto.commit": False})
    ends = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=20)[1] for p in range(partitions)}
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen, done = [], {p for p, end in ends.items() if end == 0}
    while len(done) < partitions:
        m = c.poll(5.0)
        assert m is not None, f"{topic}: no record within 5 s; done {done} of {ends}"
        assert not m.error(), m.error()
        value = m.value().decode() if m.value() is not None else None
        seen.append([m.key().decode(), m.partition(), m.offset(), value])
        if m.offset() + 1 >= ends[m.partition()]:
            done.add(m.partition())
    c.close()
    return seen, ends


def verify():
    with open(STATE) as f:
        acked = json.load(f)
    latest = {}
    for key, partition, offset, value in acked["changelog"]:
        latest[key] = [key, partition, offset, value]
    live = sorted(r for r in latest.values() if r[3] is not None)
    deleted = {k for k, r in latest.items() if r[3] is None}
    assert len(deleted) == 100 and len(live) == KEYS - 100 + PARTITIONS, (len(deleted), len(live))
    deadline, attempt, seen = time.time() + 120, 0, []
    while True:
        attempt += 1
        seen, ends = read_all("changelog", PARTITIONS, f"verify-{attempt}")
        for partition, end in ends.items():
            produced = sum(1 for r in acked["changelog"] if r[1] == partition)
            assert end == produced, f"partition {partition}: high watermark {end}, produced {produced}"
        if sorted(seen) == live:
            break
        assert time.time() < deadline, (
            f"after {attempt} reads: {len(seen)} records, {len(live)} live; "
            f"deleted keys still seen: {sorted({r[0] for r in seen} & deleted)[:5]}; "
            f"unexpected: {[r for r in seen if latest.get(r[0]) != r][:3]}"
        )
        time.sleep(0.5)
    # Offsets are the ones acknowledged, in order within each partition.
    for partition in range(PARTITIONS):
        offsets = [r[2] for r in seen if r[1] == partition]
        assert offsets == sorted(offsets), f"partition {partition} out of order"
    lagged, _ = read_all("lagged", 1, "verify-lagged")
    assert sorted(lagged) == sorted(acked["lagged"]), "min.compaction.lag.ms not honoured"
    live_bytes = sum(len(r[0]) + len(r[3]) for r in live)
    print(json.dumps({"reads": attempt, "live_records": len(live), "live_bytes": live_bytes}))


{"produce": produce, "verify": verify}[MODE]()
