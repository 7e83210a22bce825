# Developer entry points. Every target sets up what it needs (idempotent, fast when done).
#   make setup      the virtualenv (.venv) and the jars and servers the tests start (.cache)
#   make demo       start a local Kafka, stream into it exactly-once, kill the driver mid-batch,
#                   restart it, and compare what read_committed and read_uncommitted consumers read
#   make test-unit  the fast loop: tests/unit alone, no broker and no jars (the virtualenv only)
#   make test       lint, then the whole test suite against a real Kafka broker, and the Spark
#                   suites again on PySpark 4.0 (.venv-spark40)
#   make test-spark40  the Spark suites on PySpark 4.0 alone
#   make chaos      the exactly-once chaos run alone (make test runs it too)
#   make lint       ruff (format + lint), mypy --strict, import layering; make fmt fixes formatting
#   make broker     run a local Kafka for manual use (Ctrl-C stops it); NODES=3 for a cluster
#   make bench      the main benchmarks (records, producer, spark, micro-batch); each bench-*
#                   target runs one (docs/benchmarks.md)

PYTHON       ?= python3
VENV         := .venv
PY           := $(VENV)/bin/python
# The second environment: the same checkout on the PySpark 4.0 line (conf/pyspark-4.0.txt).
VENV40       := .venv-spark40
PY40         := $(VENV40)/bin/python
CACHE        := .cache
KAFKA_LIB    := $(CACHE)/kafka/lib
SPARK_KAFKA  := $(CACHE)/spark-kafka/lib
# Spark's Kafka connector for the PySpark 4.0 environment's benchmarks (its JVM sink peer).
SPARK_KAFKA40 := $(CACHE)/spark-kafka-4.0/lib
S3PROXY      := $(CACHE)/s3proxy
REGISTRY     := $(CACHE)/schema-registry
MVN          := mvn -B -q
MVN_COPY     := org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies
PYTEST_ARGS  ?=
NODES        ?= 1

export KAFKA_JARS_DIR := $(abspath $(KAFKA_LIB))
export SPARK_KAFKA_JARS_DIR := $(abspath $(SPARK_KAFKA))
export SCHEMA_REGISTRY_DIR := $(abspath $(REGISTRY))
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))

.PHONY: setup test test-unit test-spark40 lint fmt demo broker chaos clean \
	bench bench-records bench-producer bench-transactions bench-spark bench-microbatch \
	bench-spark-eos bench-microbatch-eos bench-eos-commit bench-eos-acquire bench-eos-scale \
	bench-formats bench-fingerprint bench-producer-metrics bench-spark-formats \
	bench-metrics-recording bench-spark-stream bench-bad-records bench-first-row

setup: $(VENV)/.installed $(VENV40)/.installed $(KAFKA_LIB)/.fetched $(S3PROXY)/.fetched \
	$(REGISTRY)/.fetched $(SPARK_KAFKA)/.fetched

# One virtualenv per supported PySpark line, the same checkout installed in each; the PySpark
# of each comes from its constraints file.
$(VENV)/.installed: pyproject.toml conf/pyspark-4.3.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev]' -c conf/pyspark-4.3.txt
	touch $@

$(VENV40)/.installed: pyproject.toml conf/pyspark-4.0.txt
	test -x $(PY40) || $(PYTHON) -m venv $(VENV40)
	$(PY40) -m pip install -q --upgrade pip
	$(PY40) -m pip install -q -e '.[dev]' -c conf/pyspark-4.0.txt
	touch $@

# The broker POM is package data; the same command fetches the jars for an installed wheel.
$(KAFKA_LIB)/.fetched: kafka_sink/testing/conf/kafka-broker.pom.xml | $(VENV)/.installed
	$(PY) -m kafka_sink.testing fetch --dest $(abspath $(KAFKA_LIB)) >/dev/null
	touch $@

# LocalSchemaRegistry's server: Apicurio Registry, built from Maven Central by Quarkus's build
# (about 90 MB; the first run also fills ~/.m2 with the build tooling). The POM is package data.
$(REGISTRY)/.fetched: kafka_sink/testing/conf/schema-registry.pom.xml | $(VENV)/.installed
	$(PY) -m kafka_sink.testing fetch schema-registry --dest $(abspath $(REGISTRY)) >/dev/null
	touch $@

# One self-contained jar (about 40 MB): the S3-compatible server of the commit-log tests.
$(S3PROXY)/.fetched: conf/maven/s3proxy.pom.xml
	rm -rf $(S3PROXY)
	$(MVN) -f conf/maven/s3proxy.pom.xml $(MVN_COPY) -DexcludeTransitive=true \
		-DoutputDirectory=$(abspath $(S3PROXY))
	touch $@

