"""Produce's hand-written answer is byte for byte kafka-python's, at every version served."""
from hypothesis import given
from hypothesis import strategies as st
from kafka.protocol.api_key import ApiKey
from kafka.protocol.producer import ProduceResponse as R

from kgate.protocol.api_versions import SUPPORTED
from kgate.protocol.produce_answer import PartitionAnswer, ProduceAnswer, TopicAnswer

LOW, HIGH = SUPPORTED[ApiKey.Produce]
_int16 = st.integers(-(1 << 15), (1 << 15) - 1)
_int32 = st.integers(-(1 << 31), (1 << 31) - 1)
_int64 = st.integers(-(1 << 63), (1 << 63) - 1)
_text = st.text(max_size=140)  # a 1-byte and a 2-byte compact length both occur
_partition = st.builds(PartitionAnswer, _int32, _int16, _int64, _int64, _int64, st.none() | _text,
                       st.lists(st.tuples(_int32, st.none() | _text), max_size=3))
_answer = st.builds(ProduceAnswer, st.lists(st.builds(TopicAnswer, _text, st.lists(_partition, max_size=3)),
                                            max_size=3), _int32)


def kafka_pythons(answer: ProduceAnswer) -> R:
    P = R.TopicProduceResponse.PartitionProduceResponse
    return R(throttle_time_ms=answer.throttle_time_ms, responses=[R.TopicProduceResponse(
        name=topic.name, partition_responses=[P(
            index=p.index, error_code=p.error_code, base_offset=p.base_offset,
            log_append_time_ms=p.log_append_time_ms, log_start_offset=p.log_start_offset,
            error_message=p.error_message, record_errors=[P.BatchIndexAndErrorMessage(
                batch_index=i, batch_index_error_message=m) for i, m in p.record_errors])
            for p in topic.partition_responses]) for topic in answer.responses])


@given(_answer, st.integers(LOW, HIGH))
def test_every_version_is_kafka_pythons_bytes(answer, version):
    assert answer.encode(version) == kafka_pythons(answer).encode(version=version)


@given(_answer, st.integers(LOW, HIGH))
def test_kafka_python_reads_back_what_was_written(answer, version):
    decoded = R.decode(answer.encode(version), version=version)
    assert [(t.name, [(p.index, p.error_code, p.base_offset) for p in t.partition_responses])
            for t in decoded.responses] == \
        [(t.name, [(p.index, p.error_code, p.base_offset) for p in t.partition_responses]) for t in answer.responses]
