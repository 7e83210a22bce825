"""Registry formats (Avro, Protobuf, JSON Schema in Confluent's wire format) and their parts.

The room of ``kafka_sink.spark`` that turns values into registry-framed payloads. Nothing here
imports pyspark, so the producer's users can use what lives here without Spark; the data source
imports this room, never the other way round.

- ``registry``: the driver's Schema Registry client (``SchemaRegistryConfig`` from the
  ``schema.registry.*`` options, ``SchemaRegistryClient``: register, lookup, latest version,
  schema by id, compatibility) over ``kafka_sink.net.http``;
- ``subjects``: the subject name strategies (``topic``, ``record``, ``topic_record``).

Invariants: registry calls are made on the driver only, before any task runs; executors get
schema ids. No module here imports pyspark, the producer, or the data source and its writers.
"""
