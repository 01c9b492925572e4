"""What a broker says at INFO when it starts, recovers and stops: one summary line per
change of ownership, never a line per partition (50 offsets partitions would bury
the ``kgate listening on`` line an operator looks for)."""
import re

OFFSETS_PARTITIONS = 50


def info_lines(broker) -> list[str]:
    with open(broker.log_path) as log:
        return [line for line in log if " level=info " in line]


def test_start_recovery_and_stop_log_summaries_not_partitions(broker_factory):
    broker = broker_factory()
    broker.kill()  # ledgers left open: the next start recovers every one of them
    broker.restart()
    broker.stop()
    lines = info_lines(broker)
    per_partition = [line for line in lines if re.search(r"__consumer_offsets-\d", line)]
    assert not per_partition, per_partition[:3]
    assert sum(f"took {OFFSETS_PARTITIONS} partitions" in line for line in lines) == 2, lines
    assert sum(f"sealed and handed over {OFFSETS_PARTITIONS} partitions" in line for line in lines) == 1, lines
    assert len(lines) < 15, lines
