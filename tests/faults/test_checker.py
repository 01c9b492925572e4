"""The checker on hand-made histories: each anomaly class found (and its smallest
counterexample printed), and clean histories, including awkward legal ones, passing."""
from tests.faults.checker import check
from tests.faults.history import FAIL, INFO, OK, READ_COMMITTED, Operation, Poll, Send, read, write
from tests.faults.run import Outcome

T = "t/0"


def send(process, at, value, offset, outcome=OK, partition=T):
    return Operation(process, "send", at, at + 0.5, outcome, sends=(Send(partition, value, offset),))


def poll(process, at, *reads, isolation="read_uncommitted"):
    """``reads``: (offset, value) in partition T, or (partition, offset, value)."""
    return Operation(process, "poll", at, at + 0.5, OK, polls=tuple(Poll(*((T,) * (3 - len(r)) + r)) for r in reads),
                     isolation=isolation)


def txn(process, at, outcome, sends=(), polls=()):
    return Operation(process, "txn", at, at + 0.5, outcome, sends=tuple(Send(*s) for s in sends),
                     polls=tuple(Poll(*p) for p in polls))


def found(history):
    report = check(history)
    return report.counts(), report


def test_a_clean_history_passes():
    history = [send("p", 1, "a", 0), send("p", 2, "b", 1), send("p", 3, "c", 2, outcome=INFO),
               poll("c", 4, (0, "a"), (1, "b")), poll("c", 5, (2, "c"))]
    counts, report = found(history)
    assert counts == {} and report.valid
    assert "no anomaly" in report.render()


def test_an_indeterminate_send_never_read_is_no_loss_and_a_failed_one_read_is_no_anomaly():
    history = [send("p", 1, "a", 0), send("p", 2, "b", None, outcome=INFO), send("p", 3, "x", None, outcome=FAIL),
               poll("c", 4, (0, "a"))]
    assert found(history)[0] == {}


def test_a_lost_write_names_the_send_and_the_read_past_it():
    history = [send("p", 1, "a", 0), send("p", 2, "b", 1), send("p", 3, "c", 2), poll("c", 4, (0, "a"), (2, "c"))]
    counts, report = found(history)
    assert counts == {"lost-write": 1, "poll-skip": 1}
    smallest = report.smallest("lost-write")
    assert "b acknowledged at t/0@1" in smallest.what and [op.index for op in smallest.operations] == [1, 3]
    assert "lost-write: b acknowledged" in report.render()


def test_an_acknowledged_write_no_one_reached_is_unseen():
    counts, report = found([send("p", 1, "a", 0), send("p", 2, "b", 1), poll("c", 3, (0, "a"))])
    assert counts == {"unseen": 1}
    assert "b acknowledged at t/0@1, never read" in report.smallest("unseen").what


def test_one_offset_with_two_values_is_inconsistent():
    counts, report = found([send("p", 1, "a", 0), send("q", 2, "b", 0), poll("c", 3, (0, "a"))])
    assert counts["inconsistent-offsets"] == 1
    assert "t/0@0 holds ['a', 'b']" in report.smallest("inconsistent-offsets").what


def test_a_value_at_two_offsets_is_a_duplicate():
    counts, report = found([send("p", 1, "a", 0), poll("c", 2, (0, "a"), (1, "a"))])
    assert counts == {"duplicate": 1}
    assert report.smallest("duplicate").what == "a stored at t/0@0, t/0@1"


def test_a_producer_whose_offsets_go_backwards_is_nonmonotonic():
    history = [send("p", 1, "a", 5), send("p", 2, "b", 3), poll("c", 3, (3, "b"), (4, "z"), (5, "a"))]
    counts, report = found(history)
    assert counts == {"nonmonotonic-send": 1}
    assert "offset 3 after offset 5" in report.smallest("nonmonotonic-send").what


def test_a_consumer_reading_backwards_is_nonmonotonic_unless_its_assignment_changed():
    history = [send("p", 1, "a", 0), send("p", 1.1, "b", 1), poll("c", 2, (0, "a"), (1, "b")), poll("c", 3, (0, "a"))]
    counts, report = found(history)
    assert counts == {"nonmonotonic-poll": 1}
    assert "read t/0@0 after t/0@1" in report.smallest("nonmonotonic-poll").what
    reassigned = history[:3] + [Operation("c", "assign", 2.8, 2.9, OK), poll("c", 3, (0, "a"))]
    assert found(reassigned)[0] == {}


def test_skipping_an_aborted_or_control_offset_is_no_skip():
    history = [txn("p", 1, OK, sends=[(T, "a", 0)]), txn("p", 2, FAIL, sends=[(T, "x", 2)]),
               txn("p", 3, OK, sends=[(T, "b", 4)]),
               poll("c", 4, (0, "a"), (4, "b"), isolation=READ_COMMITTED)]
    assert found(history)[0] == {}


