"""What needs no producer: end, list and abort transactions, and read a small topic back.

Modules:

- ``client``: ``AdminClient``, a one-shot blocking client over the net layer's ``NetworkClient``
  (bounded by a ``Deadline``; retries what Kafka calls retriable, re-finds moved coordinators).
- ``transactions``: ``complete_transaction`` (EndTxn for a prepared transaction, from any process),
  ``list_transactions`` / ``describe_transactions`` and ``abort_transactions`` by id prefix.
- ``producers``: ``describe_producers``, each partition leader's active producers (the first
  offset and last sequence of an open transaction) and its log end offset.
- ``topic_log``: ``TopicLog``, a tiny producer-and-reader of one partition of a small topic
  (Produce with ``acks=all``, ListOffsets, Fetch) for the exactly-once intent store.

Invariants: this package sits between ``net/`` and ``producer/``: it imports only ``net``, ``wire``,
``records`` and the shared leaves (never the producer, numpy or ``pyarrow``; the import-linter
contracts in pyproject.toml hold it to that), so the driver's exactly-once paths stay light. Its
config is the net layer's ``ClientConfig`` plus the few producer keys it honours
(``client.AdminConfig``). Every call is bounded by a deadline.
"""
