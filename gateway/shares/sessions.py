"""Share sessions (KIP-932): which partitions a member's ShareFetch requests cover, and their epochs.

A session is keyed by group and member. Epoch 0 opens one (replacing the member's
previous one) with the request's partitions; each later request names the session's
next epoch and may add partitions or forget some; epoch -1 closes it. A wrong epoch is
INVALID_SHARE_SESSION_EPOCH, a session that is not there SHARE_SESSION_NOT_FOUND, and a
full cache SHARE_SESSION_LIMIT_REACHED, as Kafka answers. ShareAcknowledge cannot open
a session (epoch 0 is INVALID_SHARE_SESSION_EPOCH there).
"""
from collections.abc import Iterable
from dataclasses import dataclass, field

from kgate.protocol.error_codes import ErrorCode
from kgate.protocol.errors import KafkaError

INITIAL_EPOCH = 0
FINAL_EPOCH = -1
SessionPartition = tuple[object, int]  # (topic id, partition)


@dataclass(slots=True)
class ShareSession:
    epoch: int = 1  # the epoch the next request must carry
    partitions: list[SessionPartition] = field(default_factory=list)


class ShareSessionCache:
    def __init__(self, max_sessions: int):
        self.max_sessions = max_sessions
        self.sessions: dict[tuple[str, str], ShareSession] = {}

    def open_or_advance(self, group_id: str, member_id: str, epoch: int, added: Iterable[SessionPartition],
                        forgotten: Iterable[SessionPartition], fetching: bool) -> tuple[ShareSession, bool]:
        """The session a request runs in and whether it closes with it; KafkaError for a refusal,
        with nothing changed."""
        key = (group_id, member_id)
        if epoch == INITIAL_EPOCH:
            if not fetching:
                raise KafkaError(ErrorCode.INVALID_SHARE_SESSION_EPOCH, "a share session opens with ShareFetch")
            if key not in self.sessions and len(self.sessions) >= self.max_sessions:
                raise KafkaError(ErrorCode.SHARE_SESSION_LIMIT_REACHED)
            session = self.sessions[key] = ShareSession(partitions=_merged([], added, forgotten))
            return session, False
        found = self.sessions.get(key)
        if found is None:
            raise KafkaError(ErrorCode.SHARE_SESSION_NOT_FOUND, f"no share session for member {member_id}")
        session = found
        if epoch == FINAL_EPOCH:
            del self.sessions[key]
            return session, True
        if epoch != session.epoch:
            raise KafkaError(ErrorCode.INVALID_SHARE_SESSION_EPOCH,
                             f"share session epoch {epoch}, expected {session.epoch}")
        session.epoch = session.epoch + 1 if session.epoch < 2**31 - 1 else 1
        session.partitions = _merged(session.partitions, added, forgotten)
        return session, False

    def drop_member(self, group_id: str, member_id: str) -> bool:
        return self.sessions.pop((group_id, member_id), None) is not None


def _merged(partitions: list[SessionPartition], added: Iterable[SessionPartition],
            forgotten: Iterable[SessionPartition]) -> list[SessionPartition]:
    gone = set(forgotten)
    merged = [tp for tp in partitions if tp not in gone]
    merged += [tp for tp in added if tp not in merged and tp not in gone]
    return merged
