"""The host:port of GROUP's coordinator, as the cluster answers FindCoordinator.
Usage: coordinator_of.py BOOTSTRAP GROUP."""
import sys

from confluent_kafka.admin import AdminClient

BOOTSTRAP, GROUP = sys.argv[1], sys.argv[2]
admin = AdminClient({"bootstrap.servers": BOOTSTRAP})
described = admin.describe_consumer_groups([GROUP])[GROUP].result(20)
print(f"{described.coordinator.host}:{described.coordinator.port}")
