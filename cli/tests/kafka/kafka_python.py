"""kafka-python (an independent implementation of the protocol) against `shale serve
--kafka`, unmodified. Usage: kafka_python.py BOOTSTRAP. Every step asserts."""
import sys
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions, NewTopic
from kafka.errors import InvalidTopicError, TopicAlreadyExistsError

BOOTSTRAP = sys.argv[1]

admin = KafkaAdminClient(bootstrap_servers=BOOTSTRAP)
admin.create_topics([NewTopic("py-events", num_partitions=2, replication_factor=1, topic_configs={"retention.ms": "86400000"})])
try:
    admin.create_topics([NewTopic("py-events", num_partitions=2, replication_factor=1)])
    raise AssertionError("a second create was accepted")
except TopicAlreadyExistsError:
    pass
try:
    admin.create_topics([NewTopic("bad/name", num_partitions=1, replication_factor=1)])
    raise AssertionError("an invalid topic name was accepted")
except InvalidTopicError:
    pass
assert "py-events" in admin.list_topics()

configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "py-events")])
text = repr(configs)
assert "retention.ms" in text and "86400000" in text, text

for codec in ["gzip", "snappy", "lz4", "zstd", None]:
    p = KafkaProducer(bootstrap_servers=BOOTSTRAP, acks="all", compression_type=codec, enable_idempotence=True)
    futures = [p.send("py-events", key=b"k%d" % i, value=b"%s-%d" % (str(codec).encode(), i), headers=[("n", b"%d" % i)]) for i in range(25)]
    p.flush()
    offsets = [f.get(20) for f in futures]
    assert all(md.offset >= 0 for md in offsets), offsets
    p.close()

c = KafkaConsumer("py-events", bootstrap_servers=BOOTSTRAP, group_id="py-group", auto_offset_reset="earliest", enable_auto_commit=False)
got = []
deadline = time.time() + 60
while len(got) < 125 and time.time() < deadline:
    for records in c.poll(timeout_ms=500).values():
        got.extend(records)
assert len(got) == 125, len(got)
assert len({r.value for r in got}) == 125, "every record once"
for partition in (0, 1):
    offsets = [r.offset for r in got if r.partition == partition]
    assert offsets == sorted(offsets), "per-partition order"
assert all(r.headers == [("n", r.key[1:])] for r in got), got[0]
c.commit()
positions = {p: c.committed(TopicPartition("py-events", p)) for p in (0, 1)}
assert sum(positions.values()) == 125, positions
c.close()

admin.create_partitions({"py-events": NewPartitions(total_count=5)})
c = KafkaConsumer(bootstrap_servers=BOOTSTRAP)
assert c.partitions_for_topic("py-events") == {0, 1, 2, 3, 4}, c.partitions_for_topic("py-events")
tp = TopicPartition("py-events", 0)
end = c.end_offsets([tp])[tp]
assert end == positions[0], (end, positions)
assert c.beginning_offsets([tp])[tp] == 0
c.close()
# Incremental fetch sessions (KIP-227): kafka-python opens one with its first fetch and
# goes on in it, each later fetch naming only what moved; every record still arrives. At
# least four fetches took the four records: the session is at its fourth epoch or past.
c = KafkaConsumer(bootstrap_servers=BOOTSTRAP, fetch_max_wait_ms=100)
tps = [TopicPartition("py-events", p) for p in (0, 1)]
c.assign(tps)
c.seek_to_end()
ends = [c.position(tp) for tp in tps]  # looked up now, before the records below
p = KafkaProducer(bootstrap_servers=BOOTSTRAP, acks="all")
for n in range(4):
    p.send("py-events", value=b"round-%d" % n, partition=n % 2).get(20)
    seen, deadline = [], time.time() + 20
    while not seen and time.time() < deadline:
        seen = [r.value for records in c.poll(timeout_ms=200).values() for r in records]
    assert seen == [b"round-%d" % n], (n, seen)
sessions = [h.next_metadata for h in c._fetcher._session_handlers.values()]
assert any(m.session_id != 0 and m.epoch >= 4 for m in sessions), [(m.session_id, m.epoch) for m in sessions]
p.close()
c.close()

# A 3 MB record (Kafka takes up to 8 MiB here) reaches a consumer with kafka-python's
# defaults (1 MiB a partition per fetch), and so does the record after it.
admin.create_topics([NewTopic("py-large", num_partitions=1, replication_factor=1)])
p = KafkaProducer(bootstrap_servers=BOOTSTRAP, acks="all", max_request_size=4_000_000)
sent = [p.send("py-large", value=value).get(20).offset for value in (b"L" * 3_000_000, b"after")]
assert sent == [0, 1], sent
p.close()
c = KafkaConsumer(bootstrap_servers=BOOTSTRAP, auto_offset_reset="earliest", consumer_timeout_ms=20_000)
c.assign([TopicPartition("py-large", 0)])
got = []
for record in c:
    got.append((record.offset, len(record.value)))
    if len(got) == 2:
        break
assert got == [(0, 3_000_000), (1, 5)], got
c.close()

admin.delete_topics(["py-events", "py-large"])
assert "py-events" not in admin.list_topics()
print("kafka-python: every step passed")