def test_a_read_committed_consumer_reading_an_aborted_value_is_an_aborted_read():
    history = [txn("p", 1, FAIL, sends=[(T, "x", 0)]), txn("p", 2, OK, sends=[(T, "a", 2)]),
               poll("u", 3, (0, "x"), (2, "a")),
               poll("c", 3, (0, "x"), (2, "a"), isolation=READ_COMMITTED)]
    counts, report = found(history)
    assert counts == {"aborted-read": 1}
    assert report.smallest("aborted-read").operations[1].process == "c"


def test_a_write_write_cycle_is_g0():
    # T1 wrote before T2 in partition x, but after it in partition y.
    history = [txn("p", 1, OK, sends=[("x/0", "a1", 0), ("y/0", "a2", 1)]),
               txn("q", 1.2, OK, sends=[("x/0", "b1", 1), ("y/0", "b2", 0)]),
               poll("c", 3, ("x/0", 0, "a1"), ("x/0", 1, "b1")), poll("d", 3, ("y/0", 0, "b2"), ("y/0", 1, "a2"))]
    counts, report = found(history)
    assert counts == {"G0": 1}
    assert report.smallest("G0").what == "cycle #0 (ww) -> #1 (ww) -> #0"
    # Kafka's transactions take no locks: reported, yet no violation of what the protocol promises.
    assert report.valid and "1 G0 (allowed by Kafka's protocol)" in report.render()


def test_a_write_read_cycle_is_g1c_and_the_shortest_one_is_printed():
    # T1 read what T2 wrote and T2 read what T1 wrote; T3 and T4 add a longer cycle through T1.
    history = [txn("p", 1, OK, sends=[("x/0", "a", 0)], polls=[("y/0", 0, "b"), ("w/0", 0, "d")]),
               txn("q", 1.1, OK, sends=[("y/0", "b", 0)], polls=[("x/0", 0, "a")]),
               txn("r", 1.2, OK, sends=[("z/0", "c", 0)], polls=[("x/0", 0, "a")]),
               txn("s", 1.3, OK, sends=[("w/0", "d", 0)], polls=[("z/0", 0, "c")])]
    counts, report = found(history)
    assert counts == {"G1c": 1} and not report.valid
    assert report.smallest("G1c").what == "cycle #0 (wr) -> #1 (wr) -> #0"


def test_transactions_in_a_chain_are_no_cycle():
    history = [txn("p", 1, OK, sends=[("x/0", "a", 0)]),
               txn("q", 2, OK, sends=[("y/0", "b", 0)], polls=[("x/0", 0, "a")]),
               txn("r", 3, OK, sends=[("x/0", "c", 1)], polls=[("y/0", 0, "b")]),
               poll("c", 4, ("x/0", 0, "a"), ("x/0", 1, "c"), isolation=READ_COMMITTED)]
    assert found(history)[0] == {}


def test_histories_round_trip_through_json_lines_and_a_cut_last_line_is_ignored(tmp_path):
    history = [send("p", 1, "a", 0), txn("q", 2, FAIL, sends=[(T, "x", 1)], polls=[(T, 0, "a")])]
    path = tmp_path / "history.jsonl"
    with open(path, "w") as out:
        write(history, out)
        out.write('{"process": "cut')
    with open(path) as lines:
        assert list(read(lines)) == history


def test_a_counterexample_shows_only_the_records_it_is_about():
    reads = [(o, f"v{o}") for o in range(100)] + [(100, "v3")]
    rendered = check([poll("c", 1, *reads)]).render()
    assert "duplicate: v3 stored at t/0@3, t/0@100" in rendered
    assert "poll t/0@3 v3  poll t/0@100 v3  (+99 more)" in rendered and "v50" not in rendered


def test_a_request_a_broker_failed_inside_is_found_in_its_log(tmp_path):
    (tmp_path / "broker-2").mkdir()
    (tmp_path / "broker-2" / "broker.log").write_text(
        'ts=T1 level=info logger=kgate.gateway.broker msg="live brokers: [1, 2, 3]"\n'
        'ts=T2 level=error logger=kgate.gateway.connection msg="request api key 68 v1 failed; closing connection '
        'from 10.77.0.9:52740" exc="Traceback (most recent call last):\\n  File \'x.py\', line 1, in f\\n'
        'kgate.storage.ledger.LedgerFenced: ledger 8 was released"\n')
    (tmp_path / "broker-3").mkdir()
    (tmp_path / "broker-3" / "broker.log").write_text('ts=T3 level=warning logger=x msg="a warning, not a failure"\n')
    assert Outcome(21, [], check([]), str(tmp_path)).request_failures == [
        "broker-2: ts=T2 request api key 68 v1 failed; closing connection from 10.77.0.9:52740: "
        "kgate.storage.ledger.LedgerFenced: ledger 8 was released"]