# The same POM at the 4.0 line's connector (Maven Central has 4.0.0 of all three Spark jars).
$(SPARK_KAFKA40)/.fetched: conf/maven/spark-sql-kafka.pom.xml
	rm -rf $(SPARK_KAFKA40)
	$(MVN) -f conf/maven/spark-sql-kafka.pom.xml $(MVN_COPY) -DincludeScope=runtime \
		-Dspark.version=4.0.0 -Dtoken-provider.version=4.0.0 \
		-DincludeArtifactIds=spark-sql-kafka-0-10_2.13,spark-avro_2.13,spark-token-provider-kafka-0-10_2.13,kafka-clients,commons-pool2 \
		-DoutputDirectory=$(abspath $(SPARK_KAFKA40))
	touch $@

$(SPARK_KAFKA)/.fetched: conf/maven/spark-sql-kafka.pom.xml
	rm -rf $(SPARK_KAFKA)
	$(MVN) -f conf/maven/spark-sql-kafka.pom.xml $(MVN_COPY) -DincludeScope=runtime \
		-DincludeArtifactIds=spark-sql-kafka-0-10_2.13,spark-avro_2.13,spark-token-provider-kafka-0-10_2.13,kafka-clients,commons-pool2 \
		-DoutputDirectory=$(abspath $(SPARK_KAFKA))
	touch $@

lint: $(VENV)/.installed
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

fmt: $(VENV)/.installed
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# The Spark suites that cover every writer path (batch, streaming, both guarantees, a driver
# killed and restarted, a stage re-attempt, keyed batch re-runs, registry formats, discovery,
# Spark Connect, metrics, bad records) and the installed wheel, on PySpark 4.0, with the two unit
# files that read what the installed PySpark offers (its writer classes, its commit worker). The
# rest of the unit and broker tiers does not depend on PySpark's version and runs once, on the
# main environment.
SPARK40_TESTS := tests/spark/test_spark_batch.py tests/spark/test_spark_stream.py \
	tests/spark/test_spark_exactly_once.py tests/spark/test_spark_exactly_once_restarts.py \
	tests/spark/test_spark_exactly_once_stage_reattempt.py tests/spark/test_spark_idempotent_jobs.py \
	tests/spark/test_spark_formats_avro.py tests/spark/test_spark_discovery.py \
	tests/spark/test_spark_connect.py tests/spark/test_spark_metrics.py tests/spark/test_spark_bad_records.py \
	tests/unit/spark/test_spark_api.py tests/unit/spark/test_eos_query_start.py tests/packaging/test_installed_wheel.py
# Left to the main environment, as they test our code, not PySpark's: the weakened-safeguard half
# of the stage re-attempt proof (what the slot choice prevents; the re-attempt itself runs here),
# the keyed job's weaker-setting control (without the key, rows twice), and three of the four
# steps a keyed job is failed at (each a job and its re-run; one step runs here). Each costs a
# minute of both cores on 4.0, beside the main suite.
IDEMPOTENT_STEPS := tests/spark/test_spark_idempotent_jobs.py::test_a_keyed_job_failed_at_any_step_or_done_and_re_run_writes_every_row_once
SPARK40_DESELECT := --deselect \
	tests/spark/test_spark_exactly_once_stage_reattempt.py::test_without_the_slot_choice_the_zombie_aborts_the_re_attempts_prepared_transaction \
	--deselect tests/spark/test_spark_idempotent_jobs.py::test_without_the_key_a_job_killed_after_done_and_re_run_writes_every_row_twice \
	--deselect "$(IDEMPOTENT_STEPS)[before-intent]" --deselect "$(IDEMPOTENT_STEPS)[after-intent]" \
	--deselect "$(IDEMPOTENT_STEPS)[None]"
SPARK40_ENV := PYSPARK_PYTHON=$(abspath $(PY40)) PYSPARK_DRIVER_PYTHON=$(abspath $(PY40))
# Its temporary directory lies outside the checkout: the installed-wheel test's user must not
# find the checkout (nor its .cache) from where it runs.
test-spark40: setup
	tmp=$$(mktemp -d -t pykafka-spark40-XXXXXX); \
	$(SPARK40_ENV) $(PY40) -m pytest -p no:cacheprovider --basetemp=$$tmp/t \
		$(SPARK40_TESTS) $(SPARK40_DESELECT) $(PYTEST_ARGS); rc=$$?; rm -rf $$tmp; exit $$rc

