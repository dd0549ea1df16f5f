"""An idempotent acks=all producer at a steady rate, through agents being killed: sends
COUNT values `NAME-i` (key i % 13, so each key stays on one partition) at RATE per
second, writes each acknowledged one to ACKED as `partition offset value`, and exits 0
once all are acked. Usage: steady_producer.py BOOTSTRAP TOPIC NAME RATE COUNT ACKED."""
import sys
import time

from confluent_kafka import Producer

BOOTSTRAP, TOPIC, NAME = sys.argv[1], sys.argv[2], sys.argv[3]
RATE, COUNT, ACKED = float(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
p = Producer({
    "bootstrap.servers": BOOTSTRAP,
    "enable.idempotence": True,
    "acks": "all",
    "linger.ms": 5,
    "message.timeout.ms": 120000,
    "reconnect.backoff.max.ms": 200,
    "topic.metadata.refresh.interval.ms": 1000,
})
acked = open(ACKED, "w", buffering=1)
failed = []


def report(err, msg):
    if err:
        failed.append(str(err))
    else:
        acked.write(f"{msg.partition()} {msg.offset()} {msg.value().decode()}\n")


start = time.monotonic()
for i in range(COUNT):
    # Paced: record i goes out at start + i / RATE.
    while time.monotonic() < start + i / RATE:
        p.poll(0.005)
    while True:
        try:
            p.produce(TOPIC, value=f"{NAME}-{i}".encode(), key=str(i % 13).encode(), on_delivery=report)
            break
        except BufferError:
            p.poll(0.1)
    p.poll(0)
assert p.flush(150) == 0, "records left unacked"
assert not failed, failed[:5]
print("acked", COUNT)
