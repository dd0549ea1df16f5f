"""confluent-kafka (librdkafka) transactional producers against `shale serve --kafka`.

Usage: transactions.py BOOTSTRAP. Commits and aborts across 3 topics x 3 partitions,
read_committed and read_uncommitted consumers, a zombie producer fenced by a newer
epoch, an abandoned transaction timed out, and a consume-transform-produce loop whose
offsets commit with its output (send_offsets_to_transaction). Every step asserts.
"""
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

BOOTSTRAP = sys.argv[1]
TOPICS = ["tx-a", "tx-b", "tx-c"]
PARTITIONS = 3


def create(topic, partitions):
    admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
    for future in admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)]).values():
        future.result(20)


def producer(transactional_id, **extra):
    config = {"bootstrap.servers": BOOTSTRAP, "transactional.id": transactional_id, "linger.ms": 5}
    config.update(extra)
    p = Producer(config)
    p.init_transactions(20)
    return p


def read_everything(topics, isolation, expected, partitions=PARTITIONS, seconds=30):
    """Every record of `topics` from the start, by a consumer with `isolation`: polls
    until `expected` arrived and then one second more (a record past it would show)."""
    c = Consumer({
        "bootstrap.servers": BOOTSTRAP,
        "group.id": f"reader-{isolation}-{time.time()}",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "isolation.level": isolation,
    })
    c.assign([TopicPartition(t, p, 0) for t in topics for p in range(partitions)])
    got = []
    deadline = time.time() + seconds
    quiet_until = None
    while time.time() < deadline:
        m = c.poll(0.2)
        if m is not None:
            assert not m.error(), m.error()
            got.append(m)
        if len(got) >= expected:
            quiet_until = quiet_until or time.time() + 1
            if time.time() > quiet_until:
                break
    c.close()
    return got


def send_transaction(p, label, count):
    """One transaction's records: `count` over every partition of every topic."""
    for i in range(count):
        topic = TOPICS[i % len(TOPICS)]
        p.produce(topic, key=f"k{i}".encode(), value=f"{label}-{i}".encode(), partition=(i // len(TOPICS)) % PARTITIONS)
    assert p.flush(20) == 0


def commit_and_abort():
    for topic in TOPICS:
        create(topic, PARTITIONS)
    p = producer("tx-main")
    for label, commit in [("c1", True), ("a2", False), ("c3", True), ("a4", False)]:
        p.begin_transaction()
        send_transaction(p, label, 45)
        if commit:
            p.commit_transaction(20)
        else:
            p.abort_transaction(20)
    # An empty transaction commits too.
    p.begin_transaction()
    p.commit_transaction(20)
    expected = [f"c1-{i}" for i in range(45)] + [f"c3-{i}" for i in range(45)]
    for isolation in ["read_committed", "read_uncommitted"]:
        got = read_everything(TOPICS, isolation, len(expected))
        values = [m.value().decode() for m in got]
        assert sorted(values) == sorted(expected), f"{isolation}: {len(values)} records, aborted ones: {[v for v in values if v.startswith('a')][:5]}"
        # Per partition: offsets dense from 0, the first transaction's records before the second's, in send order.
        by_partition = {}
        for m in got:
            by_partition.setdefault((m.topic(), m.partition()), []).append(m)
        for (topic, partition), messages in by_partition.items():
            assert [m.offset() for m in messages] == list(range(len(messages))), f"{topic}/{partition} offsets {[m.offset() for m in messages]}"
            order = [(m.value().decode().split("-")[0], int(m.value().decode().split("-")[1])) for m in messages]
            assert order == sorted(order), f"{topic}/{partition} out of order: {order}"
    print("commit and abort: read_committed and read_uncommitted see exactly the committed transactions")


def zombie_is_fenced():
    zombie = producer("tx-zombie")
    zombie.begin_transaction()
    zombie.produce("tx-a", value=b"zombie", partition=0)
    assert zombie.flush(20) == 0
    successor = producer("tx-zombie")
    try:
        zombie.produce("tx-a", value=b"zombie-late", partition=1)
        zombie.flush(10)
        zombie.commit_transaction(10)
        raise AssertionError("the zombie committed after a newer epoch")
    except KafkaException as e:
        error = e.args[0]
        assert error.fatal() or error.txn_requires_abort(), f"fenced: {error}"
        assert "fenced" in error.str().lower() or "epoch" in error.str().lower(), error.str()
    successor.begin_transaction()
    successor.produce("tx-a", value=b"successor", partition=0)
    successor.commit_transaction(20)
    values = [m.value() for m in read_everything(["tx-a"], "read_committed", 31)]
    assert b"successor" in values and b"zombie" not in values and b"zombie-late" not in values, values[-5:]
    print("zombie fenced: its open transaction aborted, the successor's committed")


def abandoned_transaction_times_out():
    p = producer("tx-abandoned", **{"transaction.timeout.ms": 2000, "message.timeout.ms": 2000})
    p.begin_transaction()
    p.produce("tx-b", value=b"abandoned", partition=0)
    assert p.flush(20) == 0
    # The server aborts it within its check interval (10 s) after the 2 s timeout.
    time.sleep(14)
    try:
        p.commit_transaction(10)
        raise AssertionError("a timed-out transaction committed")
    except KafkaException as e:
        assert e.args[0].fatal() or e.args[0].txn_requires_abort(), e.args[0]
    values = [m.value() for m in read_everything(["tx-b"], "read_committed", 30)]
    assert b"abandoned" not in values, "an abandoned transaction left a record"
    print("abandoned transaction timed out: nothing visible, the producer fenced")


def consume_transform_produce():
    create("eos-in", 2)
    create("eos-out", 2)
    source = Producer({"bootstrap.servers": BOOTSTRAP, "enable.idempotence": True})
    for i in range(200):
        source.produce("eos-in", value=str(i).encode(), partition=i % 2)
    assert source.flush(20) == 0
    c = Consumer({
        "bootstrap.servers": BOOTSTRAP,
        "group.id": "eos",
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
    })
    c.subscribe(["eos-in"])
    p = producer("tx-eos")
    done = 0
    deadline = time.time() + 60
    aborted_once = False
    while done < 200 and time.time() < deadline:
        batch = c.consume(50, 1.0)
        if not batch:
            continue
        p.begin_transaction()
        for m in batch:
            assert not m.error(), m.error()
            p.produce("eos-out", value=f"{int(m.value()) * 2}".encode(), partition=m.partition())
        p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), 20)
        if not aborted_once:
            # The first batch is aborted: its output must vanish and its input be read again.
            p.abort_transaction(20)
            aborted_once = True
            for tp in c.assignment():
                committed = c.committed([tp], timeout=10)[0].offset
                c.seek(TopicPartition(tp.topic, tp.partition, committed if committed >= 0 else 0))
            continue
        p.commit_transaction(20)
        done += len(batch)
    assert done == 200, f"transformed {done} of 200"
    committed = c.committed([TopicPartition("eos-in", p) for p in range(2)], timeout=10)
    assert [tp.offset for tp in committed] == [100, 100], committed
    c.close()
    outputs = sorted(int(m.value()) for m in read_everything(["eos-out"], "read_committed", 200, partitions=2))
    assert outputs == [2 * i for i in range(200)], f"{len(outputs)} outputs, duplicates or gaps"
    print("consume-transform-produce: one output per input, offsets committed with them")


if __name__ == "__main__":
    commit_and_abort()
    zombie_is_fenced()
    abandoned_transaction_times_out()
    consume_transform_produce()
    print("every step passed")
