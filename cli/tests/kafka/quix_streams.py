"""Quix Streams, a Python stream processing library on confluent-kafka, unmodified: a
stateful count per word behind a group_by (a repartition topic), at least once. The app's
state store is rebuilt twice from its changelog topic (compacted, created by the library)
in a fresh state directory, and the counts carry on from where they were.

Usage: quix_streams.py KAFKA_ADDR"""
import json
import sys
import tempfile

from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource

from quixstreams import Application
from quixstreams.models import TopicConfig

broker = sys.argv[1]
WORDS = ["apple", "pear", "fig"]
PER_RUN = 150
RUNS = 3


def run(first):
    """One instance of the app on a fresh state directory: produces PER_RUN words (no
    key), then processes them."""
    app = Application(broker_address=broker, consumer_group="counter", auto_offset_reset="earliest",
                      processing_guarantee="at-least-once", state_dir=tempfile.mkdtemp(), loglevel="WARNING")
    words = app.topic("words", value_deserializer="json",
                      config=TopicConfig(num_partitions=3, replication_factor=1))
    counts = app.topic("counts", value_serializer="json")
    with app.get_producer() as producer:
        for i in range(first, first + PER_RUN):
            producer.produce(topic=words.name, value=json.dumps({"word": WORDS[i % 3], "i": i}))
    sdf = app.dataframe(words).group_by("word")

    counted = []

    def count(value, state):
        total = state.get("total", 0) + 1
        state.set("total", total)
        counted.append(value["i"])
        if len(counted) == PER_RUN:
            app.stop()  # after this record: its output is produced and committed first
        return {"word": value["word"], "i": value["i"], "count": total}

    sdf.apply(count, stateful=True).to_topic(counts)
    app.run(timeout=60)
    assert sorted(counted) == list(range(first, first + PER_RUN)), f"run from {first} counted {len(counted)}"


for n in range(RUNS):
    run(n * PER_RUN)
print("ran the app", RUNS, "times")

consumer = Consumer({"bootstrap.servers": broker, "group.id": "check", "enable.auto.commit": False})
consumer.assign([TopicPartition("counts", 0, 0)])
outputs = []
while len(outputs) < RUNS * PER_RUN:
    message = consumer.poll(10)
    assert message is not None, f"only {len(outputs)} outputs"
    assert not message.error(), message.error()
    outputs.append(json.loads(message.value()))
consumer.close()
# At least once, and each run stopped after a clean commit: exactly one output per input,
# numbered 1, 2, 3, ... per word across the three state stores.
assert sorted(o["i"] for o in outputs) == list(range(RUNS * PER_RUN)), "an input missing or repeated"
for word in WORDS:
    seen = [o["count"] for o in outputs if o["word"] == word]
    assert seen == list(range(1, len(seen) + 1)), f"{word}: {seen[:10]}..."
print("counts carried across", RUNS, "state stores:", {w: sum(o["word"] == w for o in outputs) for w in WORDS})

admin = AdminClient({"bootstrap.servers": broker})
topics = admin.list_topics(timeout=10).topics
changelogs = [t for t in topics if t.startswith("changelog__counter")]
repartitions = [t for t in topics if t.startswith("repartition__counter")]
assert changelogs and repartitions, sorted(topics)
resource = ConfigResource(ConfigResource.Type.TOPIC, changelogs[0])
configs = admin.describe_configs([resource])[resource].result()
assert configs["cleanup.policy"].value == "compact", configs["cleanup.policy"].value
print("library's topics:", changelogs, repartitions, "changelog cleanup.policy=compact")
print("every step passed")
