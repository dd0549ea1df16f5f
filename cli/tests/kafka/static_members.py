"""Static group members (group.instance.id, KIP-345) with confluent-kafka: two static
members share a topic; one is closed (a static member sends no LeaveGroup) and started
again under the same instance id. It gets its old partitions back and the other member
sees no rebalance (no revoke or assign callback), then records produced to the restarted
member's partitions reach it; the group lists both instance ids.

Usage: static_members.py BOOTSTRAP. Every step asserts; the first failure exits non-zero."""
import sys
import time

from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer
from confluent_kafka.admin import AdminClient, NewTopic

BOOTSTRAP = sys.argv[1]
TOPIC, GROUP, PARTITIONS = "static", "static-group", 4
DEADLINE_S = 30


def step(name):
    print(f"step: {name}", flush=True)


def member(instance, events):
    c = Consumer({
        "bootstrap.servers": BOOTSTRAP,
        "group.id": GROUP,
        "group.instance.id": instance,
        # Long enough that a member replaced only when its session ran out would show.
        "session.timeout.ms": 45000,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    })
    c.subscribe([TOPIC],
                on_assign=lambda _c, parts: events.append(("assign", sorted(p.partition for p in parts))),
                on_revoke=lambda _c, parts: events.append(("revoke", sorted(p.partition for p in parts))))
    return c


def poll_until(consumers, done, what):
    """Polls every consumer until done() holds; the values each one read."""
    read = {id(c): [] for c in consumers}
    end = time.time() + DEADLINE_S
    while not done(read):
        assert time.time() < end, f"{what}: not within {DEADLINE_S} s (read {read})"
        for c in consumers:
            m = c.poll(0.05)
            if m is not None and m.error() is None:
                read[id(c)].append(m.value())
    return read


step("create the topic; two static members split its partitions")
admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
for f in admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)]).values():
    f.result()
one_events, two_events = [], []
one, two = member("one", one_events), member("two", two_events)
poll_until([one, two], lambda _r: one.assignment() and two.assignment(), "both assigned")
two_partitions = sorted(p.partition for p in two.assignment())
one_partitions = sorted(p.partition for p in one.assignment())
assert sorted(one_partitions + two_partitions) == list(range(PARTITIONS)), (one_partitions, two_partitions)

step("each reads its partitions' records and commits")
producer = Producer({"bootstrap.servers": BOOTSTRAP})
for i in range(40):
    producer.produce(TOPIC, b"v%d" % i, partition=i % PARTITIONS)
assert producer.flush(10) == 0
read = poll_until([one, two], lambda r: sum(len(v) for v in r.values()) >= 40, "the first 40 records")
assert len(read[id(one)]) == 10 * len(one_partitions) and len(read[id(two)]) == 10 * len(two_partitions), read
one.commit(asynchronous=False)
two.commit(asynchronous=False)
one_events_before = list(one_events)

step("the member 'two' is closed and started again under its instance id")
two.close()
two_again_events = []
two_again = member("two", two_again_events)
poll_until([one, two_again], lambda _r: two_again.assignment(), "the restarted member assigned")
assert sorted(p.partition for p in two_again.assignment()) == two_partitions, (two_again.assignment(), two_partitions)
assert one_events == one_events_before, f"the other member saw a rebalance: {one_events[len(one_events_before):]}"
assert sorted(p.partition for p in one.assignment()) == one_partitions

step("records for the restarted member's partitions reach it, from its committed offsets")
for p in two_partitions:
    producer.produce(TOPIC, b"late-%d" % p, partition=p)
assert producer.flush(10) == 0
read = poll_until([one, two_again], lambda r: len(r[id(two_again)]) >= len(two_partitions), "the late records")
assert sorted(read[id(two_again)]) == sorted(b"late-%d" % p for p in two_partitions), read
assert read[id(one)] == [], read

step("the group lists both instance ids")
described = admin.describe_consumer_groups([GROUP])[GROUP].result()
assert sorted(m.group_instance_id for m in described.members) == ["one", "two"], described.members
offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(GROUP)])[GROUP].result()
committed = {tp.partition: tp.offset for tp in offsets.topic_partitions}
assert committed == {p: 10 for p in range(PARTITIONS)}, committed

one.close()
two_again.close()
print("every step passed")
