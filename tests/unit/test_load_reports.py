"""What the balancer reads of the brokers' load reports: a partition's load as its owner
reports it, and whether every broker has reported since the last moves."""
from kgate.gateway.balancer import partition_loads, reported_since
from kgate.metadata.load_reports import LoadReport


def test_a_report_reads_back_as_written():
    report = LoadReport(3, 1_000, {("t", 0): (10.0, 20.5), ("u", 2): (0.0, 1.0)})
    assert LoadReport.decode(3, report.encode()) == report
    assert (report.bytes_in, report.bytes_out) == (10.0, 21.5)


def test_a_partition_counts_as_its_owner_reports_it_else_as_its_previous_owner_last_did():
    reports = {0: LoadReport(0, 2_000, {("t", 0): (100.0, 50.0), ("t", 1): (30.0, 0.0)}),
               1: LoadReport(1, 1_000, {("t", 0): (400.0, 0.0), ("t", 2): (5.0, 5.0)})}
    owners = {("t", 0): 1, ("t", 1): 1, ("t", 2): 1}
    # t-0: its owner's report wins over the fresher one of the broker it left; t-1 just moved
    # to broker 1, which has not reported it yet: broker 0's figure stands meanwhile.
    assert partition_loads(reports, owners) == {("t", 0): 400.0, ("t", 1): 30.0, ("t", 2): 10.0}


def test_the_balancer_waits_for_every_live_broker_to_report_after_the_last_moves():
    reports = {0: LoadReport(0, 5_000), 1: LoadReport(1, 3_000)}
    assert reported_since(reports, [0, 1], 2_999)
    assert not reported_since(reports, [0, 1], 3_000)
    assert not reported_since(reports, [0, 1, 2], 0)  # broker 2 has not reported at all
