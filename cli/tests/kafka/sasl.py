"""SASL over access tokens with confluent-kafka (librdkafka) and kafka-python, over
TLS with a custom CA. A token scoped to the stream prefix `orders/` with read and
append produces to and consumes `orders` and nothing else; PLAIN and SCRAM-SHA-256/512
all work; a wrong secret is refused; a token without `read` may not use groups or
learn partition sizes or producers; a revoked token is refused within the revocation bound.

Usage: sasl.py BOOTSTRAP HTTP_BASE CA ROOT_TOKEN SCOPED_SECRET APPEND_ONLY_SECRET BOUND_S.
Every step asserts; the first failure exits non-zero with its reason."""
import json
import ssl
import sys
import time
import urllib.request

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition as PyTopicPartition
from kafka.errors import KafkaError as PyKafkaError, TopicAuthorizationFailedError

BOOTSTRAP, HTTP, CA, ROOT, SCOPED, APPEND_ONLY, BOUND_S = sys.argv[1:8]
BOUND_S = float(BOUND_S)


def librdkafka(mechanism, user, secret, **extra):
    return {
        "bootstrap.servers": BOOTSTRAP,
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": CA,
        "sasl.mechanism": mechanism,
        "sasl.username": user,
        "sasl.password": secret,
        **extra,
    }


def produce(config, topic, value):
    """The delivery error of one record (None when acked)."""
    outcome = []
    p = Producer({**config, "message.timeout.ms": 5000, "acks": "all"})
    p.produce(topic, value, on_delivery=lambda err, msg: outcome.append(err))
    p.flush(10)
    assert outcome, "no delivery report"
    return outcome[0]


admin = AdminClient(librdkafka("PLAIN", "root", ROOT))
for topic in ["orders", "payments"]:
    admin.create_topics([NewTopic(topic, num_partitions=1)])[topic].result(20)
print("root token created topics over SASL_SSL")

# A token that may only append produces (the listener finds the topic and its settings).
err = produce(librdkafka("SCRAM-SHA-256", "append-only", APPEND_ONLY), "orders", b"appended only")
assert err is None, f"append-only: {err}"

for mechanism in ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]:
    config = librdkafka(mechanism, "orders-rw", SCOPED)
    err = produce(config, "orders", f"from {mechanism}".encode())
    assert err is None, f"{mechanism}: {err}"
    err = produce(config, "payments", b"not mine")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, f"{mechanism}: {err}"
print("PLAIN and SCRAM-SHA-256/512: the scoped token produces to orders only")

c = Consumer(librdkafka("SCRAM-SHA-512", "orders-rw", SCOPED, **{
    "group.id": "orders-readers", "auto.offset.reset": "earliest", "enable.auto.commit": False}))
c.subscribe(["orders"])
values, deadline = [], time.time() + 30
while len(values) < 4 and time.time() < deadline:
    m = c.poll(0.5)
    if m is not None and not m.error():
        values.append(m.value().decode())
assert sorted(values) == sorted(["appended only"] + [f"from {m}" for m in ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]]), values
c.commit(asynchronous=False)
committed = c.committed([TopicPartition("orders", 0)], timeout=10)[0].offset
assert committed == 4, committed
c.close()
print("the scoped token consumes orders in a group and commits")

# kafka-python, an independent client: SCRAM-SHA-256 over TLS.
context = ssl.create_default_context(cafile=CA)
kp = dict(bootstrap_servers=BOOTSTRAP, security_protocol="SASL_SSL", ssl_context=context,
          sasl_mechanism="SCRAM-SHA-256", sasl_plain_username="orders-rw", sasl_plain_password=SCOPED)
producer = KafkaProducer(acks="all", **kp)
producer.send("orders", b"from kafka-python").get(timeout=20)
try:
    producer.send("payments", b"not mine").get(timeout=20)
    raise AssertionError("kafka-python produced to a topic outside the token's scope")
except (TopicAuthorizationFailedError, PyKafkaError) as e:
    assert "Authorization" in type(e).__name__ or "TOPIC_AUTHORIZATION" in str(e).upper(), repr(e)
producer.close()
consumer = KafkaConsumer("orders", group_id="py-readers", auto_offset_reset="earliest",
                         consumer_timeout_ms=5000, **kp)
got = [m.value for m in consumer]
assert b"from kafka-python" in got and len(got) == 5, got
consumer.close()
print("kafka-python: SCRAM-SHA-256 over TLS, produce and group consume within the scope")

