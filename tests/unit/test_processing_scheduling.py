"""The pure scheduling of kgate.processing: which offset may be committed, which record may run.

Both are checked against a plain model under random finishing orders (Hypothesis): the
commit position is one past the longest finished prefix of the offsets taken, never a
record beyond an unfinished one; a key never has two records running and runs them in
the order taken.
"""
import random

from hypothesis import given
from hypothesis import strategies as st

from kgate.processing.backoff import retry_delay_s
from kgate.processing.keys import KeyQueues
from kgate.processing.offsets import OffsetTracker


@st.composite
def offsets_and_order(draw):
    """Increasing offsets with gaps (compaction, markers) and an order to finish them in."""
    gaps = draw(st.lists(st.integers(1, 3), min_size=1, max_size=60))
    offsets = [sum(gaps[:i + 1]) + 100 for i in range(len(gaps))]
    return offsets, draw(st.permutations(offsets))


@given(offsets_and_order())
def test_commit_position_is_one_past_the_finished_prefix(case):
    offsets, order = case
    tracker = OffsetTracker()
    for offset in offsets:
        assert tracker.take(offset)
    finished = set()
    for offset in order:
        tracker.finish(offset)
        finished.add(offset)
        prefix = 0
        while prefix < len(offsets) and offsets[prefix] in finished:
            prefix += 1
        assert tracker.position == (offsets[prefix - 1] + 1 if prefix else None)
        assert tracker.in_flight == len(offsets) - prefix
    assert tracker.position == offsets[-1] + 1


def test_an_offset_delivered_again_is_refused():
    tracker = OffsetTracker()
    assert tracker.take(5) and tracker.take(6)
    assert not tracker.take(6) and not tracker.take(3)
    tracker.finish(5)
    assert tracker.position == 6


@given(st.lists(st.sampled_from(["a", "b", "c", None]), min_size=1, max_size=80), st.randoms())
def test_keys_run_one_at_a_time_in_order(keys, rng):
    queues = KeyQueues()
    runnable = []
    for index, key in enumerate(keys):
        if queues.add(key, index):
            runnable.append(index)
    done = []
    while runnable:
        index = runnable.pop(rng.randrange(len(runnable)))
        running_keys = [keys[i] for i in runnable if keys[i] is not None]
        assert len(running_keys) == len(set(running_keys)), "two records of one key free to run at once"
        done.append(index)
        following = queues.finish(keys[index], index)
        if following is not None:
            runnable.append(following)
    assert sorted(done) == list(range(len(keys)))
    for key in "abc":
        assert [i for i in done if keys[i] == key] == [i for i, k in enumerate(keys) if k == key]
    assert len(queues) == 0


def test_removing_a_head_frees_the_next_of_its_key():
    queues = KeyQueues()
    assert queues.add("k", 1) and not queues.add("k", 2) and not queues.add("k", 3)
    assert queues.remove("k", 2) is None
    assert queues.remove("k", 1) == 3
    assert queues.finish("k", 3) is None and len(queues) == 0


def test_finishing_a_record_that_is_not_the_head_is_an_error():
    queues = KeyQueues()
    queues.add("k", 1)
    queues.add("k", 2)
    try:
        queues.finish("k", 2)
    except ValueError as error:
        assert "not the head" in str(error)
    else:
        raise AssertionError("finish accepted a record behind the head")


def test_retry_delays_grow_to_the_ceiling_with_jitter():
    rng = random.Random(7)
    for attempt, step_ms in ((1, 100), (2, 200), (3, 400), (10, 30_000), (100, 30_000)):
        delays = [retry_delay_s(attempt, 100, 30_000, rng) for _ in range(200)]
        assert all(step_ms / 2000 <= d <= step_ms / 1000 for d in delays)
        assert max(delays) - min(delays) > step_ms / 4000, "no jitter"


def test_kgate_process_refuses_what_is_not_an_application(capsys):
    from kgate.command import main

    assert main(["process", "--app", "no_such_module_here:app"]) == 2
    assert main(["process", "--app", "json:dumps"]) == 2
    assert main(["process", "--app", "json"]) == 2
    err = capsys.readouterr().err
    assert "cannot import no_such_module_here" in err and "not a kgate.processing.Processor" in err
    assert "expected MODULE:APP" in err


def test_bad_settings_are_refused_naming_the_setting():
    import pytest

    from kgate.processing import Processor

    for settings, named in (({"concurrency": 0}, "concurrency"), ({"retry_backoff_ms": (500, 100)}, "retry_backoff_ms"),
                            ({"max_bytes": -1}, "max_bytes"), ({"handler_timeout_s": 0}, "handler_timeout_s")):
        with pytest.raises(ValueError, match=named):
            Processor("127.0.0.1:9", "g", ["t"], **settings)
    with pytest.raises(ValueError, match="topics"):
        Processor("127.0.0.1:9", "g", "t")
