"""What the group machine hands back to its driver: replies, and effects to carry out.

The machine never waits, sleeps or writes; each of its steps says what must happen
next as plain values, in the order it must happen: park this request, answer that
parked one, arm or cancel a timer, append the group's record, log a line. The
driver (the coordinator) owns the futures, the event loop's timers and the log.
"""
import enum
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from kgate.protocol.error_codes import ErrorCode

from .records import GroupMetadataValue

R = TypeVar("R")


@dataclass(slots=True)
class JoinResult:
    error: ErrorCode
    member_id: str = ""
    generation: int = -1
    protocol_type: str | None = None
    protocol: str | None = None
    leader_id: str = ""
    members: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    skip_assignment: bool = False


class Wait(enum.Enum):
    """The two requests that can wait for a rebalance; a member parks at most one of each."""
    JOIN = "join"
    SYNC = "sync"


class Timer(enum.Enum):
    SESSION = "session"  # a member's heartbeat deadline
    PENDING = "pending"  # a MEMBER_ID_REQUIRED id not used yet
    # The group's one rebalance deadline: the initial delay while it runs, else the rebalance timeout.
    REBALANCE = "rebalance"
    # After a generation forms: the members' deadline to send SyncGroup (the rebalance timeout).
    SYNC = "sync"
    # Consumer groups (KIP-848): a member's heartbeat deadline, and its deadline to give up
    # the partitions it must revoke.
    MEMBER_SESSION = "member-session"
    REVOCATION = "revocation"
    # A classic member of a consumer group (after an online upgrade): its deadline to rejoin
    # once told to, and to send SyncGroup once joined (both its rebalance timeout).
    CLASSIC_JOIN = "classic-join"
    CLASSIC_SYNC = "classic-sync"
    # Share groups (KIP-932): a member's heartbeat deadline.
    SHARE_SESSION = "share-session"
    # Streams groups (KIP-1071): a member's heartbeat deadline, and its deadline to give up tasks.
    STREAMS_SESSION = "streams-session"
    STREAMS_REVOCATION = "streams-revocation"


@dataclass(frozen=True, slots=True)
class TimerKey:
    group_id: str
    kind: Timer
    member_id: str = ""


@dataclass(frozen=True, slots=True)
class Park:
    """The request being handled waits; an Answer for the same member and kind releases it."""
    group_id: str
    member_id: str
    kind: Wait


@dataclass(frozen=True, slots=True)
class AnswerJoin:
    group_id: str
    member_id: str
    result: JoinResult


@dataclass(frozen=True, slots=True)
class AnswerSync:
    group_id: str
    member_id: str
    error: ErrorCode
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class ArmTimer:
    """Start the timer, replacing one armed under the same key; when it fires, hand the key back."""
    key: TimerKey
    deadline_ms: int


@dataclass(frozen=True, slots=True)
class CancelTimer:
    key: TimerKey


class AfterStore(enum.Enum):
    """What hangs on a group record being durable."""
    NOTHING = "nothing"  # a failure is only logged
    REPLY = "reply"  # the request's reply waits for it, and fails with it
    REPORT = "report"  # the outcome goes back to the machine (GroupMachine.assignment_stored)


@dataclass(frozen=True, slots=True)
class StoreGroup:
    """Append the group's record, taken when the step ran, to ``__consumer_offsets``."""
    group_id: str
    value: GroupMetadataValue
    then: AfterStore = AfterStore.NOTHING


@dataclass(frozen=True, slots=True)
class StoreConsumer:
    """Append these consumer-group records (key, value or None for a tombstone); the
    request that caused them is answered once they are durable."""
    group_id: str
    records: Sequence[tuple[bytes, bytes | None]]


@dataclass(frozen=True, slots=True)
class ShareMemberGone:
    """A share group member left or its session expired: what it holds of the group's records
    goes back to the others, and its share sessions end, once its removal is stored."""
    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class Log:
    level: int
    message: str
    args: tuple[object, ...] = ()


Effect = Park | AnswerJoin | AnswerSync | ArmTimer | CancelTimer | StoreGroup | StoreConsumer | ShareMemberGone | Log


@dataclass(slots=True)
class Step(Generic[R]):
    """A request's outcome: its reply now, or None when it parked (an Answer effect carries it)."""
    reply: R | None
    effects: list[Effect]
