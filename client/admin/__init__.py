"""Admin clients: `Admin` against the controllers, `GroupAdmin`, `ShareGroupAdmin` and
`TransactionAdmin` against the brokers' coordinators.
"""

from kraftlog.client.admin._admin import Admin, NewTopic, parse_bootstrap_servers, raise_for_errors
from kraftlog.client.admin._group_admin import GroupAdmin
from kraftlog.client.admin._records_admin import DeletedRecords, RecordsAdmin
from kraftlog.client.admin._share_group_admin import ShareGroupAdmin, ShareGroupDescription, ShareMemberDescription
from kraftlog.client.admin._transaction_admin import ProducerState, TransactionAdmin

__all__: list[str] = [
    "Admin",
    "DeletedRecords",
    "GroupAdmin",
    "NewTopic",
    "ProducerState",
    "RecordsAdmin",
    "ShareGroupAdmin",
    "ShareGroupDescription",
    "ShareMemberDescription",
    "TransactionAdmin",
    "parse_bootstrap_servers",
    "raise_for_errors",
]
