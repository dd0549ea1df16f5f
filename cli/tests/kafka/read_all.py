"""Every record of TOPIC from offset 0 to each partition's high watermark, as JSON
values, or with `positions` as [partition, offset, value] triples.
Usage: read_all.py BOOTSTRAP TOPIC [positions]."""
import json
import sys

from confluent_kafka import Consumer, TopicPartition

BOOTSTRAP, TOPIC = sys.argv[1], sys.argv[2]
POSITIONS = sys.argv[3:] == ["positions"]
c = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "read-all", "enable.auto.commit": False})
partitions = c.list_topics(TOPIC, timeout=20).topics[TOPIC].partitions
ends = {p: c.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=20)[1] for p in partitions}
c.assign([TopicPartition(TOPIC, p, 0) for p in partitions])
values, done = [], {p for p, end in ends.items() if end == 0}
while len(done) < len(partitions):
    m = c.poll(5.0)
    assert m is not None, f"no record within 5 s; done {done} of {ends}"
    assert not m.error(), m.error()
    value = m.value().decode()
    values.append([m.partition(), m.offset(), value] if POSITIONS else value)
    if m.offset() + 1 >= ends[m.partition()]:
        done.add(m.partition())
print(json.dumps(values))
