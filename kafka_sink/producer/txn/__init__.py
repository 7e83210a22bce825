"""The transactional half of the producer, as Java's ``TransactionManager`` and its handlers.

Modules:

- ``manager``: ``TransactionManager``, the producer id and epoch and the transaction state machine
  (UNINITIALIZED -> READY -> IN_TRANSACTION -> COMMITTING/ABORTING -> READY, and the error states).
- ``sequences``: ``TxnPartitionMap``, the per-partition sequence bookkeeping the manager owns
  (next and last acknowledged sequence, in-flight batches, unresolved and re-sequenced ranges).
- ``requests``: one pending coordinator request (``TxnRequestHandler``) and the result that
  callers wait on.
- ``coordinator``: sends those requests (FindCoordinator, InitProducerId, AddPartitionsToTxn,
  EndTxn) from the sender's thread and applies the coordinator's answers.

Invariants: only the sender's thread talks to the coordinator; user threads enqueue requests and
wait on bounded results.
"""
