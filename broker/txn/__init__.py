"""The transaction coordinator: transactional ids as pure shards of ``__transaction_state`` on the
coordinator runtime, their records, marker writing, producer-id blocks from the controller, and
the transaction service both front ends call.
"""

from kraftlog.broker.txn._producer_ids import ProducerIdManager, allocate_from_controller, init_producer_id
from kraftlog.broker.txn._txn_coordinator import TXN_TOPIC, TxnCoordinator
from kraftlog.broker.txn._txn_offsets_verification import txn_offsets_refused, verify_txn_offsets
from kraftlog.broker.txn._txn_records import TxnState
from kraftlog.broker.txn._txn_service import TxnService
from kraftlog.broker.txn._txn_verify_client import TxnVerifyClient

__all__: list[str] = [
    "ProducerIdManager",
    "TXN_TOPIC",
    "TxnCoordinator",
    "TxnService",
    "TxnState",
    "TxnVerifyClient",
    "allocate_from_controller",
    "init_producer_id",
    "txn_offsets_refused",
    "verify_txn_offsets",
]
