"""kafka-python transactional producers against `shale serve --kafka`, unmodified.

Usage: transactions_kafka_python.py BOOTSTRAP. Commits and aborts across 3 topics x 3
partitions read by read_committed consumers, a zombie producer fenced by a newer one,
offsets committed in a transaction. Every step asserts.
"""
import sys
import time

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata

BOOTSTRAP = sys.argv[1]
TOPICS = ["pytx-a", "pytx-b", "pytx-c"]
PARTITIONS = 3

admin = KafkaAdminClient(bootstrap_servers=BOOTSTRAP)
admin.create_topics([NewTopic(t, num_partitions=PARTITIONS, replication_factor=1) for t in TOPICS + ["pytx-in"]])


def producer(transactional_id):
    p = KafkaProducer(bootstrap_servers=BOOTSTRAP, transactional_id=transactional_id, linger_ms=5)
    p.init_transactions()
    return p


def read_committed(topics, expected, seconds=30):
    c = KafkaConsumer(bootstrap_servers=BOOTSTRAP, isolation_level="read_committed", auto_offset_reset="earliest", enable_auto_commit=False, group_id=None)
    c.assign([TopicPartition(t, p) for t in topics for p in range(PARTITIONS)])
    c.seek_to_beginning()
    got = []
    deadline = time.time() + seconds
    quiet_until = None
    while time.time() < deadline:
        for records in c.poll(timeout_ms=200).values():
            got.extend(records)
        if len(got) >= expected:
            quiet_until = quiet_until or time.time() + 1
            if time.time() > quiet_until:
                break
    c.close()
    return got


# Commits and aborts interleaved: only the committed ones are ever read.
p = producer("pytx-main")
for label, commit in [("c1", True), ("a2", False), ("c3", True)]:
    p.begin_transaction()
    for i in range(27):
        p.send(TOPICS[i % 3], key=b"k%d" % i, value=b"%s-%d" % (label.encode(), i), partition=(i // 3) % PARTITIONS)
    p.flush()
    if commit:
        p.commit_transaction()
    else:
        p.abort_transaction()
expected = sorted(b"%s-%d" % (label, i) for label in [b"c1", b"c3"] for i in range(27))
got = read_committed(TOPICS, len(expected))
assert sorted(r.value for r in got) == expected, sorted(r.value for r in got)[:10]
by_partition = {}
for r in got:
    by_partition.setdefault((r.topic, r.partition), []).append(r.offset)
assert all(offsets == list(range(len(offsets))) for offsets in by_partition.values()), by_partition
print("commit and abort: read_committed sees exactly the committed transactions")

# A newer producer with the same transactional id fences the older one.
zombie = producer("pytx-zombie")
zombie.begin_transaction()
zombie.send("pytx-a", value=b"zombie", partition=0)
zombie.flush()
successor = producer("pytx-zombie")
try:
    zombie.commit_transaction()
    raise AssertionError("the zombie committed after a newer epoch")
except KafkaError as e:
    assert "Fenced" in type(e).__name__ or "Epoch" in type(e).__name__ or "fenced" in str(e).lower(), repr(e)
successor.begin_transaction()
successor.send("pytx-a", value=b"successor", partition=0)
successor.commit_transaction()
values = [r.value for r in read_committed(["pytx-a"], 19)]
assert b"successor" in values and b"zombie" not in values, values
print("zombie fenced")

# Offsets committed inside a transaction land with it, and not when it aborts.
source = KafkaProducer(bootstrap_servers=BOOTSTRAP)
for i in range(5):
    source.send("pytx-in", value=b"in-%d" % i, partition=0)
source.flush()


def group_offset():
    c = KafkaConsumer(bootstrap_servers=BOOTSTRAP, group_id="pytx-group", enable_auto_commit=False)
    offset = c.committed(TopicPartition("pytx-in", 0))
    c.close()
    return offset


for offset, commit in [(3, False), (5, True)]:
    p.begin_transaction()
    p.send("pytx-b", value=b"with-offset-%d" % offset, partition=0)
    p.send_offsets_to_transaction({TopicPartition("pytx-in", 0): OffsetAndMetadata(offset, "", -1)}, "pytx-group")
    p.flush()
    if commit:
        p.commit_transaction()
    else:
        p.abort_transaction()
        assert group_offset() is None, "an aborted transaction's offset was committed"
assert group_offset() == 5, group_offset()
values = [r.value for r in read_committed(["pytx-b"], 19)]
assert b"with-offset-5" in values and b"with-offset-3" not in values, values
print("offsets committed with the transaction")

# DescribeTransactions and ListTransactions: an open transaction, then its end.
p.begin_transaction()
p.send("pytx-c", value=b"open", partition=2)
p.flush()
described = admin.describe_transactions(["pytx-main"])["pytx-main"]
assert described.state.value == "Ongoing", described
assert described.topic_partitions == {TopicPartition("pytx-c", 2)}, described
assert described.transaction_timeout_ms > 0 and described.transaction_start_time_ms > 0, described
listed = [t for ts in admin.list_transactions().values() for t in ts]
assert sorted(t.transactional_id for t in listed) == ["pytx-main", "pytx-zombie"], listed
p.abort_transaction()
aborted = [t.transactional_id for ts in admin.list_transactions(state_filters=["CompleteAbort"]).values() for t in ts]
assert aborted == ["pytx-main"], aborted
print("transactions described and listed")
print("every step passed")
