"""Client quotas on the broker (KIP-13, KIP-124, KIP-599): windowed rates, the quota managers that
resolve each client's quota from the metadata image and compute throttle times, and their
Prometheus gauges. The Kafka listener and the gRPC servicers both enforce through `QuotaManagers`;
the active controller applies `ControllerMutationQuotaManager` (the node wires it in).
"""

from kraftlog.broker.quota._grpc_quota import (
    CLIENT_ID_METADATA,
    throttle_grpc_fetch,
    throttle_grpc_produce,
)
from kraftlog.broker.quota._quota_manager import (
    ClientQuotaManager,
    ControllerMutationQuotaManager,
    QuotaManagers,
    QuotaSample,
    RequestMutationQuota,
    quota_user,
)
from kraftlog.broker.quota._quota_metrics import QuotaCollector
from kraftlog.broker.quota._rate import SampledRate, TokenBucket, throttle_time_ms

__all__ = [
    "CLIENT_ID_METADATA",
    "throttle_grpc_fetch",
    "throttle_grpc_produce",
    "ClientQuotaManager",
    "ControllerMutationQuotaManager",
    "QuotaCollector",
    "QuotaManagers",
    "QuotaSample",
    "RequestMutationQuota",
    "SampledRate",
    "TokenBucket",
    "quota_user",
    "throttle_time_ms",
]
