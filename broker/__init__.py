"""broker: one broker of the cluster, in sub-packages with public faces (docs/architecture.md §2).

- `broker.replica`: the metadata follower, the replica manager, partitions (leader and follower
  state, high watermark, ISR), fetchers and the request purgatory;
- `broker.coordinator`: the one coordinator runtime (as Kafka's CoordinatorRuntime) that loads
  pure shards from an internal topic, appends their records and runs their timers;
- `broker.groups` and `broker.txn`: the group and transaction coordinators on that runtime;
- `broker.kafka`: the Kafka-protocol listener (wire codec, server, handlers);
- here: the node wiring (`BrokerServer`, its lifecycle, listeners, controller channel and gRPC
  servicers) that builds them.

Imports go down that list's reverse: kafka -> txn -> groups -> coordinator -> replica; no
sub-package imports the wiring.
"""

from kraftlog.broker._controller_channel import ControllerChannel
from kraftlog.broker._server import BrokerServer

__all__ = [
    "BrokerServer",
    "ControllerChannel",
]
