"""API keys, the version range this client speaks per API, and version negotiation.

Role: the answer to "which version of API X do we send to this broker". The codec implements a
wider range for some messages (see each class's ``VALID_VERSIONS``); ``CLIENT_VERSIONS`` is what
the client is willing to *send*.

Invariants:
- Versions are negotiated per connection from that broker's ApiVersions response.
- Produce is never sent below v3: Kafka 4.x brokers advertise min 0 but reject v0-v2
  (KAFKA-18659), and v3 is the first version carrying RecordBatch v2.
- Produce stops at v12: v13 identifies topics by id instead of name.
- Fetch goes up to v18: from v13 it names topics by id, so a caller picks ``topic`` or
  ``topic_id`` from the negotiated version (``fetch.uses_topic_ids``). ListTransactions v2 is the
  first that filters by transactional-id pattern; below it callers filter the listing themselves.
- AddPartitionsToTxn stops at v3 (v4+ is broker-to-broker). EndTxn goes up to v5, which belongs
  to Transactions V2 (the coordinator bumps the epoch and answers with it): a caller on
  Transactions V1 (finalized ``transaction.version`` < 2) caps EndTxn at v4 itself, and a
  transactional producer on V1 also caps Produce at v11.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import IntEnum
from types import MappingProxyType

__all__ = ["CLIENT_VERSIONS", "ApiKey", "negotiate"]


class ApiKey(IntEnum):
    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    FIND_COORDINATOR = 10
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    INIT_PRODUCER_ID = 22
    ADD_PARTITIONS_TO_TXN = 24
    END_TXN = 26
    DESCRIBE_CONFIGS = 32
    SASL_AUTHENTICATE = 36
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66


CLIENT_VERSIONS: Mapping[ApiKey, tuple[int, int]] = MappingProxyType(
    {
        ApiKey.PRODUCE: (3, 12),
        ApiKey.FETCH: (4, 18),
        ApiKey.LIST_OFFSETS: (1, 11),
        ApiKey.METADATA: (1, 12),
        ApiKey.FIND_COORDINATOR: (1, 6),
        ApiKey.SASL_HANDSHAKE: (0, 1),
        ApiKey.API_VERSIONS: (0, 4),
        ApiKey.CREATE_TOPICS: (2, 7),
        ApiKey.INIT_PRODUCER_ID: (0, 5),
        ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3),
        ApiKey.END_TXN: (0, 5),
        ApiKey.DESCRIBE_CONFIGS: (1, 4),
        ApiKey.SASL_AUTHENTICATE: (0, 2),
        ApiKey.DESCRIBE_PRODUCERS: (0, 0),
        ApiKey.DESCRIBE_TRANSACTIONS: (0, 0),
        ApiKey.LIST_TRANSACTIONS: (0, 2),
    }
)


def negotiate(
    broker_ranges: Mapping[int, tuple[int, int]],
    client_versions: Mapping[ApiKey, tuple[int, int]] = CLIENT_VERSIONS,
) -> dict[ApiKey, int]:
    """The highest version both sides support, per API; APIs with no common version are absent.

    ``broker_ranges`` maps api key -> (min_version, max_version) as advertised by ApiVersions.
    """
    chosen: dict[ApiKey, int] = {}
    for key, (client_min, client_max) in client_versions.items():
        broker = broker_ranges.get(int(key))
        if broker is None:
            continue
        high = min(client_max, broker[1])
        if high >= max(client_min, broker[0]):
            chosen[key] = high
    return chosen
