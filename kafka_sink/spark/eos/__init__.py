"""Exactly-once delivery: a Kafka transaction per task attempt, committed by the driver.

Modules: ``plan`` (transactional ids, the intent records and the plan a write carries to its
tasks), ``committer`` (the driver's roll-forward commit over an intent store), ``kafka_intents``
(the intent store on a compacted Kafka topic) and ``timeout`` (``transaction.timeout.ms`` against
the brokers' maximum).

Invariants: an intent is durable before the first EndTxn of its batch; a transaction an intent
names is only ever committed; the driver's paths here never load the producer, numpy or
``pyarrow.compute``.
"""