# pytest exits 5 when it collected nothing: that is a failure here, never a silent pass.
# The whole suite runs the chaos run (on its own 3-node Kafka, mostly waiting between its
# faults; how long it takes: docs/testing.md) and then the Spark suites on PySpark 4.0
# (SPARK40_TESTS) in a second chain beside the rest rather than after it; their output, the chaos
# run's seed and summary included, is printed at the end. With PYTEST_ARGS, one pytest runs what
# they select, on the main environment.
CHAOS_TEST := tests/spark/test_spark_exactly_once_chaos.py
test: setup lint
ifeq ($(strip $(PYTEST_ARGS)),)
	( $(PY) -m pytest -p no:cacheprovider -s --basetemp=$(CACHE)/chaos-tmp $(CHAOS_TEST) \
		> $(CACHE)/chaos-run.log 2>&1; echo $$? > $(CACHE)/chaos-run.rc; \
	  tmp=$$(mktemp -d -t pykafka-spark40-XXXXXX); \
	  $(SPARK40_ENV) $(PY40) -m pytest -p no:cacheprovider --basetemp=$$tmp/t \
		$(SPARK40_TESTS) $(SPARK40_DESELECT) > $(CACHE)/spark40-run.log 2>&1; \
	  echo $$? > $(CACHE)/spark40-run.rc; rm -rf $$tmp ) & \
	side=$$!; \
	$(PY) -m pytest --deselect $(CHAOS_TEST)::test_streaming_exactly_once_under_chaos; rc=$$?; \
	wait $$side; chaos_rc=$$(cat $(CACHE)/chaos-run.rc); spark40_rc=$$(cat $(CACHE)/spark40-run.rc); \
	echo "---- the chaos run (exit $$chaos_rc) ----"; tail -n 60 $(CACHE)/chaos-run.log; \
	echo "---- the Spark suites on PySpark 4.0 (exit $$spark40_rc) ----"; \
	tail -n 40 $(CACHE)/spark40-run.log; \
	if [ $$rc -eq 5 ]; then echo "pytest ran no tests: failing"; exit 1; fi; \
	if [ $$chaos_rc -ne 0 ]; then exit $$chaos_rc; fi; \
	if [ $$spark40_rc -ne 0 ]; then exit $$spark40_rc; fi; exit $$rc
else
	$(PY) -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest ran no tests: failing"; exit 1; fi; exit $$rc
endif

# The unit tests need the virtualenv only (no broker, no Spark, no jars), so this skips setup's
# downloads. PYTEST_ARGS is added to the command line (-k, -x, a file of tests/unit).
# The fast loop needs no jars: the few tests under tests/unit that start a broker (the driver's
# import checks) are left to make test.
test-unit: $(VENV)/.installed
	$(PY) -m pytest tests/unit $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest ran no tests: failing"; exit 1; fi; exit $$rc

demo: setup
	$(PY) jobs/demo.py

broker: setup
	$(PY) -m kafka_sink.testing --nodes $(NODES)

bench: bench-records bench-producer bench-spark bench-microbatch

bench-records: setup
	$(PY) benchmarks/bench_records.py

bench-producer: setup
	$(PY) benchmarks/bench_producer.py

bench-transactions: setup
	$(PY) benchmarks/bench_producer.py --clients ours-bulk,ours-bulk-txn --rounds 3 --memory-mib 0

# The matrix of workloads x codecs x writers; BENCH_QUICK=1 for a short smoke run,
# BENCH_REPEAT=N for best of N, BENCH_OUT=dir for where the table and plot go.
bench-spark: setup $(SPARK_KAFKA)/.fetched
	$(PY) benchmarks/bench_spark.py

# The streaming path on every PySpark line set up (4.3 and 4.0), each against Spark's JVM sink on
# the same PySpark and the foreachBatch + confluent-kafka loop (results/bench_spark_stream*).
BENCH_STREAM_ARGS ?= --workloads json200,json1k --codecs lz4 --repeat 3 \
	--writers ceiling,jvm-default,jvm-tuned,pykafka,confluent-fp
bench-spark-stream: setup $(SPARK_KAFKA)/.fetched $(SPARK_KAFKA40)/.fetched
	$(PY) benchmarks/bench_spark.py --streaming $(BENCH_STREAM_ARGS) \
		--out benchmarks/results --stem bench_spark_stream
	$(SPARK40_ENV) $(PY40) benchmarks/bench_spark.py --streaming $(BENCH_STREAM_ARGS) \
		--jars-dir $(abspath $(SPARK_KAFKA40)) --out benchmarks/results --stem bench_spark_stream_4.0

# Median addBatch of a small streaming query (rate source, 2,000 rows/s) per sink.
bench-microbatch: setup $(SPARK_KAFKA)/.fetched
	$(PY) benchmarks/bench_microbatch.py

# A new session's first df.write (Spark's JVM sink, a discarding Python data source, pykafka) and
# a new query's first record (JVM sink, pykafka), each case in a fresh Spark process, alternating
# order (results/bench_first_row.*). BENCH_FIRST_ROW_ROUNDS=N for N rounds (default 3).
bench-first-row: setup $(SPARK_KAFKA)/.fetched
	$(PY) benchmarks/bench_first_row.py $(BENCH_FIRST_ROW_ARGS)

