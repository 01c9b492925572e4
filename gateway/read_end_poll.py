"""What an owner remembers of a peer's standing KgateReadEnd poll on one connection
(gateway/handlers/read_end.py, version 1): the poll's epoch, and per partition what it last
answered, so a continued poll names no partition and is answered only with those that moved."""
from dataclasses import dataclass, field


@dataclass(slots=True)
class StandingPoll:
    epoch: int = 1
    answered: dict[tuple[str, int], tuple[int, int]] = field(default_factory=dict)  # (high watermark, log start)
