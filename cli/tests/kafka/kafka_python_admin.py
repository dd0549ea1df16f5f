"""kafka-python's admin client on consumer groups (and partition sizes, leader
elections and the partitions' producers as its admin asks them): a group whose consumer has gone is
listed and described Empty with its offsets (only the partitions it committed), its
offsets altered, reset to the earliest and latest, and deleted on one partition
(OffsetDelete); a static member is removed by its instance id (LeaveGroup v3); groups
are deleted, and an unknown one is GROUP_ID_NOT_FOUND.

Usage: kafka_python_admin.py BOOTSTRAP. Every step asserts; the first failure exits
non-zero with its reason."""
import sys

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import MemberToRemove, NewTopic, OffsetSpec
from kafka.errors import GroupIdNotFoundError, NoError
from kafka.structs import OffsetAndMetadata

BOOTSTRAP = sys.argv[1]
TOPIC, GROUP, STATIC = "admin-events", "admin-readers", "admin-static"


def step(name):
    print(f"step: {name}", flush=True)


def offsets(admin, group):
    """The group's committed offsets by partition, as the admin client lists them."""
    return {tp.partition: meta.offset for tp, meta in admin.list_group_offsets({group: None})[group].items()}


def tp(partition):
    return TopicPartition(TOPIC, partition)


admin = KafkaAdminClient(bootstrap_servers=BOOTSTRAP)
step("a consumer reads three partitions and goes")
admin.create_topics([NewTopic(TOPIC, 3, 1)])
producer = KafkaProducer(bootstrap_servers=BOOTSTRAP)
for i in range(30):
    producer.send(TOPIC, b"e%d" % i, partition=i % 3)
producer.flush()
consumer = KafkaConsumer(TOPIC, bootstrap_servers=BOOTSTRAP, group_id=GROUP, auto_offset_reset="earliest",
                         consumer_timeout_ms=5000)
assert sum(1 for _ in consumer) == 30
consumer.commit()
consumer.close()

step("partition sizes through the broker's log directory, and no election needed")
sizes = {p["partition_index"]: p["partition_size"]
         for broker in admin.describe_log_dirs({TOPIC: [0, 1, 2]}) for d in broker["log_dirs"]
         for t in d["topics"] if t["name"] == TOPIC for p in t["partitions"]}
# S2's metering of a record without key or headers: 8 bytes and its value.
assert sizes == {p: sum(8 + len(b"e%d" % i) for i in range(p, 30, 3)) for p in range(3)}, sizes
elected = admin.elect_leaders(0, {TOPIC: [0, 1, 2]}, raise_errors=False)
codes = sorted((r.partition_id, r.error_code) for t in elected.replica_election_results for r in t.partition_result)
assert codes == [(0, 84), (1, 84), (2, 84)], codes  # ELECTION_NOT_NEEDED

step("each partition's producer: the idempotent one that wrote it, at its last sequence")
states = admin.describe_producers([tp(p) for p in range(3)])
for p in range(3):
    rows = [(s.producer_epoch, s.last_sequence, s.current_transaction_start_offset)
            for s in states[tp(p)].active_producers]
    assert rows == [(0, 9, -1)], (p, states[tp(p)])  # 10 records each, sequences 0-9
assert len({states[tp(p)].active_producers[0].producer_id for p in range(3)}) == 1, states

step("the group is listed and described Empty, with its offsets")
listed = {g["group_id"]: g for g in admin.list_groups()}
assert listed[GROUP]["group_state"] == "Empty" and listed[GROUP]["protocol_type"] == "consumer", listed
described = admin.describe_groups([GROUP])[GROUP]
assert described["group_state"] == "Empty" and described["members"] == [], described
assert offsets(admin, GROUP) == {0: 10, 1: 10, 2: 10}

step("offsets altered, reset to the earliest and the latest")
assert admin.alter_group_offsets(GROUP, {tp(0): OffsetAndMetadata(3, "", -1)}) == {tp(0): NoError}
reset = admin.reset_group_offsets(GROUP, {tp(1): OffsetSpec.EARLIEST})
assert reset[tp(1)]["error"] is NoError and reset[tp(1)]["offset"] == 0, reset
reset = admin.reset_group_offsets(GROUP, {tp(2): OffsetSpec.LATEST})
assert reset[tp(2)]["error"] is NoError and reset[tp(2)]["offset"] == 10, reset
assert offsets(admin, GROUP) == {0: 3, 1: 0, 2: 10}

step("one partition's offset deleted (OffsetDelete); the others kept")
assert admin.delete_group_offsets(GROUP, [tp(0)]) == {tp(0): NoError}
assert offsets(admin, GROUP) == {1: 0, 2: 10}

step("a static member removed by its instance id")
static = KafkaConsumer(TOPIC, bootstrap_servers=BOOTSTRAP, group_id=STATIC, group_instance_id="instance-1",
                       auto_offset_reset="earliest", consumer_timeout_ms=5000)
assert sum(1 for _ in static) == 30
members = admin.describe_groups([STATIC])[STATIC]["members"]
assert [m["group_instance_id"] for m in members] == ["instance-1"], members
removed = admin.remove_group_members(STATIC, [MemberToRemove(group_instance_id="instance-1")])
assert list(removed.values()) == [NoError], removed
described = admin.describe_groups([STATIC])[STATIC]
assert described["group_state"] == "Empty" and described["members"] == [], described
static.close(autocommit=False)

step("groups deleted; an unknown one is not found")
deleted = admin.delete_groups([GROUP, STATIC, "admin-nobody"])
assert deleted[GROUP] == "OK" and deleted[STATIC] == "OK", deleted
assert deleted["admin-nobody"] == GroupIdNotFoundError.__name__, deleted
left = {g["group_id"] for g in admin.list_groups()}
assert GROUP not in left and STATIC not in left, left
admin.close()
print("every step passed")
