"""A transactional consume-transform-produce loop: confluent-kafka's exactly-once pattern.

Usage: eos_pipeline.py BOOTSTRAP IN OUT GROUP TXID PARTITIONS TOTAL PROGRESS

Reads IN (read_committed) in GROUP, writes `out-<value>` to the same partition of OUT and
commits the offsets after the batch's records with that output in one transaction, batch
after batch.
Appends `commit <records>` to PROGRESS after each commit. Exits 0 once GROUP's committed
offsets on IN add up to TOTAL; exits 3 on a fatal error (a newer instance fenced this
one), for its supervisor to start it again; an abortable error aborts the transaction
and rewinds to the committed offsets.

librdkafka (2.16) can block in send_offsets_to_transaction past the timeout it was given
once the group coordinator's broker has left the cluster's metadata (its open issues
#5456 and #5511), as a killed agent does here. So a call that has not returned within
STALL_SECONDS (twice the longest timeout given to one) ends the process with every
thread's stack on stderr and exit status 1, as a supervisor's liveness check would; the
supervisor starts a new instance, which fences this one.
"""
import faulthandler
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

BOOTSTRAP, IN, OUT, GROUP, TXID = sys.argv[1:6]
PARTITIONS, TOTAL, PROGRESS = int(sys.argv[6]), int(sys.argv[7]), sys.argv[8]
STALL_SECONDS = 60


def alive():
    """Restarts the stall clock: the process ends if this is not called again in time."""
    faulthandler.dump_traceback_later(STALL_SECONDS, exit=True)


def retrying(what, action, attempts=30):
    """Runs `action` until it succeeds or an error is not retriable (re-raised)."""
    for attempt in range(attempts):
        alive()
        try:
            return action()
        except KafkaException as e:
            if e.args[0].fatal() or not e.args[0].retriable() or attempt == attempts - 1:
                raise
            print(f"{what}: retrying after {e.args[0]}", flush=True)
            time.sleep(0.5)
    raise AssertionError(f"{what} never succeeded")


def committed_total(c):
    """GROUP's committed offsets on IN, added up; 0 when they cannot be fetched now (the
    group is rebalancing, its coordinator moving)."""
    try:
        offsets = c.committed([TopicPartition(IN, p) for p in range(PARTITIONS)], timeout=10)
    except KafkaException:
        return 0
    return sum(max(tp.offset, 0) for tp in offsets)


def rewind(c, expected):
    """Seeks every assigned partition back to its committed offset, which is where its
    next record must be."""
    expected.clear()
    for tp in c.assignment():
        alive()
        committed = max(c.committed([tp], timeout=10)[0].offset, 0)
        c.seek(TopicPartition(tp.topic, tp.partition, committed))
        expected[tp.partition] = committed


def offsets_after(batch, expected):
    """The offsets to commit with `batch`'s outputs: each of its partitions' last offset
    plus one. These, not `position()`, since a seek is applied by librdkafka's own thread
    and `position()` may still be the pre-seek one. Says so when a partition's records do
    not follow on from where this process knows it stood: the input's offsets are dense."""
    offsets = {}
    for m in batch:
        p = m.partition()
        if p in expected and m.offset() != expected[p]:
            print(f"gap: partition {p} expected offset {expected[p]}, got {m.offset()}", flush=True)
        expected[p] = offsets[p] = m.offset() + 1
    return [TopicPartition(IN, p, o) for p, o in sorted(offsets.items())]


def main():
    c = Consumer({
        "bootstrap.servers": BOOTSTRAP,
        "group.id": GROUP,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "isolation.level": "read_committed",
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
    })
    p = Producer({
        "bootstrap.servers": BOOTSTRAP,
        "transactional.id": TXID,
        "transaction.timeout.ms": 20000,
        "message.timeout.ms": 20000,
        "linger.ms": 5,
    })
    retrying("init_transactions", lambda: p.init_transactions(20))
    # Where each partition's next record must be, as far as this process knows; a
    # partition moved by a rebalance starts unknown.
    expected = {}
    c.subscribe([IN], on_assign=lambda _, parts: [expected.pop(tp.partition, None) for tp in parts],
                on_revoke=lambda _, parts: [expected.pop(tp.partition, None) for tp in parts])
    idle_polls = 0
    while True:
        alive()
        batch = [m for m in c.consume(500, 1.0) if not m.error()]
        if not batch:
            idle_polls += 1
            if idle_polls % 3 == 0 and c.assignment() and committed_total(c) >= TOTAL:
                return 0
            if idle_polls % 10 == 0:
                # A stall says where it is: no assignment, or positions that do not move.
                try:
                    assigned = c.assignment()
                    positions = [(tp.partition, tp.offset) for tp in c.position(assigned)] if assigned else []
                except KafkaException as e:
                    positions = f"unknown ({e.args[0]})"
                print(f"idle {idle_polls}: positions {positions}", flush=True)
            continue
        idle_polls = 0
        try:
            p.begin_transaction()
            for m in batch:
                p.produce(OUT, value=b"out-" + m.value(), partition=m.partition())
            positions = offsets_after(batch, expected)
            retrying("send_offsets", lambda: p.send_offsets_to_transaction(positions, c.consumer_group_metadata(), 20))
            retrying("commit", lambda: p.commit_transaction(30))
        except KafkaException as e:
            error = e.args[0]
            if error.fatal():
                print(f"fatal: {error}", flush=True)
                return 3
            print(f"aborting: {error}", flush=True)
            retrying("abort", lambda: p.abort_transaction(30))
            rewind(c, expected)
            continue
        with open(PROGRESS, "a") as f:
            f.write(f"commit {len(batch)}\n")


if __name__ == "__main__":
    sys.exit(main())
