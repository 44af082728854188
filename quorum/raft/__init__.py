"""The narrow seam between kraftlog and pysyncobj: :class:`MetadataQuorum`.

Nothing else in kraftlog imports pysyncobj. The active-controller logic proposes batches of metadata
records; every controller receives committed entries, in order, on its asyncio loop; leadership
changes arrive the same way. See docs/architecture.md §1.

The replicated state machine
----------------------------
One replicated command (proposed by ``_RaftNode._kl_append(epoch, timestamp_ms, records)``, applied
by ``_RaftNode._kl_apply``) appends one batch of records atomically. Offsets are dense from 0 and
assigned *at apply time*, in Raft log order, so every controller assigns the same offsets. The
proposer's epoch and timestamp travel as arguments; apply reads no clock, draws no random number
and does no I/O: it validates, assigns offsets, keeps the entries in memory and hands them to the
delivery queue. Apply never raises (pysyncobj retries a raising entry on every tick, forever, which
stalls the node): every failure is a returned value.

Epoch fencing (what KRaft does): the Raft term is the controller epoch, and an entry carries the term
of the leader that appended it. A batch is accepted only if the epoch its proposer claimed equals
that term. So a decision made by the active controller of epoch 5 can never be committed in epoch 6,
not even when pysyncobj forwards a command queued on a leader that was deposed meanwhile, or when the
same node is re-elected in a later term: the batch is rejected (``NotControllerError``) on every node
alike and consumes no offset. ``propose`` refuses up front when this node is not the ready leader of
``epoch``.

Delivery and ordering rules
---------------------------
* ``on_committed(entries)`` runs on the event loop, entries strictly increasing and dense; each offset
  at most once per process (``delivered_offset`` tracks the last one, and entries at or below
  ``last_durable_offset`` given at construction are never delivered). pysyncobj replays its journal
  on every restart, so the consumer still writes idempotently by offset (skip what it has).
* The consumer acknowledges entries by returning from ``on_committed``: only then may pysyncobj drop
  them from its journal at compaction. Until then they stay in memory and in the full dump, and are
  delivered again after a restart. If ``on_committed`` raises, delivery stops (a hole would be worse),
  the node refuses to propose and asks pysyncobj to transfer leadership; a restart delivers again.
* When a snapshot installed from the leader starts after ``delivered_offset`` (this node was behind
  the leader's compacted journal by more than ``snapshot_retain_entries``), ``on_gap(first_missing,
  first_available)`` (a coroutine function) is awaited on the loop and must fetch the missing entries
  from another controller; delivery waits for it and nothing else blocks meanwhile. A fill that
  fails is retried with back-off; without ``on_gap`` delivery stops and ``status().delivery_error``
  says why.
* ``on_leader_change(leader_id, epoch)`` runs on the loop after the committed entries applied before
  the change. pysyncobj's thread observes leader and term on every tick (after apply) rather than
  through ``onStateChanged``, which fires mid-transition and misses changes that are not state
  changes (a follower learning a new leader, a new term without a leader). This node reports
  *itself* as leader only once it has applied every entry of earlier epochs (KRaft notifies its
  listener only after it caught up to the epoch start), so the active controller never decides on
  a stale image. ``propose`` returns after ``on_committed`` has
  received the proposed entries on this node.

Check-quorum (KRaft's rule) and stepping down
---------------------------------------------
``is_leader`` is evaluated on the loop against time, not only against the last view: the leader
must have heard from a majority of voters (itself included) within ``fetch_timeout_ms``
(``controller.quorum.fetch.timeout.ms``), and pysyncobj's thread must have refreshed the view within
that time too. So a leader whose fsync hangs or whose peers went silent stops acting as active at
once (``propose`` refuses with NOT_CONTROLLER), even while its Raft thread is stuck; the thread
itself steps down to follower on its next tick (pysyncobj's ``leaderFallbackTimeout``, the
election timeout, and the same check here). A node whose delivery stopped (``delivery_error``)
asks for a leadership transfer, retried with back-off while it leads, and after
``fetch_timeout_ms`` of failed transfers steps down and stops campaigning, so that a healthy
voter is elected; it never campaigns again until restarted.

Hardening of pysyncobj 0.3.17 (measured weaknesses)
---------------------------------------------------
* journal *and* full dump are set; the journal is `quorum.raft._journal.RaftJournal` (fsync, CRC, conflict-
  only truncation), installed through pysyncobj's ``createJournal`` hook only while this module
  constructs its node (a lock serialises constructions; other paths go to pysyncobj's factory);
* the dump uses `quorum.raft._serializer.DumpSerializer`: no fork, fsync before the rename, directory
  fsync before the journal drops the prefix it replaces;
* ``appendEntriesUseBatch=False`` (about 1 ms commits instead of 100 ms);
* ``leaderFallbackTimeout`` = the election timeout (its 30 s default left an isolated leader acting
  as leader for 30 s); ``raftMinTimeout``/``raftMaxTimeout`` = 1x/1.5x the election timeout,
  ``appendEntriesPeriod`` a twentieth of it (a new leader whose first append is refused retries
  only at the next period); ``connectionRetryTime`` half of it;
* a keepalive between every pair of voters (see ``_RaftNode._kl_keepalive``): pysyncobj drops the
  first message on a connection idle for ``connectionTimeout``, which was the vote request after a
  leader died -- a split vote and an extra election round in most failovers;
* two changes to pysyncobj's message handling (``_RaftNode._SyncObj__onMessageReceived``): the
  leader's ``nextIndex`` never moves back on a successful acknowledgement (pysyncobj re-sent every
  entry ~15 times under load), and a voter that refuses a candidate whose log is behind its own
  campaigns at once instead of waiting for its own timer (up to 1.5x the election timeout), and a
  candidate that gets a vote request from a rival of its own term (a split vote) re-campaigns after
  2-8 heartbeat periods instead of a whole election timeout (3 of 20 failovers took 2.5 s before);
* ``dynamicMembershipChange=True`` for kraftlog's own voter changes only (`quorum.raft._membership`:
  msgpack, carrying id, endpoint, directory id and public key; in force on append, reverted on
  truncation, the committed set kept in the dump; pysyncobj's pickled membership commands are never
  decoded); ``commandsWaitLeader=False`` (fail fast without a leader); the upgrade of a static
  quorum to kraft.version 1 is one more such entry (`KRaftUpgrade`: the same voters with their
  directory ids, which each voter reports to its peers with every keepalive round,
  ``kl_voter_report``); a controller's quorum (``voter_records``) also appends each committed
  change's ``VotersRecord`` (and ``KRaftVersionRecord``) to the metadata log, made from the entry
  alone so every node writes the same;
* every proposal has its own timeout: pysyncobj silently drops commands sent to a dead leader.

No pickle on the Raft port (issue 11)
-------------------------------------
pysyncobj's own transport pickles every message, and ``@replicated`` pickles every command into
the log; anyone holding the password ran code on every controller, and a peer was whoever it said
it was. Here:

* the transport is `quorum.raft._transport.RaftTransport` (connections in `quorum.raft._raft_connection`;
  frames, handshake and message shapes in `quorum.raft._wire`): msgpack frames with a hard size limit,
  a first exchange that binds protocol version, cluster id and voter id and authenticates both
  sides with the password (HMAC over fresh nonces; the password never travels), authenticated
  encryption per frame, an idle timeout, a cap on unauthenticated connections, a real backlog, and
  a listening socket on this node's own voter host;
* a metadata batch is the msgpack command of `quorum.raft._wire.encode_append_command`, proposed with
  ``_RaftNode._kl_append`` and applied by ``_RaftNode._SyncObj__doApplyCommand`` (which replaces
  pysyncobj's pickle-loading one): a committed entry of any other shape is refused, on every node
  alike, and consumes no offset. Membership and code-version commands (pickles) are never applied;
* ``appendEntriesBatchSizeBytes`` is one more than the largest command, so pysyncobj never takes
  its chunked ``transmission`` path (which unpickles); snapshots travel as ``serialized`` chunks
  of our msgpack dump file through the same frames;
* each controller authenticates as itself (issue 26, `quorum.raft._identity`): ``identity`` (a
  `NodeIdentity`: this node's Ed25519 key and every voter's public key, from
  ``controller.quorum.raft.authentication=node-key``, the default) selects the version-2 handshake,
  whose signatures bind a connection to one voter id, so a node's secret lets no one pose as another
  voter. Without it the shared ``password`` is required (the explicit ``password`` mode: anyone who
  has it can pose as any voter). ``allow_unauthenticated=True`` (tests, never production) runs with
  an empty password.

Pre-vote and leader stickiness (issue 26, KIP-996)
--------------------------------------------------
A node whose election timer fires does not increment the term: it asks every voter first
(``kl_pre_vote``) and runs pysyncobj's election only with a majority of grants. A voter grants only
a candidate whose log is at least as up to date as its own while it has not heard from a live
leader, and ignores real vote requests while it does (except on a leadership transfer the leader
asked for). A leader told by a voter that the voter's term is ahead (a lost race after a won
pre-vote) steps down to it, as Raft's leader does on a higher term in a response. The rules and why
are in `quorum.raft._prevote`; `_RaftNode` runs them. So a node that cannot win -- behind, or cut
off and back while a leader lives -- changes no epoch.
"""

