"""Fetch's hand-written answer is byte for byte kafka-python's at every version served, and
large record sets go to the socket as the very buffers they were read in."""
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import FetchResponse as R

from kgate.protocol.fetch_answer import (
    SPLICE_MIN_BYTES,
    AbortedTransaction,
    FetchAnswer,
    PartitionFetchAnswer,
    RecordChunks,
    TopicFetchAnswer,
)

PD = R.FetchableTopicResponse.PartitionData
VERSIONS = range(0, 17)
_int16 = st.integers(-(1 << 15), (1 << 15) - 1)
_int32 = st.integers(-(1 << 31), (1 << 31) - 1)
_int64 = st.integers(-(1 << 63), (1 << 63) - 1)
_large = st.integers(SPLICE_MIN_BYTES - 1, 3 * SPLICE_MIN_BYTES).map(lambda n: bytes([n % 251]) * n)
_records = st.one_of(st.none(), st.binary(max_size=64), _large,
                     st.lists(st.binary(max_size=64) | _large, max_size=3).map(RecordChunks))
_partition = st.builds(PartitionFetchAnswer, _int32, _int16, _int64, _int64, _int64,
                       st.none() | st.lists(st.builds(AbortedTransaction, _int64, _int64), max_size=2),
                       _int32, _records)
_topic = st.builds(TopicFetchAnswer, st.none() | st.text(max_size=140), st.none() | st.uuids(),
                   st.lists(_partition, max_size=4))
_answer = st.builds(FetchAnswer, _int16, _int32, st.lists(_topic, max_size=3), _int32)


def kafka_pythons(answer: FetchAnswer) -> R:
    def records(value):
        return value.join() if isinstance(value, RecordChunks) else value
    return R(throttle_time_ms=answer.throttle_time_ms, error_code=answer.error_code, session_id=answer.session_id,
             responses=[R.FetchableTopicResponse(topic=t.topic, topic_id=t.topic_id, partitions=[
                 PD(partition_index=p.partition_index, error_code=p.error_code, high_watermark=p.high_watermark,
                    last_stable_offset=p.last_stable_offset, log_start_offset=p.log_start_offset,
                    aborted_transactions=None if p.aborted_transactions is None else [
                        PD.AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
                        for a in p.aborted_transactions],
                    preferred_read_replica=p.preferred_read_replica, records=records(p.records))
                 for p in t.partitions]) for t in answer.responses])


@settings(max_examples=200, deadline=None)
@given(_answer, st.sampled_from(VERSIONS))
def test_every_version_is_kafka_pythons_bytes(answer, version):
    assert b"".join(answer.encode(version)) == bytes(kafka_pythons(answer).encode(version=version))


@settings(max_examples=50, deadline=None)
@given(_answer, st.sampled_from(VERSIONS))
def test_large_record_sets_are_passed_through_not_copied(answer, version):
    pieces = answer.encode(version)
    # (Empty buffers are left out: CPython has one empty bytes object, so identity says nothing of them.)
    large = [buffer for topic in answer.responses for p in topic.partitions if p.records is not None
             and len(p.records) >= SPLICE_MIN_BYTES
             for buffer in (p.records.buffers if isinstance(p.records, RecordChunks) else [p.records]) if buffer]
    assert [piece for piece in pieces if piece and any(piece is buffer for buffer in large)] == large


def test_a_topic_id_is_written_from_version_13_and_a_name_before():
    answer = FetchAnswer(0, 0, [TopicFetchAnswer("t", uuid.UUID(int=7), [PartitionFetchAnswer(0, 0, 5)])])
    assert uuid.UUID(int=7).bytes in b"".join(answer.encode(13))
    assert uuid.UUID(int=7).bytes not in b"".join(answer.encode(12))
