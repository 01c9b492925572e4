"""A process that appends rounds of keyed records to one partition's ledger and compacts
it after each, until it is killed: the crash-safety test kills it with SIGKILL at varied
moments and reopens what it left. It prints ``acked N`` once round N is durable.
"""
import asyncio
import sys

from tests.unit.test_compaction import ROLL_EVERY_BATCH, compact, produce_round
from tests.unit.test_managed_ledger import Partition


async def main(directory: str, first_round: int) -> None:
    ledger = await Partition(directory).open(rollover=ROLL_EVERY_BATCH)
    round_ = first_round
    while True:
        await produce_round(ledger, round_)
        print(f"acked {round_}", flush=True)
        round_ += 1
        await compact(ledger)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
