"""confluent-kafka (librdkafka) consumers under the consumer group protocol (KIP-848,
`group.protocol=consumer`): the coordinator assigns. One member takes every partition;
a second joins and the partitions are split, the first giving its half up before the
second is given it, each member committing what it read when it gives a partition up;
the admin client lists and describes the group as a consumer-protocol group; the first
leaves and the second takes everything. Every record is read exactly once across the
handovers. Then a member of another group subscribing by regular expression is assigned
the topic and reads it all.

Usage: consumer_protocol.py BOOTSTRAP. Every step asserts; the first failure exits
non-zero with its reason."""
import sys
import time

from confluent_kafka import ConsumerGroupType, Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

BOOTSTRAP = sys.argv[1]
TOPIC, GROUP, PARTITIONS = "kip848-events", "kip848-readers", 4
read = {}  # value -> how many times read


def step(name):
    print(f"step: {name}", flush=True)


def produce(start, count):
    producer = Producer({"bootstrap.servers": BOOTSTRAP})
    for i in range(start, start + count):
        producer.produce(TOPIC, b"e%d" % i, partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    return {b"e%d" % i for i in range(start, start + count)}


def member(name):
    consumer = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": GROUP, "group.protocol": "consumer",
                         "client.id": name, "auto.offset.reset": "earliest", "enable.auto.commit": False})

    def on_revoke(c, partitions):
        # What was read from a partition is committed before it is given up.
        owned = [p for p in c.position(partitions) if p.offset >= 0]
        if owned:
            c.commit(offsets=owned, asynchronous=False)

    consumer.subscribe([TOPIC], on_revoke=on_revoke)
    return consumer


def poll_until(consumers, done, limit_s, what):
    deadline = time.time() + limit_s
    while time.time() < deadline:
        for c in consumers:
            m = c.poll(0.1)
            if m is not None and not m.error():
                read[m.value()] = read.get(m.value(), 0) + 1
        if done():
            return
    raise AssertionError(f"not within {limit_s} s: {what}; read {len(read)}")


def assigned(c):
    return sorted(p.partition for p in c.assignment())


admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
for future in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)]).values():
    future.result()

step("one member is assigned every partition and reads them")
first_batch = produce(0, 200)
c1 = member("c1")
poll_until([c1], lambda: first_batch <= read.keys(), 30, "the first member reads everything")
assert assigned(c1) == [0, 1, 2, 3], assigned(c1)
c1.commit(asynchronous=False)

step("a second member joins: the partitions are split, none held by both")
second_batch = produce(200, 200)
c2 = member("c2")
poll_until([c1, c2], lambda: len(assigned(c1)) == 2 and len(assigned(c2)) == 2, 60, "an even split")
assert not set(assigned(c1)) & set(assigned(c2)), (assigned(c1), assigned(c2))
poll_until([c1, c2], lambda: second_batch <= read.keys(), 30, "the second batch read")

step("the admin client lists and describes the group under the consumer protocol")
listed = admin.list_consumer_groups().result().valid
mine = [g for g in listed if g.group_id == GROUP]
assert len(mine) == 1 and mine[0].type == ConsumerGroupType.CONSUMER, [(g.group_id, g.type) for g in listed]
described = admin.describe_consumer_groups([GROUP])[GROUP].result()
assert described.type == ConsumerGroupType.CONSUMER, described.type
owners = sorted((m.client_id, sorted(p.partition for p in m.assignment.topic_partitions)) for m in described.members)
assert owners == sorted([("c1", assigned(c1)), ("c2", assigned(c2))]), owners

step("the first member leaves: the second takes every partition")
c1.commit(asynchronous=False)
c1.close()
third_batch = produce(400, 100)
poll_until([c2], lambda: assigned(c2) == [0, 1, 2, 3] and third_batch <= read.keys(), 60, "the takeover")
c2.commit(asynchronous=False)
c2.close()

duplicates = {v: n for v, n in read.items() if n > 1}
assert not duplicates and len(read) == 500, (len(read), sorted(duplicates)[:10])

step("a member of another group subscribing by regular expression gets every matching topic")
pattern = Consumer({"bootstrap.servers": BOOTSTRAP, "group.id": "kip848-pattern", "group.protocol": "consumer",
                    "auto.offset.reset": "earliest", "enable.auto.commit": False})
pattern.subscribe(["^kip848-.*"])
seen = set()
deadline = time.time() + 60
while time.time() < deadline and len(seen) < 500:
    m = pattern.poll(0.2)
    if m is not None and not m.error():
        seen.add(m.value())
assert seen == set(read), (len(seen), len(read))
assert sorted((p.topic, p.partition) for p in pattern.assignment()) == [(TOPIC, p) for p in range(PARTITIONS)]
pattern.close()
print("every step passed")
