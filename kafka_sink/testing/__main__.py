"""``python -m kafka_sink.testing``: run a local Kafka, or fetch what it and the registry run from.

- ``python -m kafka_sink.testing [run] [--nodes 3] ...``: start a local Kafka, print the
  bootstrap servers on stdout (one line, so scripts can read it) and keep the cluster up until
  SIGINT or SIGTERM, then stop every node and remove its temporary directory.
- ``python -m kafka_sink.testing fetch [kafka|schema-registry|pushgateway] [--dest DIR]
  [--offline] [--force]``: download the broker jars with Maven (into ``$KAFKA_JARS_DIR`` or the
  per-user cache that ``LocalKafka`` searches), build the Schema Registry that
  ``LocalSchemaRegistry`` runs (into ``$SCHEMA_REGISTRY_DIR`` or its per-user cache), or take
  the Pushgateway binary ``LocalPushgateway`` runs from Debian's package (into
  ``$PUSHGATEWAY_DIR`` or its per-user cache); print the directory on stdout.
  Progress and errors go to stderr; a missing ``java`` or ``mvn`` exits with status 2 and says
  what to install.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType

from kafka_sink.testing.local_kafka import JvmProfile, KafkaSetupError, KafkaStartError, LocalKafka
from kafka_sink.testing.local_schema_registry import fetch_schema_registry
from kafka_sink.testing.prerequisites import FetchOptions, fetch_kafka_jars
from kafka_sink.testing.pushgateway import fetch_pushgateway

_PROG = "python -m kafka_sink.testing"


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args[:1] == ["fetch"]:
        return fetch(args[1:])
    if args[:1] == ["run"]:
        args = args[1:]
    return run(args)


def fetch(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog=f"{_PROG} fetch",
        description=(
            "Download the Apache Kafka broker jars (org.apache.kafka:kafka_2.13 and its runtime "
            "dependencies) from Maven Central with Maven, for LocalKafka; or, with "
            "schema-registry, build Apicurio Registry from Maven Central for "
            "LocalSchemaRegistry. Needs java and mvn."
        ),
    )
    parser.add_argument(
        "what",
        nargs="?",
        choices=("kafka", "schema-registry", "pushgateway"),
        default="kafka",
        help="what to fetch (default: kafka)",
    )
    parser.add_argument(
        "--dest",
        default=None,
        help="the directory to fill (default: $KAFKA_JARS_DIR or $SCHEMA_REGISTRY_DIR if set, "
        "else a per-user cache that LocalKafka or LocalSchemaRegistry searches without settings)",
    )
    parser.add_argument("--offline", action="store_true", help="Maven offline (-o): only ~/.m2")
    parser.add_argument("--force", action="store_true", help="fetch even if already fetched")
    parser.add_argument("--mvn", default=None, help="the Maven executable (default: mvn on PATH)")
    parser.add_argument(
        "--timeout-s",
        type=float,
        default=None,
        help="give Maven this long (default 900 for kafka, 1800 for schema-registry)",
    )
    args = parser.parse_args(argv)
    fetchers = {"schema-registry": fetch_schema_registry, "pushgateway": fetch_pushgateway}
    fetcher = fetchers.get(args.what, fetch_kafka_jars)
    options: FetchOptions = {
        "offline": args.offline,
        "force": args.force,
        "mvn": args.mvn,
        "log": lambda line: print(line, file=sys.stderr, flush=True),
    }
    if args.timeout_s is not None:
        options["timeout_s"] = args.timeout_s
    try:
        where = fetcher(args.dest, **options)
    except KafkaSetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(where, flush=True)
    return 0


def run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog=_PROG,
        description="Run Apache Kafka (KRaft) on 127.0.0.1 until Ctrl-C.",
        epilog=f"`{_PROG} fetch --help`: download the broker jars first.",
    )
    parser.add_argument("--nodes", type=int, choices=(1, 3), default=1)
    parser.add_argument("--profile", choices=("test", "bench"), default="test")
    parser.add_argument("--heap", default=None, help="per-node max heap, e.g. 512m")
    parser.add_argument("--proxied", action="store_true", help="also advertise through TcpProxy")
    parser.add_argument(
        "--sasl-user",
        action="append",
        default=[],
        metavar="NAME:PASSWORD",
        help="add a SASL_PLAINTEXT listener with this PLAIN/SCRAM user (repeatable)",
    )
    parser.add_argument(
        "--mtls",
        action="store_true",
        help="add an SSL listener that requires a client certificate (throwaway PKI)",
    )
    args = parser.parse_args(argv)
    sasl_users = dict(item.split(":", 1) for item in args.sasl_user if ":" in item)
    if len(sasl_users) != len(args.sasl_user):
        parser.error("--sasl-user takes NAME:PASSWORD")

    stop = threading.Event()

    def _request_stop(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, _request_stop)
    signal.signal(signal.SIGTERM, _request_stop)
    profile: JvmProfile = "bench" if args.profile == "bench" else "test"
    try:
        with LocalKafka(
            nodes=args.nodes,
            heap=args.heap,
            jvm_profile=profile,
            proxied=args.proxied,
            sasl_users=sasl_users,
            mtls=args.mtls,
        ) as kafka:
            print(kafka.bootstrap_servers, flush=True)
            print(
                f"Kafka up: {args.nodes} node(s) in {kafka.startup_s:.1f}s, "
                f"data in {kafka.workdir}; Ctrl-C stops it.",
                file=sys.stderr,
                flush=True,
            )
            if args.proxied:
                print(f"proxied: {kafka.proxied_bootstrap_servers}", file=sys.stderr, flush=True)
            if sasl_users:
                print(f"sasl: {kafka.sasl_bootstrap_servers}", file=sys.stderr, flush=True)
            if args.mtls:
                pki = kafka.pki
                print(
                    f"mtls: {kafka.mtls_bootstrap_servers} (ssl.truststore.location={pki.ca} "
                    f"ssl.keystore.location={pki.client_keystore})",
                    file=sys.stderr,
                    flush=True,
                )
            while not stop.wait(1.0):
                if not kafka.running_node_ids:
                    print("every node exited", file=sys.stderr)
                    return 1
            print("stopping...", file=sys.stderr, flush=True)
    except (KafkaSetupError, KafkaStartError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