from __future__ import annotations

from kraftlog.quorum.raft._identity import (
    AUTH_MODES,
    DEFAULT_KEY_FILE,
    IdentityError,
    NodeIdentity,
    generate_identity_key,
    identity_from_config,
    key_file_of,
    load_private_key,
    parse_voter_keys,
    public_key_text,
)
from kraftlog.quorum.raft._journal import RaftJournal
from kraftlog.quorum.raft._membership import (
    VOTER_ADD,
    VOTER_REMOVE,
    VOTER_UPDATE,
    VOTERS_FILE,
    KRaftUpgrade,
    RaftVoter,
    VoterChange,
    VoterChangeError,
    kraft_version_of,
    read_voters_file,
    upgraded_voter_set,
    write_voters_file,
)
from kraftlog.quorum.raft._raft_node import (
    _RaftNode,
    build_syncobj_conf,
)
from kraftlog.quorum.raft._raft_quorum import (
    MetadataQuorum,
)
from kraftlog.quorum.raft._raft_state import (
    APPLY_INTERNAL,
    APPLY_INVALID,
    APPLY_OK,
    APPLY_STALE_EPOCH,
    APPLY_VOTERS,
    DUMP_FILE,
    JOURNAL_FILE,
    MAX_PROPOSAL_BYTES,
    CommittedEntriesConsumer,
    LeaderChangeListener,
    MetadataStateMachine,
    QuorumConfigError,
    QuorumStatus,
    RawEntry,
    VoterStatus,
)
from kraftlog.quorum.raft._raft_tls import RaftTls
from kraftlog.quorum.raft._serializer import FullDump, encode_dump

