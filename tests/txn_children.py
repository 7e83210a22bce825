"""Child-process scripts of the transaction tests: another client (confluent-kafka, not ours)
acting on a transactional id, each run as ``python -c SCRIPT ARGS...``.

- :data:`INIT_TRANSACTIONS` (``bootstrap transactional_id``): one InitProducerId on the id, as a
  stale task attempt would: an open transaction of the id is aborted, an ended one's id moves on.
- :data:`OPEN_AND_DIE` (``bootstrap transactional_id topic``): a plain record on partitions 0
  and 1, then a transaction of four records over them, acknowledged, and the process exits
  with the transaction open.
"""

INIT_TRANSACTIONS = """
import sys
from confluent_kafka import Producer
producer = Producer({"bootstrap.servers": sys.argv[1], "transactional.id": sys.argv[2]})
producer.init_transactions(30)
"""

OPEN_AND_DIE = """
import os, sys
from confluent_kafka import Producer
bootstrap, transactional_id, topic = sys.argv[1:4]
plain = Producer({"bootstrap.servers": bootstrap})
for partition in (0, 1):
    plain.produce(topic, value=b"before", partition=partition)
plain.flush(30)
producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id})
producer.init_transactions(30)
producer.begin_transaction()
for i in range(4):
    producer.produce(topic, value=f"txn-{i}".encode(), partition=i % 2)
if producer.flush(30) != 0:
    sys.exit("records not acknowledged")
os._exit(0)  # dies with the transaction open
"""
