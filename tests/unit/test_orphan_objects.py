"""Which objects count as orphans: held by live ledgers, needed by none as a recovery reads
them, and older than the safety age."""
from kgate.storage.stores.object_layout import ledger_prefix, wal_key
from kgate.storage.stores.orphan_objects import Holding, orphans

OLD = 7200.0


def wal(writer: str, seq: int) -> str:
    return wal_key(writer, seq)


def data(ledger_id: int, suffix: str) -> str:
    return f"{ledger_prefix(ledger_id)}data-{suffix}"


def test_a_wal_object_is_an_orphan_only_when_no_live_ledger_in_it_would_read_it():
    sealed = Holding(named={wal("1-1", 3)}, sealed=True)
    open_ = Holding(named={wal("1-1", 3)}, writer="1-1", covered=5)
    holdings = {1: sealed, 2: open_}
    ledgers_in = {
        wal("1-1", 3): frozenset({1}),  # named by its sealed piece
        wal("1-1", 4): frozenset({1}),  # past the seal: a fenced writer's late object
        wal("1-1", 5): frozenset({2}),  # covered by the open ledger's pieces, not named
        wal("1-1", 6): frozenset({2}),  # past its last piece: its recovery reads it
        wal("2-1", 9): frozenset({2}),  # another writer's: its recovery never reads it
        wal("1-1", 7): frozenset({1, 3}),  # ledger 3 is live, its records unread: kept
        wal("1-1", 8): frozenset({1, 99}),  # 99 is dead, 1 does not need it
        wal("1-1", 10): frozenset({99}),  # only dead ledgers: garbage, not an orphan
    }
    ages = {key: OLD for key in ledgers_in}
    found = orphans(ages, ledgers_in, {1, 2, 3}, holdings, min_age=3600)
    assert found == [wal("1-1", 4), wal("1-1", 5), wal("1-1", 8), wal("2-1", 9)]


def test_a_data_object_its_compacted_piece_does_not_name_is_an_orphan():
    holdings = {1: Holding(named={data(1, "a")}, sealed=True), 2: Holding(sealed=True)}
    ages = {data(1, "a"): OLD, data(1, "b"): OLD, data(2, "a"): OLD, data(3, "a"): OLD}
    assert orphans(ages, {}, {1, 2, 3}, holdings, min_age=3600) == [data(1, "b"), data(2, "a")]


def test_nothing_younger_than_the_safety_age_is_an_orphan():
    holdings = {1: Holding(sealed=True)}
    ages = {data(1, "a"): 10.0, wal("1-1", 4): 10.0}
    assert orphans(ages, {wal("1-1", 4): frozenset({1})}, {1}, holdings, min_age=3600) == []
    assert orphans(ages, {wal("1-1", 4): frozenset({1})}, {1}, holdings, min_age=0) == [data(1, "a"), wal("1-1", 4)]
