"""confluent-kafka's share consumer (KIP-932, librdkafka's ShareConsumer) against Shale's
share groups: two members of one share group read a topic's records, each record
delivered to exactly one of them (how many each takes is up to their fetches' timing); a group starts at the latest offset (Kafka's default);
a record released in explicit mode comes back with its delivery count raised; and (run
again after a restart of the server) what was accepted stays done and what was never
read is still delivered.

Usage: share_groups.py BOOTSTRAP first|again. Every step asserts; the first failure exits
non-zero with its reason."""
import sys
import time

from confluent_kafka import AcknowledgeType, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

BOOTSTRAP, PHASE = sys.argv[1], sys.argv[2]
TOPIC, PARTITIONS = "share-jobs", 3
SPLIT, EXPLICIT = "share-workers", "share-careful"


def step(name):
    print(f"step: {name}", flush=True)


def produce(values):
    producer = Producer({"bootstrap.servers": BOOTSTRAP, "linger.ms": 5})
    for i, value in enumerate(values):
        producer.produce(TOPIC, value.encode(), partition=i % PARTITIONS)
    assert producer.flush(30) == 0


def member(group, explicit=False):
    config = {"bootstrap.servers": BOOTSTRAP, "group.id": group}
    if explicit:
        config["share.acknowledgement.mode"] = "explicit"
    consumer = ShareConsumer(config)
    consumer.subscribe([TOPIC])
    return consumer


def poll_values(consumer, timeout=0.5):
    return [m for m in consumer.poll(timeout) if m.error() is None]


def started(consumers, prefix):
    """Produces probes until every consumer's group has handed one out: the groups start at
    the latest offset, so only records produced after that are theirs."""
    seen = [False] * len(consumers)
    deadline = time.time() + 60
    n = 0
    while not all(seen):
        assert time.time() < deadline, f"no probe delivered within 60 s: {seen}"
        produce([f"{prefix}-probe-{n}-{p}" for p in range(PARTITIONS)])
        n += 1
        for i, c in enumerate(consumers):
            if any(m.value().startswith(b"%s-probe" % prefix.encode()) for m in poll_values(c)):
                seen[i] = True


def first_phase():
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    for future in admin.create_topics([NewTopic(TOPIC, num_partitions=PARTITIONS)]).values():
        future.result(20)
    produce([f"before-{i}" for i in range(30)])

    step("two members of one share group: each record delivered to exactly one of them")
    a, b = member(SPLIT), member(SPLIT)
    started([a], "split")
    jobs = [f"job-{i}" for i in range(300)]
    got = {"a": [], "b": []}
    produce(jobs)
    deadline = time.time() + 60
    while len(set(got["a"]) | set(got["b"])) < len(jobs):
        assert time.time() < deadline, f"delivered {len(got['a']) + len(got['b'])} of {len(jobs)} within 60 s"
        for name, consumer in (("a", a), ("b", b)):
            for m in poll_values(consumer, 0.2):
                value = m.value().decode()
                assert not value.startswith("before-"), f"{value}: a share group starts at the latest offset"
                if value.startswith("job-"):
                    got[name].append(value)
    delivered = got["a"] + got["b"]
    assert sorted(delivered) == sorted(jobs), f"each job delivered once: {len(delivered)} deliveries"
    print(f"a took {len(got['a'])}, b took {len(got['b'])}", flush=True)
    # Implicit mode accepts a poll's records at the next poll: poll once more, then close.
    for consumer in (a, b):
        assert all(not m.value().startswith(b"job-") for m in poll_values(consumer, 0.5))
        consumer.close()

    step("a released record comes back, delivered a second time")
    careful = member(EXPLICIT, explicit=True)
    deadline = time.time() + 60
    n = 0
    while True:
        assert time.time() < deadline, "the explicit member was never handed a probe"
        produce([f"careful-probe-{n}-{p}" for p in range(PARTITIONS)])
        n += 1
        batch = poll_values(careful)
        for m in batch:
            careful.acknowledge(m)
        if batch:
            careful.commit_sync(30)
            break
    produce(["task-0", "task-1", "task-2"])
    released, deadline, seen = None, time.time() + 60, {}
    while len([v for v in seen if v.startswith("task-")]) < 3 or (released and seen.get(released, 0) < 2):
        assert time.time() < deadline, f"not within 60 s: {seen}"
        for m in poll_values(careful):
            value = m.value().decode()
            seen[value] = seen.get(value, 0) + 1
            if value.startswith("task-") and released is None:
                released = value
                careful.acknowledge(m, AcknowledgeType.RELEASE)
            else:
                if value == released:
                    assert m.delivery_count() == 2, f"{value} redelivered with count {m.delivery_count()}"
                careful.acknowledge(m)
        careful.commit_sync(30)
    assert seen[released] == 2 and all(seen[f"task-{i}"] == 1 for i in range(3) if f"task-{i}" != released), seen
    careful.close()

    step("records appended after the members left wait for the group")
    produce([f"later-{i}" for i in range(9)])


def again():
    step("after a restart: what was accepted stays done, what was never read is delivered")
    # The split group read up to its jobs; everything appended after (the other group's
    # probes and tasks, then the later records) it never read.
    consumer = member(SPLIT)
    got, deadline = [], time.time() + 60
    while len([v for v in got if v.startswith("later-")]) < 9:
        assert time.time() < deadline, f"only {got} within 60 s"
        for m in poll_values(consumer):
            value = m.value().decode()
            assert value.startswith(("later-", "task-", "careful-probe-")), f"{value} delivered after it was accepted"
            got.append(value)
    assert len(got) == len(set(got)), f"delivered twice: {got}"
    assert all(f"task-{i}" in got for i in range(3)), got
    assert not poll_values(consumer, 1.0), "nothing more"
    consumer.close()


first_phase() if PHASE == "first" else again()
print("every step passed", flush=True)
