"""confluent-kafka (librdkafka) against `shale serve --kafka`, unmodified.

Usage: confluent.py BOOTSTRAP HTTP_BASE BASIN. Every step asserts; the first failure
exits non-zero with its reason.
"""
import json
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

from confluent_kafka import Consumer, ElectionType, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

BOOTSTRAP, HTTP, BASIN = sys.argv[1], sys.argv[2], sys.argv[3]
DEADLINE_S = 60


ADMIN = AdminClient({"bootstrap.servers": BOOTSTRAP})


def admin():
    return ADMIN


def create(topic, partitions):
    for name, future in admin().create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)]).items():
        future.result(20)


def consumer(group, **extra):
    config = {
        "bootstrap.servers": BOOTSTRAP,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
    }
    config.update(extra)
    return Consumer(config)


def drain(c, want, seconds=DEADLINE_S):
    """Polls until `want` records arrived (or the deadline); returns them."""
    got = []
    deadline = time.time() + seconds
    while len(got) < want and time.time() < deadline:
        m = c.poll(0.5)
        if m is None:
            continue
        assert not m.error(), m.error()
        got.append(m)
    return got


def http(method, path, body=None):
    request = urllib.request.Request(HTTP + path, method=method, headers={"s2-basin": BASIN, "content-type": "application/json"})
    data = None if body is None else json.dumps(body).encode()
    with urllib.request.urlopen(request, data, timeout=20) as response:
        return json.loads(response.read() or b"null")


def stream_path(topic, partition):
    return "/v1/streams/" + urllib.parse.quote(f"{topic}/{partition}", safe="")


def produce_every_codec():
    create("orders", 3)
    sent = {}
    for codec in ["none", "gzip", "snappy", "lz4", "zstd"]:
        p = Producer({"bootstrap.servers": BOOTSTRAP, "enable.idempotence": True, "acks": "all", "compression.type": codec, "linger.ms": 5})
        errors = []

        def acked(err, msg):
            if err:
                errors.append(err)
            else:
                i = msg.value().decode().rsplit("-", 1)[1]
                # Delivery reports carry no headers: these are the ones produced.
                sent[msg.value()] = (msg.partition(), msg.offset(), msg.key(), [("codec", codec.encode()), ("i", i.encode())])

        for i in range(40):
            value = f"{codec}-{i}".encode()
            p.produce("orders", key=f"key-{i % 7}".encode(), value=value, headers=[("codec", codec.encode()), ("i", str(i).encode())], on_delivery=acked)
        assert p.flush(30) == 0, "unflushed records"
        assert not errors, errors
    # A null key and a tombstone (null value) stay distinct from empty ones.
    p = Producer({"bootstrap.servers": BOOTSTRAP, "enable.idempotence": True, "acks": "all"})
    specials = []
    p.produce("orders", value=b"null-key", partition=0, on_delivery=lambda e, m: specials.append((e, m.offset())))
    p.produce("orders", key=b"", value=b"", partition=0, on_delivery=lambda e, m: specials.append((e, m.offset())))
    p.produce("orders", key=b"gone", value=None, partition=0, on_delivery=lambda e, m: specials.append((e, m.offset())))
    assert p.flush(30) == 0 and all(e is None for e, _ in specials), specials
    assert len(sent) == 200, len(sent)
    return sent


