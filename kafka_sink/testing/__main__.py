"""``python -m kafka_sink.testing``: run a local Kafka for manual use until Ctrl-C.

Prints the bootstrap servers on stdout (one line, so scripts can read it) and keeps the cluster
up until SIGINT or SIGTERM, then stops every node and removes its temporary directory.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from types import FrameType

from kafka_sink.testing.local_kafka import JvmProfile, KafkaSetupError, KafkaStartError, LocalKafka


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m kafka_sink.testing",
        description="Run Apache Kafka (KRaft) on 127.0.0.1 until Ctrl-C.",
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
