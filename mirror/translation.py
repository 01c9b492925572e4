"""Consumer-group offsets from one cluster to the other, in both directions, never skipping.

An offset sync (u, d) says: source record u is target record d. A group's committed
offset U is the next record it wants, so it has consumed everything below U.

Forward (the group read the source; where does it resume on the target?): take the
newest sync with u <= U. The group has read u, so it resumes at d when U == u and
d + 1 otherwise (MirrorMaker 2's rule: records between u + 1 and U - 1 are read again,
so duplicates are bounded by the sync interval; none is skipped, because the source
may hold records that were never copied, and a guess past d could jump over copies).

Reverse (the group read the copies on the target; where does it resume on the
source?), the mapping MirrorMaker 2 lacks: take the newest sync with d <= U. A
prefix-named copy holds nothing but copies, in order, so the records between d and U
correspond one to one to source records after u, give or take source records that
were never copied (which only make the source offset larger): resume at
U + (u - d), the delta, exactly. An identity-named copy may interleave the target's
own records, so there the reverse rule is the forward one mirrored: u, or u + 1 once
the group is past d.

When no sync lies at or below the group's offset, the group has not read the first
copied record, and resumes at the first sync's other side.

The dense delta holds because a worker writes a sync at the first acknowledgement after
it starts or re-starts a partition: copies made twice (at least once) always begin
after a sync that says where they begin.
"""
import bisect
from dataclasses import dataclass


@dataclass(frozen=True)
class Sync:
    upstream: int
    downstream: int


class SyncHistory:
    """The offset syncs of one source partition, in the order they were written."""

    def __init__(self, syncs: list[Sync]):
        # Two orders: a partition re-copied after a failure has syncs whose upstream runs
        # back while the downstream runs on, so "newest at or below" depends on the side.
        self.by_upstream = sorted(set(syncs), key=lambda s: (s.upstream, s.downstream))
        self.by_downstream = sorted(set(syncs), key=lambda s: (s.downstream, s.upstream))
        self._upstreams = [s.upstream for s in self.by_upstream]
        self._downstreams = [s.downstream for s in self.by_downstream]

    def __bool__(self) -> bool:
        return bool(self.by_upstream)

    def forward(self, offset: int) -> int | None:
        """The target offset a group at source ``offset`` resumes from (None: no syncs)."""
        if not self:
            return None
        at = bisect.bisect_right(self._upstreams, offset) - 1
        if at < 0:
            return min(s.downstream for s in self.by_upstream if s.upstream == self._upstreams[0])
        sync = self.by_upstream[at]
        return sync.downstream if offset == sync.upstream else sync.downstream + 1

    def reverse(self, offset: int, dense: bool) -> int | None:
        """The source offset a group at target ``offset`` resumes from (None: no syncs).
        ``dense``: the target topic holds only copies (prefix naming), so the delta is exact."""
        if not self:
            return None
        at = bisect.bisect_right(self._downstreams, offset) - 1
        if at < 0:
            return min(s.upstream for s in self.by_upstream)
        sync = self.by_downstream[at]
        if dense:
            return offset + (sync.upstream - sync.downstream)
        return sync.upstream if offset == sync.downstream else sync.upstream + 1