# Exactly-once against at-least-once, same run and data (results/bench_spark_eos.*).
bench-spark-eos: setup
	$(PY) benchmarks/bench_spark.py --writers pykafka,pykafka-eos --codecs lz4 \
		--out benchmarks/results --stem bench_spark_eos

# What onRecordError=skip costs when no row is bad (results/bench_bad_records.md).
bench-bad-records: setup
	$(PY) benchmarks/bench_spark.py --writers pykafka,pykafka-skip --codecs lz4 \
		--workloads json200,json1k --repeat 3 --out benchmarks/results --stem bench_bad_records

# What exactly-once adds to addBatch per micro-batch (results/bench_microbatch_eos.md).
bench-microbatch-eos: setup
	$(PY) benchmarks/bench_microbatch.py --sinks python-noop,pykafka,pykafka-eos \
		--out benchmarks/results/bench_microbatch_eos.md

# The driver's commit per batch and a task's producer set-up, without Spark.
bench-eos-commit: setup
	$(PY) benchmarks/bench_eos_commit.py --out benchmarks/results/bench_eos_commit.md

bench-eos-acquire: setup
	$(PY) benchmarks/bench_eos_acquire.py

# 64 exactly-once tasks into 200 partitions on 3 nodes, one-second triggers, 10 minutes
# (results/bench_eos_scale.md): the driver's commit per batch and the transactional ids in use.
bench-eos-scale: setup
	$(PY) benchmarks/bench_eos_scale.py --out benchmarks/results/bench_eos_scale.md

# Avro payloads of ~300-byte structs: the columnar encoder against fastavro and confluent-kafka
# per row (results/bench_formats.md).
bench-formats: setup
	$(PY) benchmarks/bench_formats.py --out benchmarks/results/bench_formats.md

bench-fingerprint: setup
	$(PY) benchmarks/bench_row_fingerprint.py --out benchmarks/results/bench_row_fingerprint.md

# The exactly-once chaos run alone (make test runs it too; how long it takes: docs/testing.md):
# CHAOS_SEED replays a fault schedule, CHAOS_SECONDS spreads the faults over that many seconds
# (default 480); CHAOS_GUARANTEE=at-least-once expects duplicates.
CHAOS_SEED      ?=
CHAOS_SECONDS   ?= 480
CHAOS_GUARANTEE ?= exactly-once
chaos: setup
	PYKAFKA_CHAOS_SEED=$(CHAOS_SEED) PYKAFKA_CHAOS_SECONDS=$(CHAOS_SECONDS) \
		PYKAFKA_CHAOS_GUARANTEE=$(CHAOS_GUARANTEE) \
		$(PY) -m pytest tests/spark/test_spark_exactly_once_chaos.py -s $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) $(CACHE) .mypy_cache .ruff_cache .pytest_cache .hypothesis *.egg-info

# LocalPushgateway's server: the static binary of Debian's prometheus-pushgateway package
# (apt-get download + dpkg -x; about 11 MB), for the sink's metrics push tests.
PUSHGATEWAY  := $(CACHE)/pushgateway
export PUSHGATEWAY_DIR := $(abspath $(PUSHGATEWAY))
setup: $(PUSHGATEWAY)/.fetched

$(PUSHGATEWAY)/.fetched: | $(VENV)/.installed
	$(PY) -m kafka_sink.testing fetch pushgateway --dest $(abspath $(PUSHGATEWAY)) >/dev/null
	touch $@

# What recording the producer's metrics costs: send() and send_columns() with and without it,
# alternating in one run (docs/metrics.md quotes the numbers).
bench-producer-metrics: setup
	$(PY) benchmarks/bench_producer.py --clients ours-send,ours-send-nometrics,ours-bulk,ours-bulk-nometrics \
		--rounds 4 --memory-mib 0

# Registry formats through Spark: valueFormat=avro|jsonschema|protobuf against Spark's sink fed by
# to_avro / to_json and foreachPartition with confluent-kafka's serializers, against a local
# registry (results/bench_spark_formats.*; about 10 minutes). A quick run:
# make bench-spark-formats BENCH_SPARK_FORMATS_ARGS="--rows 20000 --runs 1 --out bsf-out"
BENCH_SPARK_FORMATS_ARGS ?=
bench-spark-formats: setup $(SPARK_KAFKA)/.fetched
	$(PY) benchmarks/bench_spark_formats.py $(BENCH_SPARK_FORMATS_ARGS)

# The I/O thread's cost of recording one Produce request's metrics, in CPU microseconds.
bench-metrics-recording: setup
	$(PY) benchmarks/bench_metrics_recording.py
