"""Registry formats: Spark columns as Avro, Protobuf and JSON Schema payloads in
Confluent's wire format, and the driver's Schema Registry client.

Role: turn Arrow columns into framed payloads before the producer sees them (the producer stays
bytes in, bytes out). No module here imports pyspark: a Spark type is seen as its JSON form
(``StructType.jsonValue()``) or as the Arrow type of a batch (``sql_types``), so the plain
producer's users get the same serializers.

Modules and who uses them:

- ``format``: ``Format``, what one format is (its ``valueFormat`` name, the registry's schema
  type, its parse / derive / bind functions, and its columnar encoder and serializer named as
  ``Lazy`` ``"module:attribute"`` references, imported only when built).
- ``avro_format``, ``protobuf_format``, ``json_format``: each format's ``Format`` (driver side:
  they import their ``*_schema`` module and nothing heavier).
- ``catalog``: ``FORMATS``, the formats the sink knows, one line each; the options, the plan and
  the batch encoder look a format up here by name. A new format is a module giving its
  ``Format`` and one line in ``FORMATS``.
- ``sql_types``: Spark types as plain data, from Spark's JSON or from Arrow.
- ``nesting``: the bounds on how deep a type or schema nests (64 levels; 512 JSON levels for a
  schema document), checked before any walk recurses.
- ``avro_schema`` (driver): ``derive_avro_schema`` (Spark's own ``to_avro`` mapping),
  ``parse_avro_schema`` (an explicit ``value.schema``), ``bind`` (is the Spark type writable
  with the schema; the plan the encoder follows). No numpy: the driver's planning may load it.
- ``avro_columnar`` (executor): ``AvroColumnEncoder`` / ``encode_column``, a whole Arrow column
  to Avro payloads in bulk.
- ``json_schema`` (driver): ``derive_json_schema`` (a documented draft-07 mapping),
  ``parse_json_schema``, ``bind_json`` (is the Spark type writable with the schema; the
  encoder's plan). No numpy, no jsonschema.
- ``json_columnar`` (executor): ``JsonColumnEncoder`` / ``encode_column``, a whole Arrow column
  to UTF-8 JSON payloads in bulk with ``pyarrow.compute``; ``iso_text``, its dates and
  timestamps as ISO-8601 text built with numpy.
- ``protobuf_schema`` (driver): ``derive_protobuf_schema`` (a documented proto3 mapping),
  ``bind_protobuf`` (is the Spark type writable with the message; the encoder's plan). No numpy,
  no protobuf library. ``protobuf_descriptor``: ``.proto`` text compiled by protoc
  (``grpcio-tools``) into descriptors, ``parse_protobuf_schema`` and generated message classes.
- ``protobuf_columnar`` (executor): ``ProtobufColumnEncoder`` / ``encode_column``, a whole Arrow
  struct column to serialized messages in bulk.
- ``protobuf_serializer``: ``ProtobufSerializer``, the producer's serializer for Protobuf (per
  record over the ``protobuf`` library, in bulk with ``serialize_column``).
- ``base``: ``ColumnEncoder`` (a schema bound once per Arrow type) and ``FramedSerializer``
  (the producer serializer's shape), which each format fills in.
- ``columnar``: the numpy primitives the encoders share (varints, joining and grouping per-row
  byte pieces); constants (a union's branch index) use the records' scalar ``encode_varint``.
- ``wire_format``: Confluent's framing (magic byte, schema id, Protobuf's message indexes), per
  payload or for a whole column.
- ``registry`` (driver): the Schema Registry client (``SchemaRegistryConfig`` from the
  ``schema.registry.*`` options, ``SchemaRegistryClient``: register, lookup, latest version,
  schema by id, compatibility) over ``kafka_sink.net.http``;
- ``subjects`` (driver): the subject name strategies (``topic``, ``record``, ``topic_record``).
- ``avro_serializer``: ``AvroSerializer``, the producer's ``value.serializer`` /
  ``key.serializer`` (per record, over fastavro) with ``serialize_column`` (in bulk).
- ``json_serializer``: ``JsonSchemaSerializer``, the same for JSON (per record, over the stdlib
  ``json``).
- ``options`` (driver): ``FormatOptions``, the data source's ``valueFormat`` / ``keyFormat``,
  ``<side>.schema``, subject strategy, ``recordName`` / ``recordNamespace``,
  ``auto.register.schemas`` / ``use.latest.version``, ``topics`` and ``schema.registry.*``
  options.
- ``plan`` (driver): ``resolve_formats``, the registry work of a write before any task runs,
  giving the picklable ``FormatPlan`` (schema JSON and id per serialized column; with
  ``topics``, per listed topic).
- ``batch_encoder`` (executor): ``BatchEncoder``, a task's Arrow batches with their planned
  columns encoded (by their format's columnar encoder) and framed, each topic's rows with its
  subject's id.

The flow in the sink: the driver derives or parses the schema, binds it to the column's Spark
type (refusing a mismatch before any task runs), registers it and ships the schema JSON and its
id in the picklable writer (``plan``); each task builds a ``BatchEncoder`` once, which calls
``frame_column(encoder.encode(column), schema_id)`` per Arrow batch (``batch_encoder``).
JSON has the same pieces (``derive_json_schema`` / ``parse_json_schema``, ``bind_json``,
``JsonColumnEncoder``; the schema's ``title`` is the record name of the ``record`` strategies);
and so has Protobuf (``derive_protobuf_schema`` / ``parse_protobuf_schema``, ``bind_protobuf``,
``ProtobufColumnEncoder``, framed with the message-index list ``[0]``). The data source accepts
every format of ``catalog.FORMATS``, which the options, the plan and the batch encoder follow
through each format's ``Format``.

Invariants: registry calls are made by the driver only, before any task runs (the encoders
take the id as an input); a null row is never encoded (it stays a
null Kafka key or value); every schema or data error names the field path.
"""
