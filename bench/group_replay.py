"""How long the group coordinator takes to replay ``__consumer_offsets`` on start.

After a failover, groups wait for their coordinator to load its partitions (KoP's
users report slow coordinator loading as a chief pain), so the figure that matters
is the replay time of a log full of commits. The run fills the log with
``--records`` simple offset commits (with compaction held off), then restarts the
broker ``--runs`` times and reports the coordinator's replay time and the whole
process start-to-ready time, beside the start time of a broker whose offsets topic
is empty, measured in the same run. Finally it lets compaction run and measures the
replay of the compacted log.

Run from the repository root:  .venv/bin/python -m bench.group_replay --help
"""
import argparse
import json
import re
import shutil
import socket
import statistics
import struct
import tempfile
import time
from pathlib import Path

from kafka.protocol.api_key import ApiKey

from kgate.protocol.messages import REQUESTS, RESPONSES
from tests.support.broker_process import BrokerProcess
from tests.support.clients import create_topic

DEFAULT_OUTPUT = Path(__file__).resolve().parent / "results" / "group_replay.json"
PARTITIONS = 100
COMMIT_VERSION = 2
PIPELINE = 200
_LOADED = re.compile(r"__consumer_offsets-\d+ loaded: (\d+) records replayed in ([0-9.]+) s")


def _commit_frames(topic: str, requests: int, groups: int):
    """OffsetCommit v2 "simple" commits (generation -1), one topic x PARTITIONS per request."""
    Request = REQUESTS[ApiKey.OffsetCommit]
    Topic = Request.OffsetCommitRequestTopic
    Partition = Topic.OffsetCommitRequestPartition
    for i in range(requests):
        request = Request(group_id=f"replay-{i % groups}", generation_id_or_member_epoch=-1, member_id="",
                          retention_time_ms=-1, topics=[Topic(name=topic, partitions=[
                              Partition(partition_index=p, committed_offset=i, committed_metadata=f"m{i}")
                              for p in range(PARTITIONS)])])
        request.with_header(correlation_id=i, client_id="bench")
        yield bytes(request.encode(version=COMMIT_VERSION, header=True, framed=True))


def _read_frame(sock: socket.socket) -> bytes:
    def exactly(size):
        data = bytearray()
        while len(data) < size:
            chunk = sock.recv(size - len(data))
            if not chunk:
                raise ConnectionError("broker closed the connection")
            data += chunk
        return bytes(data)
    return exactly(struct.unpack(">i", exactly(4))[0])


def fill(bootstrap_port: int, topic: str, records: int, groups: int) -> float:
    """Send the commits pipelined, ``PIPELINE`` in flight; check every answer; return seconds."""
    requests = records // PARTITIONS
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", bootstrap_port), timeout=60) as sock:
        frames = _commit_frames(topic, requests, groups)
        sent = received = 0
        while received < requests:
            batch = [frame for _, frame in zip(range(min(PIPELINE, requests - sent)), frames)]
            sock.sendall(b"".join(batch))
            sent += len(batch)
            for _ in batch:
                body = _read_frame(sock)
                response = RESPONSES[ApiKey.OffsetCommit].decode(body[4:], version=COMMIT_VERSION, header=False)
                errors = {p.error_code for t in response.topics for p in t.partitions}
                if errors != {0}:
                    raise RuntimeError(f"commit refused with error codes {errors}")
                received += 1
    return time.monotonic() - started


def timed_start(broker: BrokerProcess) -> tuple[float, int, float]:
    """(seconds from spawn to ready, records replayed, coordinator replay seconds summed over
    the offsets partitions, which load one after another)."""
    logged = Path(broker.log_path).stat().st_size if Path(broker.log_path).exists() else 0
    started = time.monotonic()
    broker.start(timeout=600)
    ready = time.monotonic() - started
    with open(broker.log_path) as log:
        log.seek(logged)
        matches = _LOADED.findall(log.read())
    broker.stop()
    return ready, sum(int(records) for records, _ in matches), sum(float(seconds) for _, seconds in matches)


def _summary(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="offset-commit records to replay")
    parser.add_argument("--groups", type=int, default=1000, help="groups the commits spread over")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="kgate-bench-replay-")
    try:
        held_off = {"kgate.offsets.compaction.min.records": 10 * args.records}
        empty = BrokerProcess(f"{workdir}/empty", held_off)
        baseline = [timed_start(empty) for _ in range(args.runs)]

        broker = BrokerProcess(f"{workdir}/full", held_off).start()
        create_topic(broker.bootstrap, "replayed", PARTITIONS)
        fill_seconds = fill(broker.port, "replayed", args.records, args.groups)
        broker.stop()
        full = [timed_start(broker) for _ in range(args.runs)]

        # Default compaction threshold: the next commit compacts every partition it lands in;
        # commit once per group so every offsets partition is compacted.
        broker.settings = {}
        broker.start(timeout=600)
        fill(broker.port, "replayed", args.groups * PARTITIONS, args.groups)
        broker.stop()
        compacted = [timed_start(broker) for _ in range(args.runs)]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    figures = {
        "records": args.records, "groups": args.groups, "fill_seconds": fill_seconds,
        "fill_records_per_s": args.records / fill_seconds,
        "empty_start_s": _summary([r[0] for r in baseline]),
        "full_start_s": _summary([r[0] for r in full]),
        "full_replay_s": _summary([r[2] for r in full]),
        "full_replayed_records": full[-1][1],
        "compacted_start_s": _summary([r[0] for r in compacted]),
        "compacted_replay_s": _summary([r[2] for r in compacted]),
        "compacted_replayed_records": compacted[-1][1],
    }
    print(f"filled {args.records:,} commit records over {args.groups} groups in {fill_seconds:.1f} s "
          f"({figures['fill_records_per_s']:,.0f} records/s)")
    print(f"{'figure':40} {'median':>9} {'min':>9} {'max':>9}")
    for label, key in [("start, empty offsets topic (s)", "empty_start_s"),
                       (f"start, {full[-1][1]:,} records (s)", "full_start_s"),
                       ("  of which coordinator replay (s)", "full_replay_s"),
                       (f"start after compaction, {compacted[-1][1]:,} records (s)", "compacted_start_s"),
                       ("  of which coordinator replay (s)", "compacted_replay_s")]:
        s = figures[key]
        print(f"{label:40} {s['median']:9.2f} {s['min']:9.2f} {s['max']:9.2f}")
    replay = figures["full_replay_s"]["median"]
    print(f"replay rate: {full[-1][1] / replay:,.0f} records/s; start-time ratio full/empty: "
          f"{figures['full_start_s']['median'] / figures['empty_start_s']['median']:.1f}x")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
