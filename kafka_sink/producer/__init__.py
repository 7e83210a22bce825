"""The producer: Java's KafkaProducer design in Python.

``producer.KafkaProducer`` (facade: send, send_columns, flush, close) -> ``partitioner``
(explicit > murmur2(key) > sticky) -> ``accumulator.RecordAccumulator`` (per-partition deques
of ``batch.ProducerBatch``, bounded by buffer.memory) -> ``sender.Sender`` (the I/O thread,
steppable with ``run_once``) over the net layer's NetworkClient. ``bulk`` is the columnar path of
``send_columns`` (partition a whole Arrow column, encode it with ``records.columnar``);
``futures`` holds the per-record and bulk results; ``config.ProducerConfig`` turns Kafka's dotted
keys into validated settings (the keys every client shares come from ``net.config``);
``plugins`` resolves and adapts serializers, ``partitioner.class`` and interceptors
(``interceptors``: ProducerRecord, ProducerInterceptors), and ``bulk_plugins`` runs them over
``send_columns`` rows.

``txn/`` is idempotence and transactions: ``txn.manager.TransactionManager`` (producer id, epoch,
the transaction state machine), ``txn.sequences.TxnPartitionMap`` (per-partition sequences),
``txn.requests`` and ``txn.coordinator`` (the coordinator requests of a transactional producer,
sent from the sender's thread). A prepared transaction is a ``kafka_sink.prepared
.PreparedTransaction``; ending it without the producer that wrote it is ``kafka_sink.admin``'s.

This package never imports socket, selectors, ssl or pyspark.
"""
