"""The upgrade of a static controller quorum to ``kraft.version`` 1 (KIP-853, KIP-1170; Kafka
4.1's ``KafkaRaftClient.upgradeKRaftVersion``), on the active controller.

A static quorum's voters are ids and endpoints from ``controller.quorum.voters``; a dynamic one's
are ``(id, directory id)`` and live in the Raft log. The upgrade is one Raft entry
(`quorum.raft.KRaftUpgrade`) that gives every voter of the unchanged set the directory id it
reported (each voter reports its metadata log dir id and the highest kraft.version it runs to its
peers with every keepalive round: Kafka's voters send UpdateRaftVoter to the leader for this).

Rules, in order (Kafka's ``LeaderState.maybeAppendUpgradedKRaftVersion``):

1. the feature checks of `quorum.controller.update_features` pass (an upgrade, in a request of its
   own, ``ctx.kraft_upgrade_problem`` None -- computed here by `kraft_upgrade_problem`);
2. this node is the leader (NOT_CONTROLLER with the hint);
3. no voter change is pending (one at a time; REQUEST_TIMED_OUT, retriable);
4. every voter reported a directory id and supports kraft.version 1 (INVALID_UPDATE_VERSION).

Once the entry is committed the quorum is dynamic on every controller (`ControllerServer.kraft_version`
reads the committed voter set): AddRaftVoter and RemoveRaftVoter are allowed, the voters admit
observers, and a restarted controller keeps running dynamic from the voter set its Raft dir kept
(``controller.quorum.voters`` in its config no longer says who votes).
"""

from __future__ import annotations

from typing import Any, Final

from kraftlog.common import errors as kerr
from kraftlog.metadata_log import KRAFT_VERSION
from kraftlog.proto import admin_pb2, errors_pb2
from kraftlog.quorum.raft import KRaftUpgrade, VoterChangeError, upgraded_voter_set

__all__ = ["kraft_upgrade_problem", "upgrade_kraft_version"]

_DEFAULT_TIMEOUT_S: Final = 30.0


def kraft_upgrade_problem(quorum: Any) -> str | None:
    """Why ``quorum`` (a `quorum.raft.MetadataQuorum`) cannot move to kraft.version 1 now, or None."""
    if quorum is None or not hasattr(quorum, "voter_reports"):
        return "this controller has no Raft quorum to upgrade"
    try:
        upgraded_voter_set(quorum.voters(), quorum.voter_reports())
    except VoterChangeError as err:
        return str(err)
    return None


def _requested_level(request: admin_pb2.UpdateFeaturesRequest) -> int | None:
    for update in request.updates:
        if update.feature == KRAFT_VERSION:
            return int(update.max_version_level)
    return None


async def upgrade_kraft_version(
    server: Any, request: admin_pb2.UpdateFeaturesRequest, checked: admin_pb2.UpdateFeaturesResponse
) -> admin_pb2.UpdateFeaturesResponse:
    """After ``checked`` (the feature checks' answer) said NONE: append the upgrade when the request
    raises kraft.version and is not ``validate_only``; the answer carries Kafka's error otherwise."""
    level = _requested_level(request)
    if checked.error.code != 0 or request.validate_only or level is None or level <= server.kraft_version:
        return checked
    R = admin_pb2.UpdateFeaturesResponse
    quorum = server.quorum
    try:
        if quorum is None or not quorum.is_leader:
            raise kerr.NotControllerError("this controller is not the active controller")
        _commit_index, pending, _observers = quorum.voter_change_view()
        if pending is not None:
            raise kerr.RequestTimedOutError(f"a voter change at raft index {pending} is not committed yet; retry")
        try:
            voters = upgraded_voter_set(quorum.voters(), quorum.voter_reports())
        except VoterChangeError as err:
            raise kerr.InvalidUpdateVersionError(f"Invalid upgrade of {KRAFT_VERSION} to {level}: {err}") from None
        timeout_s = request.timeout_ms / 1000.0 if request.timeout_ms > 0 else _DEFAULT_TIMEOUT_S
        await quorum.change_voters(KRaftUpgrade(voters), timeout_s=timeout_s)
    except kerr.KafkaError as err:
        error = errors_pb2.Error(code=err.error_code, name=err.error_name, message=str(err))
        return R(error=error, results=[R.Result(feature=u.feature, error=error) for u in request.updates])
    return checked