def consume_with_a_group(sent):
    c = consumer("billing")
    c.subscribe(["orders"])
    got = drain(c, 203)
    assert len(got) == 203, f"consumed {len(got)} of 203"
    by_value = {}
    last_offset = {}
    for m in got:
        assert m.offset() > last_offset.get(m.partition(), -1), "per-partition order"
        last_offset[m.partition()] = m.offset()
        if m.value() in sent:
            assert m.value() not in by_value, f"{m.value()} twice"
            by_value[m.value()] = (m.partition(), m.offset(), m.key(), m.headers())
    diff = [(v, sent.get(v), by_value.get(v)) for v in set(sent) | set(by_value) if sent.get(v) != by_value.get(v)]
    assert not diff, f"every record once, key, value and headers intact: {diff[:3]}"
    specials = [(m.key(), m.value()) for m in got if m.partition() == 0 and m.value() in (b"null-key", b"", None)]
    assert specials == [(None, b"null-key"), (b"", b""), (b"gone", None)], specials
    c.commit(asynchronous=False)
    committed = c.committed([TopicPartition("orders", p) for p in range(3)], timeout=20)
    assert [tp.offset for tp in committed] == [last_offset[p] + 1 for p in range(3)], committed
    c.close()
    return last_offset


def resume_after_restart(last_offset):
    p = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all"})
    for i in range(9):
        p.produce("orders", value=f"after-{i}".encode(), partition=i % 3)
    assert p.flush(30) == 0
    c = consumer("billing")
    c.subscribe(["orders"])
    got = drain(c, 9)
    assert sorted(m.value() for m in got) == sorted(f"after-{i}".encode() for i in range(9)), [m.value() for m in got]
    assert all(m.offset() > last_offset[m.partition()] for m in got), "resumed after the committed offsets"
    c.commit(asynchronous=False)
    c.close()


def assigned(c):
    return {tp.partition for tp in c.assignment()}


def wait_for(condition, what, seconds=DEADLINE_S, state=None):
    deadline = time.time() + seconds
    while time.time() < deadline:
        if condition():
            return
    seen = f"; state: {state()}" if state else ""
    raise AssertionError(f"timed out waiting for {what}{seen}")


def group_state(group, *members):
    """What the members hold and what the coordinator says, for a failure message."""
    described = ADMIN.describe_consumer_groups([group])[group].result()
    coordinator = [(m.member_id, sorted(tp.partition for tp in m.assignment.topic_partitions)) for m in described.members]
    return f"members hold {[sorted(assigned(m)) for m in members]}, coordinator: {described.state} {coordinator}"


def two_members_split_and_rebalance():
    create("split", 4)
    for assignor in ["range", "roundrobin", "cooperative-sticky"]:
        group = f"split-{assignor}"
        a = consumer(group, **{"partition.assignment.strategy": assignor})
        b = consumer(group, **{"partition.assignment.strategy": assignor})
        a.subscribe(["split"])
        b.subscribe(["split"])

        def split():
            a.poll(0.2)
            b.poll(0.2)
            return len(assigned(a)) == 2 and len(assigned(b)) == 2 and not (assigned(a) & assigned(b))

        wait_for(split, f"{assignor}: two members with two partitions each", state=lambda: group_state(group, a, b))
        b.close()

        def all_to_a():
            a.poll(0.2)
            return assigned(a) == {0, 1, 2, 3}

        wait_for(all_to_a, f"{assignor}: the remaining member takes every partition")
        a.close()


def assign_seek_watermarks_and_times():
    create("seek", 1)
    p = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all"})
    base = int(time.time() * 1000) - 100_000
    for i in range(10):
        p.produce("seek", value=f"s{i}".encode(), timestamp=base + i * 1000)
    assert p.flush(30) == 0
    c = consumer("seeker")
    low, high = c.get_watermark_offsets(TopicPartition("seek", 0), timeout=20)
    assert (low, high) == (0, 10), (low, high)
    found = c.offsets_for_times([TopicPartition("seek", 0, base + 4500)], timeout=20)
    assert found[0].offset == 5, found
    beyond = c.offsets_for_times([TopicPartition("seek", 0, base + 999_999)], timeout=20)
    assert beyond[0].offset == -1, beyond
    c.assign([TopicPartition("seek", 0, 7)])
    got = drain(c, 3)
    assert [m.value() for m in got] == [b"s7", b"s8", b"s9"], [m.value() for m in got]
    assert got[0].timestamp()[1] == base + 7000
    c.seek(TopicPartition("seek", 0, 2))
    again = drain(c, 1)
    assert again[0].value() == b"s2", again[0].value()
    c.close()


