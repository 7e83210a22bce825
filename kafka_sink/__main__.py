"""``python -m kafka_sink <command>``: the package's command line.

Commands: ``report`` (the sink's per-batch metrics from a commit log; ``kafka_sink/report``).
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "report":
        print("usage: python -m kafka_sink report <commitLog or checkpoint location> "
              "[--per auto|batch|minute] [--plot FILE.png]", file=sys.stderr)  # fmt: skip
        return 2
    from kafka_sink.report.cli import main as report

    return report(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
