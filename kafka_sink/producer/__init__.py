"""The producer: Java's KafkaProducer design in Python.

``producer.KafkaProducer`` (facade: send, send_columns, flush, close) -> ``partitioner``
(explicit > murmur2(key) > sticky) -> ``accumulator.RecordAccumulator`` (per-partition deques
of ``batch.ProducerBatch``, bounded by buffer.memory) -> ``sender.Sender`` (the I/O thread,
steppable with ``run_once``) over the net layer's NetworkClient; ``transaction_manager``
(idempotence: producer id, epoch, sequences; the transaction state machine), ``txn_requests``
and ``txn_sender`` (the coordinator requests of a transactional producer), ``prepared``
(``PreparedTransaction``) and ``futures`` (per-record and bulk results);
``config.ProducerConfig`` turns Kafka's dotted keys into validated settings; ``plugins`` resolves
and adapts serializers, ``partitioner.class`` and interceptors (``interceptors``:
ProducerRecord, ProducerInterceptors), and ``bulk_plugins`` runs them over ``send_columns`` rows.
``transaction_admin`` ends, lists and aborts transactions without the producer that wrote them
(``complete_transaction``, ``list_transactions``, ``abort_transactions``), over the one-shot
blocking ``admin_client``.

This package never imports socket, selectors, ssl or pyspark.
"""