def create_partitions_and_delete_records():
    a = admin()
    for _, f in a.create_partitions([NewPartitions("seek", 3)]).items():
        f.result(20)
    md = a.list_topics("seek", timeout=20)
    assert len(md.topics["seek"].partitions) == 3, md.topics["seek"].partitions
    bad = a.create_partitions([NewPartitions("seek", 2)])
    try:
        bad["seek"].result(20)
        raise AssertionError("shrinking partitions was accepted")
    except KafkaException as e:
        assert e.args[0].name() == "INVALID_PARTITIONS", e
    from confluent_kafka.admin import OffsetSpec  # noqa: F401 (present in the client)
    result = a.delete_records([TopicPartition("seek", 0, 4)])
    for _, f in result.items():
        f.result(20)
    c = consumer("after-trim")
    low, _ = c.get_watermark_offsets(TopicPartition("seek", 0), timeout=20)
    assert low == 4, low
    c.assign([TopicPartition("seek", 0, 0)])
    first = drain(c, 1)
    assert first[0].value() == b"s4", first[0].value()
    c.close()


def interop_with_s2():
    # An S2 append read by a Kafka consumer...
    http("POST", stream_path("seek", 1) + "/records", {"records": [{"body": "from-s2", "headers": [["kafka.key", "s2-key"], ["h", "v"]]}]})
    c = consumer("interop")
    c.assign([TopicPartition("seek", 1, 0)])
    m = drain(c, 1)[0]
    assert (m.key(), m.value(), m.headers()) == (b"s2-key", b"from-s2", [("h", b"v")]), (m.key(), m.value(), m.headers())
    c.close()
    # ... and a Kafka record read through S2's API.
    p = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all"})
    p.produce("seek", value=b"from-kafka", key=b"k", partition=2, headers=[("x", b"y")])
    assert p.flush(30) == 0
    read = http("GET", stream_path("seek", 2) + "/records?seq_num=0")
    [record] = read["records"]
    assert record["body"] == "from-kafka", record
    assert ["kafka.key", "k"] in record["headers"] and ["x", "y"] in record["headers"], record


def headers_keep_their_order_repeats_and_nulls():
    """Kafka's headers are a list: a name may repeat and a value may be null. Both come
    back as produced, compressed or not, and S2's API shows a null value as an empty one
    with its position in `kafka.null-headers`."""
    create("headers", 1)
    headers = [("a", b"1"), ("n", None), ("a", b"2"), ("e", b"")]
    for codec in ["none", "zstd"]:
        p = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all", "compression.type": codec})
        p.produce("headers", value=codec.encode(), headers=headers)
        assert p.flush(30) == 0
    c = consumer("headers")
    c.assign([TopicPartition("headers", 0, 0)])
    got = drain(c, 2)
    assert [(m.value(), m.headers()) for m in got] == [(b"none", headers), (b"zstd", headers)], [m.headers() for m in got]
    c.close()
    read = http("GET", stream_path("headers", 0) + "/records?seq_num=0&count=1")
    [record] = read["records"]
    assert record["headers"] == [["a", "1"], ["n", ""], ["a", "2"], ["e", ""], ["kafka.null-headers", "1"]], record