# Partition sizes (DescribeLogDirs) within the scope: `orders` alone; a token that may
# not read it learns no size and the directory carries the refusal.
admin_py = KafkaAdminClient(**kp)
dirs = [d for broker in admin_py.describe_log_dirs() for d in broker["log_dirs"]]
assert [(t["name"], [p["partition_index"] for p in t["partitions"]]) for d in dirs for t in d["topics"]] == [
    ("orders", [0])], dirs
# kafka-python's producer is idempotent by default: it is listed on `orders` (at its one
# batch's sequence 0); `payments` is outside the scope.
states = admin_py.describe_producers([PyTopicPartition("orders", 0)])
assert [(p.producer_epoch, p.last_sequence) for p in states[PyTopicPartition("orders", 0)].active_producers] == [
    (0, 0)], states
# Asked of the broker itself (the client finds no leader for a topic it may not see).
broker = admin_py.describe_log_dirs()[0]["broker"]
try:
    admin_py.describe_producers([PyTopicPartition("payments", 0)], broker_id=broker)
    raise AssertionError("producers listed on a topic outside the token's scope")
except TopicAuthorizationFailedError:
    pass
admin_py.close()
append_only_py = KafkaAdminClient(**{**kp, "sasl_mechanism": "PLAIN", "sasl_plain_username": "append-only",
                                      "sasl_plain_password": APPEND_ONLY})
dirs = [d for broker in append_only_py.describe_log_dirs() for d in broker["log_dirs"]]
assert all(d["topics"] == [] and d["error_code"] == 29 for d in dirs), dirs  # TOPIC_AUTHORIZATION_FAILED
try:
    append_only_py.describe_producers([PyTopicPartition("orders", 0)])
    raise AssertionError("a token without read listed a partition's producers")
except TopicAuthorizationFailedError:
    pass
append_only_py.close()
print("kafka-python: partition sizes and producers within the scope")

# A client that does not log in is cut off at its first request.
err = produce({"bootstrap.servers": BOOTSTRAP, "security.protocol": "SSL", "ssl.ca.location": CA}, "orders", b"x")
assert err is not None, "a client without SASL produced"
print("a client that does not log in produces nothing")

# A wrong secret is refused (librdkafka reports an authentication error).
errors = []
p = Producer({**librdkafka("SCRAM-SHA-256", "orders-rw", SCOPED + "x"), "message.timeout.ms": 3000,
              "error_cb": lambda e: errors.append(e)})
p.produce("orders", b"x")
p.flush(5)
assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
print("a wrong secret is refused")

# A token without `read` may not use groups.
c = Consumer(librdkafka("PLAIN", "append-only", APPEND_ONLY, **{"group.id": "g-denied"}))
c.subscribe(["orders"])
denied, deadline = None, time.time() + 20
while denied is None and time.time() < deadline:
    m = c.poll(0.5)
    if m is not None and m.error():
        denied = m.error()
c.close()
assert denied is not None and denied.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, denied

# Revoking the scoped token: refused within the bound, on the open connection and new ones.
p = Producer({**librdkafka("PLAIN", "orders-rw", SCOPED), "message.timeout.ms": 2000})
outcome = []
p.produce("orders", b"before", on_delivery=lambda err, msg: outcome.append(err))
p.flush(10)
assert outcome == [None], outcome
request = urllib.request.Request(f"{HTTP}/v1/access-tokens/orders-rw", method="DELETE",
                                 headers={"Authorization": f"Bearer {ROOT}"})
urllib.request.urlopen(request, context=context).read()
revoked_at = time.time()
refused_after = None
while time.time() < revoked_at + BOUND_S + 10:
    outcome.clear()
    p.produce("orders", b"after", on_delivery=lambda err, msg: outcome.append(err))
    p.flush(5)
    if outcome and outcome[0] is not None:
        refused_after = time.time() - revoked_at
        break
    time.sleep(0.2)
assert refused_after is not None, "the revoked token still produces"
assert refused_after <= BOUND_S + 3, f"refused only after {refused_after:.1f} s"
err = produce(librdkafka("PLAIN", "orders-rw", SCOPED), "orders", b"new connection")
assert err is not None, "a new connection with the revoked token produced"
print(f"the revoked token was refused {refused_after:.1f} s after the revoke (bound {BOUND_S} s)")
print("every step passed")