__all__ = [
    "AUTH_MODES",
    "APPLY_INTERNAL",
    "APPLY_INVALID",
    "APPLY_OK",
    "APPLY_STALE_EPOCH",
    "APPLY_VOTERS",
    "CommittedEntriesConsumer",
    "DEFAULT_KEY_FILE",
    "DUMP_FILE",
    "FullDump",
    "IdentityError",
    "JOURNAL_FILE",
    "KRaftUpgrade",
    "LeaderChangeListener",
    "MAX_PROPOSAL_BYTES",
    "MetadataQuorum",
    "MetadataStateMachine",
    "NodeIdentity",
    "RaftTls",
    "QuorumConfigError",
    "QuorumStatus",
    "RaftJournal",
    "RaftVoter",
    "RawEntry",
    "VOTER_ADD",
    "VOTER_REMOVE",
    "VOTER_UPDATE",
    "VOTERS_FILE",
    "VoterChange",
    "VoterChangeError",
    "VoterStatus",
    "_RaftNode",
    "build_syncobj_conf",
    "encode_dump",
    "generate_identity_key",
    "identity_from_config",
    "key_file_of",
    "kraft_version_of",
    "load_private_key",
    "parse_voter_keys",
    "public_key_text",
    "read_voters_file",
    "upgraded_voter_set",
    "write_voters_file",
]
