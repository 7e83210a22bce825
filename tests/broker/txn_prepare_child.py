"""Run as a separate process by the broker tests: prepare a transaction with KafkaProducer and
exit without ending it.

Usage: ``python txn_prepare_child.py BOOTSTRAP TRANSACTIONAL_ID TOPIC_A TOPIC_B COUNT TIMEOUT_MS``

Initialises the transactional id, begins a transaction, sends ``COUNT`` records to partitions
0-2 of ``TOPIC_A`` with ``send()`` and ``COUNT`` to partitions 0-1 of ``TOPIC_B`` with
``send_columns()`` (values ``<id>-a-<i>`` and ``<id>-b-<i>``; ``COUNT=0`` sends nothing), calls
``prepare_transaction()``, prints the pickled ``PreparedTransaction`` as one line of base64,
closes the producer (which must leave a prepared transaction open) and exits normally.
"""

from __future__ import annotations

import base64
import pickle
import sys

import pyarrow as pa

from kafka_sink import KafkaProducer


def main(argv: list[str]) -> None:
    bootstrap, transactional_id, topic_a, topic_b = argv[:4]
    count, timeout_ms = int(argv[4]), int(argv[5])
    config = {
        "bootstrap.servers": bootstrap,
        "transactional.id": transactional_id,
        "transaction.timeout.ms": str(timeout_ms),
    }
    with KafkaProducer(config) as producer:
        producer.init_transactions(timeout=60)
        producer.begin_transaction()
        for i in range(count):
            producer.send(topic_a, f"{transactional_id}-a-{i}".encode(), partition=i % 3)
        if count:
            producer.send_columns(
                topic_b,
                pa.array([f"{transactional_id}-b-{i}".encode() for i in range(count)]),
                partitions=pa.array([i % 2 for i in range(count)], pa.int32()),
            )
        prepared = producer.prepare_transaction(timeout=60)
        print(base64.b64encode(pickle.dumps(prepared)).decode(), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
