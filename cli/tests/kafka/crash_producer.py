"""An idempotent acks=all producer that keeps producing while the server is killed and
restarted: writes each acknowledged value to ACKED as it is acked, and exits 0 once all
COUNT are acked. Usage: crash_producer.py BOOTSTRAP TOPIC COUNT ACKED."""
import sys

from confluent_kafka import Producer

BOOTSTRAP, TOPIC, COUNT, ACKED = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
p = Producer({
    "bootstrap.servers": BOOTSTRAP,
    "enable.idempotence": True,
    "acks": "all",
    "linger.ms": 2,
    "message.timeout.ms": 120000,
    "reconnect.backoff.max.ms": 200,
})
acked = open(ACKED, "w", buffering=1)
failed = []


def report(err, msg):
    if err:
        failed.append(err)
    else:
        acked.write(msg.value().decode() + "\n")


for i in range(COUNT):
    while True:
        try:
            p.produce(TOPIC, value=f"r-{i}".encode(), key=str(i % 13).encode(), on_delivery=report)
            break
        except BufferError:
            p.poll(0.1)
    p.poll(0)
    if i % 50 == 0:
        p.poll(0.05)
assert p.flush(150) == 0, "records left unacked"
assert not failed, failed
print("acked", COUNT)
