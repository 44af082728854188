"""A first kraftlog program: create a topic, produce to it, read it back, describe it, delete it.

    python examples/client_quickstart.py --bootstrap-server 127.0.0.1:9092 \
        --bootstrap-controller 127.0.0.1:9093

The admin client talks to the controllers (as Kafka's ``--bootstrap-controller``); the producer and
the consumer talk to the brokers. Start a cluster with ``kraftlog local start`` and take both
address lists from ``kraftlog local status``. The test suite runs this file against a real cluster
(tests/integration/test_client_example.py).
"""

from __future__ import annotations

import argparse
import sys
import time

from kraftlog.client import Admin, Consumer, NewTopic, Producer
from kraftlog.common import errors as kerr


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Produce, consume and administer one topic.")
    parser.add_argument("--bootstrap-server", required=True, help="broker addresses, host:port[,...]")
    parser.add_argument("--bootstrap-controller", required=True, help="controller addresses, host:port[,...]")
    parser.add_argument("--topic", default="quickstart")
    parser.add_argument("--records", type=int, default=10)
    args = parser.parse_args(argv)

    with Admin(args.bootstrap_controller, request_timeout_ms=30_000) as admin:
        created = admin.create_topics([NewTopic(args.topic, num_partitions=3, replication_factor=1)])
        error = created.topics[0].error
        if error.code and error.name != kerr.TopicAlreadyExistsError.error_name:
            kerr.raise_for_code(error.code, error.message)
        print(f"topic {args.topic} ready")

        # Keys pick the partition (murmur2, as Kafka's producer): the same key always lands together.
        with Producer(args.bootstrap_server, acks="all", linger_ms=5) as producer:
            futures = [
                producer.send(args.topic, value=f"event {i}".encode(), key=f"user-{i % 3}".encode())
                for i in range(args.records)
            ]
            producer.flush()
            for future in futures:
                meta = future.result()
                print(f"produced to partition {meta.partition} at offset {meta.offset}")

        consumer = Consumer(args.bootstrap_server, auto_offset_reset="earliest")
        try:
            consumer.assign([(args.topic, p) for p in range(3)])
            received = []
            deadline = time.monotonic() + 30
            while len(received) < args.records and time.monotonic() < deadline:
                received += consumer.poll(timeout_ms=500)
        finally:
            consumer.close()
        for record in sorted(received, key=lambda r: (r.partition, r.offset)):
            print(
                f"consumed {record.key.decode()} -> {record.value.decode()} "
                f"(partition {record.partition}, offset {record.offset})"
            )
        print(f"consumed {len(received)} of {args.records} records")

        described = admin.describe_topics([args.topic]).topics[0]
        for part in described.partitions:
            print(
                f"partition {part.partition_index}: leader {part.leader_id}, replicas {list(part.replicas)}, "
                f"isr {list(part.isr)}"
            )

        deleted = admin.delete_topics([args.topic])
        print(f"topic {args.topic} deleted: {deleted.topics[0].error.code == 0}")
    return 0 if len(received) == args.records else 1


if __name__ == "__main__":
    sys.exit(main())