def a_record_larger_than_a_fetch():
    """A 3 MB record (Kafka takes up to 8 MiB here) reaches a consumer with librdkafka's
    defaults (1 MiB a partition per fetch), the records after it too; S2's API reads it
    alone without a byte bound and stops before it with one, as S2 bounds reads."""
    create("large", 1)
    large = b"L" * 3_000_000
    p = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all", "message.max.bytes": 4_000_000})
    p.produce("large", value=large)
    p.produce("large", value=b"after")
    assert p.flush(30) == 0
    c = consumer("large")
    c.assign([TopicPartition("large", 0, 0)])
    got = drain(c, 2)
    assert [(m.offset(), len(m.value())) for m in got] == [(0, len(large)), (1, 5)], [(m.offset(), len(m.value())) for m in got]
    assert c.get_watermark_offsets(TopicPartition("large", 0), timeout=10) == (0, 2)
    c.close()
    read = http("GET", stream_path("large", 0) + "/records?seq_num=0")
    assert [len(r["body"]) for r in read["records"]] == [len(large)], [len(r["body"]) for r in read["records"]]
    bounded = http("GET", stream_path("large", 0) + "/records?seq_num=0&bytes=1048576")
    assert bounded["records"] == [], bounded


def lag_through_the_consumer_api():
    p = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all"})
    for i in range(5):
        p.produce("orders", value=f"lag-{i}".encode(), partition=1)
    assert p.flush(30) == 0
    view = http("GET", stream_path("orders", 1) + "/consumers/billing")
    assert view["lag"]["records"] == 5, view


def delete_a_group():
    """DeleteGroups removes the group's committed offsets (its tracked consumers); an
    unknown group is GROUP_ID_NOT_FOUND."""
    path = stream_path("orders", 1) + "/consumers/billing"
    assert http("GET", path)["name"] == "billing"
    admin().delete_consumer_groups(["billing"])["billing"].result(20)
    try:
        http("GET", path)
        raise AssertionError("the group's consumer is still there")
    except urllib.error.HTTPError as e:
        assert e.code == 404, e
    try:
        admin().delete_consumer_groups(["no-such-group"])["no-such-group"].result(20)
        raise AssertionError("deleting an unknown group succeeded")
    except KafkaException as e:
        assert e.args[0].name() == "GROUP_ID_NOT_FOUND", e


def broker_settings():
    """The broker's settings as admin tools read them: read-only, at the values served."""
    resource = ConfigResource(ConfigResource.Type.BROKER, "0")
    configs = admin().describe_configs([resource])[resource].result(20)
    assert configs["default.replication.factor"].value == "1", configs
    assert configs["message.max.bytes"].value == "8388608", configs["message.max.bytes"]
    assert all(c.is_read_only for c in configs.values()), configs


def leader_elections():
    """An admin's leader election: every partition already has its leader."""
    create("elections", 2)
    asked = [TopicPartition("elections", 0), TopicPartition("elections", 1), TopicPartition("elections", 5)]
    for kind in (ElectionType.PREFERRED, ElectionType.UNCLEAN):
        results = admin().elect_leaders(kind, asked).result(20)
        names = {tp.partition: error and error.name() for tp, error in results.items()}
        assert names == {0: "ELECTION_NOT_NEEDED", 1: "ELECTION_NOT_NEEDED", 5: "UNKNOWN_TOPIC_OR_PART"}, names
    assert admin().elect_leaders(ElectionType.PREFERRED, None).result(20) == {}, "every partition: none needs one"


def unknown_topics_are_refused():
    p = Producer({"bootstrap.servers": BOOTSTRAP, "acks": "all", "message.timeout.ms": 3000})
    errors = []
    p.produce("no-such-topic", value=b"x", on_delivery=lambda e, m: errors.append(e))
    p.flush(10)
    assert errors and errors[0] is not None and errors[0].name() in ("UNKNOWN_TOPIC_OR_PART", "_MSG_TIMED_OUT"), errors


sent = produce_every_codec()
last = consume_with_a_group(sent)
resume_after_restart(last)
two_members_split_and_rebalance()
assign_seek_watermarks_and_times()
create_partitions_and_delete_records()
interop_with_s2()
headers_keep_their_order_repeats_and_nulls()
a_record_larger_than_a_fetch()
lag_through_the_consumer_api()
delete_a_group()
broker_settings()
leader_elections()
unknown_topics_are_refused()
print("confluent-kafka: every step passed")
