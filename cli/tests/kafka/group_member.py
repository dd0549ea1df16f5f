"""One member of a consumer group through agents and metadata being killed. Logs to OUT,
one event per line with the wall clock (seconds) first:
  assign T P...        partitions assigned (before their committed offsets are fetched)
  revoke T P...
  msg T P OFFSET VALUE a record consumed
  commit T P OFFSET    a commit acknowledged (OFFSET: the next record to read)
  commitfail T ERROR
Polls, then commits what it consumed synchronously; once the file STOP exists and
nothing arrived for 3 s, it commits, leaves and exits 0. PROTOCOL is `classic` (the
default: the range assignor, a 6 s session) or `consumer` (the consumer group protocol,
KIP-848: the coordinator assigns, and its session and heartbeat interval are the
coordinator's; each assign then names only the partitions added).
Usage: group_member.py BOOTSTRAP TOPIC GROUP OUT STOP [PROTOCOL]."""
import os
import sys
import time

from confluent_kafka import Consumer, KafkaException

BOOTSTRAP, TOPIC, GROUP, OUT, STOP = sys.argv[1:6]
PROTOCOL = sys.argv[6] if len(sys.argv) > 6 else "classic"
out = open(OUT, "w", buffering=1)


def log(*fields):
    out.write(" ".join(str(f) for f in (fields[0], f"{time.time():.6f}") + fields[1:]) + "\n")


config = {
    "bootstrap.servers": BOOTSTRAP,
    "group.id": GROUP,
    "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
    "topic.metadata.refresh.interval.ms": 1000,
    "reconnect.backoff.max.ms": 200,
}
if PROTOCOL == "consumer":
    config["group.protocol"] = "consumer"
else:
    config.update({"session.timeout.ms": 6000, "heartbeat.interval.ms": 300, "partition.assignment.strategy": "range"})
c = Consumer(config)


def commit():
    try:
        for tp in c.commit(asynchronous=False) or []:
            if tp.error:
                log("commitfail", tp.partition, tp.error)
            else:
                log("commit", tp.partition, tp.offset)
    except KafkaException as e:
        log("commitfail", str(e).replace("\n", " "))


c.subscribe(
    [TOPIC],
    on_assign=lambda _, parts: log("assign", *[p.partition for p in parts]),
    on_revoke=lambda _, parts: (commit(), log("revoke", *[p.partition for p in parts])),
)
quiet_since = time.monotonic()
while True:
    messages = c.consume(500, 0.5)
    for m in messages:
        if m.error():
            log("error", str(m.error()).replace("\n", " "))
            continue
        log("msg", m.partition(), m.offset(), m.value().decode())
    if any(not m.error() for m in messages):
        quiet_since = time.monotonic()
        commit()
    elif os.path.exists(STOP) and time.monotonic() - quiet_since > 3:
        break
commit()
c.close()
print("done")
