"""aiokafka (asyncio, an independent implementation of the protocol that asks older API
versions than the other clients) against `shale serve --kafka`, unmodified: topics
created, configured and deleted with its admin client; idempotent produce under each
codec; a group of two consumers that reads every record once and commits; offsets for
times; transactions whose aborted records a read_committed consumer never sees, with
offsets sent to a transaction. Usage: aiokafka_client.py BOOTSTRAP. Every step asserts."""
import asyncio
import sys
import time

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import TopicAlreadyExistsError

BOOTSTRAP = sys.argv[1]
TOPIC = "aio-events"
CODECS = ["gzip", "snappy", "lz4", "zstd", None]
PER_CODEC = 20


def step(what):
    print(f"ok: {what}", flush=True)


async def administer(admin):
    created = await admin.create_topics([NewTopic(TOPIC, num_partitions=2, replication_factor=1,
                                                  topic_configs={"retention.ms": "86400000"})])
    assert [error for _, error, *_ in created.topic_errors] == [0], created
    # aiokafka's admin client hands back the answer: each topic's error code is in it.
    again = await admin.create_topics([NewTopic(TOPIC, num_partitions=2, replication_factor=1)])
    assert [error for _, error, *_ in again.topic_errors] == [TopicAlreadyExistsError.errno], again
    assert TOPIC in await admin.list_topics()
    described = await admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, TOPIC)])
    text = repr(described)
    assert "retention.ms" in text and "86400000" in text, text
    step("topic created (a second create refused), listed and its configs described")


async def produce():
    sent = []
    for codec in CODECS:
        producer = AIOKafkaProducer(bootstrap_servers=BOOTSTRAP, acks="all", enable_idempotence=True,
                                    compression_type=codec)
        await producer.start()
        try:
            for i in range(PER_CODEC):
                value = b"%s-%d" % (str(codec).encode(), i)
                metadata = await producer.send_and_wait(TOPIC, value=value, key=b"k%d" % i,
                                                        headers=[("n", b"%d" % i)])
                assert metadata.offset >= 0, metadata
                sent.append((metadata.partition, metadata.offset, value))
        finally:
            await producer.stop()
    step(f"{len(sent)} records produced idempotently under none, gzip, snappy, lz4 and zstd")
    return sent


async def read_as_group(sent):
    members = [AIOKafkaConsumer(TOPIC, bootstrap_servers=BOOTSTRAP, group_id="aio-group",
                                auto_offset_reset="earliest", enable_auto_commit=False) for _ in range(2)]
    for member in members:
        await member.start()
    got = []
    try:
        deadline = time.time() + 60
        while len(got) < len(sent) and time.time() < deadline:
            for member in members:
                batches = await member.getmany(timeout_ms=200)
                for records in batches.values():
                    got.extend(records)
        values = sorted(r.value for r in got)
        assert values == sorted(v for _, _, v in sent), (len(got), len(sent))
        assert all(r.headers == (("n", r.key[1:]),) for r in got), got[0]
        for partition in (0, 1):
            offsets = [r.offset for r in got if r.partition == partition]
            assert offsets == sorted(offsets), "per-partition order"
        owned = [member.assignment() for member in members]
        assert all(owned) and not (owned[0] & owned[1]), owned
        for member in members:
            await member.commit()
        tps = [TopicPartition(TOPIC, p) for p in (0, 1)]
        committed = [await members[0].committed(tp) for tp in tps]
        ends = await members[0].end_offsets(tps)
        assert committed == [ends[tp] for tp in tps], (committed, ends)
    finally:
        for member in members:
            await member.stop()
    step("a group of two read every record once, each partition in order, and committed its ends")


async def offsets_for_times(sent):
    consumer = AIOKafkaConsumer(bootstrap_servers=BOOTSTRAP)
    await consumer.start()
    try:
        tp = TopicPartition(TOPIC, 0)
        consumer.assign([tp])
        assert (await consumer.beginning_offsets([tp]))[tp] == 0
        found = await consumer.offsets_for_times({tp: 0})
        assert found[tp].offset == 0, found
        future = await consumer.offsets_for_times({tp: int(time.time() * 1000) + 3_600_000})
        assert future[tp] is None, future
    finally:
        await consumer.stop()
    step("offsets for times: the first record for time 0, none for an hour ahead")


async def transactions():
    producer = AIOKafkaProducer(bootstrap_servers=BOOTSTRAP, transactional_id="aio-tx")
    await producer.start()
    try:
        async with producer.transaction():
            await producer.send_and_wait(TOPIC, b"committed-1", partition=0)
            await producer.send_and_wait(TOPIC, b"committed-2", partition=1)
            await producer.send_offsets_to_transaction({TopicPartition(TOPIC, 0): 3}, "aio-tx-group")
        await producer.begin_transaction()
        await producer.send_and_wait(TOPIC, b"aborted", partition=0)
        await producer.abort_transaction()
        async with producer.transaction():
            await producer.send_and_wait(TOPIC, b"committed-3", partition=0)
    finally:
        await producer.stop()

    consumer = AIOKafkaConsumer(TOPIC, bootstrap_servers=BOOTSTRAP, auto_offset_reset="earliest",
                                isolation_level="read_committed")
    await consumer.start()
    try:
        seen = []
        deadline = time.time() + 60
        while sum(v.startswith(b"committed-") for v in seen) < 3 and time.time() < deadline:
            batches = await consumer.getmany(timeout_ms=200)
            seen.extend(r.value for records in batches.values() for r in records)
        transactional = [v for v in seen if v.startswith(b"committed-") or v == b"aborted"]
        assert sorted(transactional) == [b"committed-1", b"committed-2", b"committed-3"], transactional
    finally:
        await consumer.stop()
    checker = AIOKafkaConsumer(bootstrap_servers=BOOTSTRAP, group_id="aio-tx-group", enable_auto_commit=False)
    await checker.start()
    try:
        offset = await checker.committed(TopicPartition(TOPIC, 0))
        assert offset == 3, offset
    finally:
        await checker.stop()
    step("transactions committed and aborted: read_committed saw the committed records only, "
         "and the offsets sent with a transaction were committed")


async def main():
    admin = AIOKafkaAdminClient(bootstrap_servers=BOOTSTRAP)
    await admin.start()
    try:
        await administer(admin)
        sent = await produce()
        await read_as_group(sent)
        await offsets_for_times(sent)
        await transactions()
        await admin.delete_topics([TOPIC])
        assert TOPIC not in await admin.list_topics()
        step("topic deleted")
    finally:
        await admin.close()
    print("aiokafka: every step passed")


asyncio.run(main())
