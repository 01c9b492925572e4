"""Option parsing, offset arithmetic and the data source objects, without Spark or a broker."""
import pickle

import pytest

from kgate.cli import pipeline_jobs
from kgate.command import parser
from kgate.pipeline import jobs
from kgate.pipeline import offsets as O
from kgate.pipeline.datasource import KgateDataSource
from kgate.pipeline.errors import OptionError
from kgate.pipeline.options import parse_read, parse_write

from .spark_records import SOURCE_SCHEMA

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "a,b"}


def refused(options: dict, streaming: bool = False) -> str:
    with pytest.raises(OptionError) as caught:
        parse_read(options, streaming)
    return str(caught.value)


def test_defaults_follow_spark_kafka_source():
    batch = parse_read(BASE, streaming=False)
    assert (batch.starting.kind, batch.ending.kind) == ("earliest", "latest")
    assert batch.fail_on_data_loss and not batch.include_headers
    assert parse_read(BASE, streaming=True).starting.kind == "latest"
    assert parse_read({**BASE}, streaming=False).subscription.topics == ("a", "b")


def test_option_names_are_case_insensitive_as_in_spark():
    options = {"KAFKA.BOOTSTRAP.SERVERS": "h:1", "SubscribePattern": "t-.*", "MAXOFFSETSPERTRIGGER": "10"}
    parsed = parse_read(options, streaming=True)
    assert parsed.subscription.matches("t-1") and not parsed.subscription.matches("u-1")
    assert parsed.max_offsets_per_trigger == 10


@pytest.mark.parametrize("options, streaming, message", [
    ({"subscribe": "a"}, False, "kgate option 'kafka.bootstrap.servers': required"),
    ({**BASE, "kafka.bootstrap.servers": "nohostport"}, False, "expected host:port"),
    ({"kafka.bootstrap.servers": "h:1"}, False, "give exactly one of subscribe, subscribePattern or assign"),
    ({**BASE, "subscribePattern": "("}, False, "kgate option 'subscribe'"),
    ({"kafka.bootstrap.servers": "h:1", "subscribePattern": "("}, False,
     "kgate option 'subscribePattern': not a valid regular expression"),
    ({**BASE, "startingOffsets": "latest"}, False, "kgate option 'startingOffsets': 'latest' is not allowed"),
    ({**BASE, "startingOffsets": '{"a": {"0": -1}}'}, False, "kgate option 'startingOffsets': a-0: -1 (latest)"),
    ({**BASE, "endingOffsets": '{"a": {"0": -2}}'}, False, "kgate option 'endingOffsets': a-0: -2 (earliest)"),
    ({**BASE, "endingOffsets": "latest"}, True, "kgate option 'endingOffsets': not valid in streaming"),
    ({**BASE, "startingOffsets": "[1]"}, False, "kgate option 'startingOffsets': expected a JSON object"),
    ({**BASE, "startingOffsets": '{"a": {"zero": 1}}'}, False, "partition 'zero' is not a partition number"),
    ({**BASE, "startingTimestamp": "yesterday"}, False, "kgate option 'startingTimestamp'"),
    ({**BASE, "failOnDataLoss": "maybe"}, False, "kgate option 'failOnDataLoss': expected true or false"),
    ({**BASE, "maxOffsetsPerTrigger": "0"}, True, "kgate option 'maxOffsetsPerTrigger'"),
    ({**BASE, "kafka.enable.auto.commit": "true"}, False, "kgate option 'kafka.enable.auto.commit': not supported"),
    ({**BASE, "kafka.sasl.jaas.config": "PlainLoginModule required;"}, False, "kgate option 'kafka.sasl.jaas.config'"),
    ({"kafka.bootstrap.servers": "h:1", "assign": '{"a": [0]}', "startingOffsets": '{"b": {"0": 1}}'}, False,
     "kgate option 'startingOffsets': b-0 is not among the partitions of 'assign'"),
])
def test_bad_options_are_refused_naming_the_option(options, streaming, message):
    assert message in refused(options, streaming)


def test_offsets_json_and_timestamp():
    parsed = parse_read({**BASE, "startingOffsets": '{"a": {"0": 23, "1": -2}}'}, streaming=False)
    assert parsed.starting.offset_map() == {("a", 0): 23, ("a", 1): -2}
    parsed = parse_read({**BASE, "startingOffsets": "earliest", "startingTimestamp": "1700000000000"}, False)
    assert (parsed.starting.kind, parsed.starting.timestamp) == ("timestamp", 1_700_000_000_000)


def test_java_client_settings_become_librdkafka_settings():
    jaas = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="app" password="s3 \\"x";'
    parsed = parse_read({**BASE, "kafka.security.protocol": "SASL_PLAINTEXT", "kafka.sasl.mechanism": "SCRAM-SHA-256",
                         "kafka.sasl.jaas.config": jaas, "kafka.default.api.timeout.ms": "5000"}, False)
    config = parsed.client.librdkafka({}, {})
    assert config["sasl.username"] == "app" and config["sasl.password"] == 's3 "x'
    assert config["security.protocol"] == "SASL_PLAINTEXT" and config["sasl.mechanism"] == "SCRAM-SHA-256"
    assert "sasl.jaas.config" not in config and "default.api.timeout.ms" not in config
    assert parsed.client.api_timeout_ms == 5000


def test_a_pem_truststore_becomes_the_ca_location_and_other_truststores_are_refused():
    parsed = parse_read({**BASE, "kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": "/ca.pem"},
                        False)
    config = parsed.client.librdkafka({}, {})
    assert config["ssl.ca.location"] == "/ca.pem" and "ssl.truststore.location" not in config
    with pytest.raises(OptionError, match="kafka.ssl.truststore.type.*JKS truststores"):
        parse_read({**BASE, "kafka.ssl.truststore.location": "/ca.jks"}, False)


def test_the_command_line_speaks_the_java_clients_terms_that_both_sources_read(tmp_path):
    """``kgate pipeline --source kafka`` hands Spark's connector the same options: SASL and TLS
    as the Java client names them, which the kgate data source translates back."""
    ca = tmp_path / "ca.pem"
    ca.write_text("")
    args = parser().parse_args(["pipeline", "land", "--bootstrap-server", "h:1", "--subscribe", "t",
                                "--checkpoint", "c", "--output", "o", "--source", "kafka",
                                "--security-protocol", "SASL_SSL", "--sasl-mechanism", "SCRAM-SHA-512",
                                "--sasl-username", "app", "--sasl-password", 'p"w', "--ssl-cafile", str(ca)])
    options = pipeline_jobs.source_options(args)
    assert options["kafka.sasl.jaas.config"] == \
        'org.apache.kafka.common.security.scram.ScramLoginModule required username="app" password="p\\"w";'
    assert (options["kafka.ssl.truststore.type"], options["kafka.ssl.truststore.location"]) == ("PEM", str(ca))
    # The Java client refuses a default.api.timeout.ms below its request.timeout.ms.
    assert options["kafka.request.timeout.ms"] == options["kafka.default.api.timeout.ms"]
    config = parse_read(options, streaming=True).client.librdkafka({}, {})
    assert (config["sasl.username"], config["sasl.password"], config["ssl.ca.location"]) == ("app", 'p"w', str(ca))


def test_spark_kafka_connector_jars_come_from_the_checkout_unless_given(tmp_path):
    with pytest.raises(jobs.MissingConnector, match="scripts/setup-spark"):
        jobs.connector_conf({}, tmp_path)
    (tmp_path / "spark-sql-kafka-0-10_2.13-4.2.0.jar").touch()
    (tmp_path / "kafka-clients-3.9.1.jar").touch()
    assert jobs.connector_conf({}, tmp_path)["spark.jars"].split(",") == \
        [str(tmp_path / "kafka-clients-3.9.1.jar"), str(tmp_path / "spark-sql-kafka-0-10_2.13-4.2.0.jar")]
    assert jobs.connector_conf({"spark.jars.packages": "g:a:v"}, tmp_path) == {}


def test_user_settings_win_over_defaults_but_not_over_what_the_source_controls():
    parsed = parse_read({**BASE, "kafka.fetch.max.bytes": "5", "kafka.group.id": "mine"}, streaming=False)
    config = parsed.client.librdkafka({"fetch.max.bytes": 1, "group.id": "planner"}, {"enable.partition.eof": False})
    assert (config["fetch.max.bytes"], config["group.id"], config["enable.partition.eof"]) == ("5", "mine", False)


def test_write_options():
    assert parse_write({"kafka.bootstrap.servers": "h:1", "topic": "out"}).topic == "out"
    with pytest.raises(OptionError, match="kafka.value.serializer"):
        parse_write({"kafka.bootstrap.servers": "h:1", "kafka.value.serializer": "x"})


def test_offsets_json_shape_round_trips():
    offsets = {("a", 10): 5, ("a", 2): 7, ("b", 0): 0}
    document = O.to_json_dict(offsets)
    assert document == {"a": {"2": 7, "10": 5}, "b": {"0": 0}}
    assert O.from_json_dict(document) == offsets


def test_min_partitions_splits_by_size():
    parts = O.split(O.ranges({("a", 0): 0, ("a", 1): 0}, {("a", 0): 900, ("a", 1): 100}), 10)
    assert [(p.partition, p.start, p.end) for p in parts if p.partition == 1] == [(1, 0, 100)]
    big = [p for p in parts if p.partition == 0]
    assert len(big) == 9 and big[0].start == 0 and big[-1].end == 900
    assert all(a.end == b.start for a, b in zip(big, big[1:]))
    assert O.split(parts, 2) == parts  # already enough


def test_max_offsets_per_trigger_is_shared_by_backlog():
    start = {("a", 0): 0, ("a", 1): 100, ("a", 2): 5}
    latest = {("a", 0): 1000, ("a", 1): 200, ("a", 2): 5}
    end = O.cap(start, latest, 110)
    assert end == {("a", 0): 100, ("a", 1): 110, ("a", 2): 5}
    assert O.cap(start, latest, 10_000) == latest
    assert O.cap({("a", 0): 0, ("a", 1): 0}, {("a", 0): 1000, ("a", 1): 1}, 10)[("a", 1)] == 1  # under one: up


def test_readers_connect_lazily_and_pickle_without_their_connection():
    """Spark builds and pickles these in the driver's planning; only workers may connect."""
    source = KgateDataSource({"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t"})  # nothing listens
    for reader in (source.reader(SOURCE_SCHEMA), source.streamReader(SOURCE_SCHEMA)):
        assert reader.cluster._consumer is None
        reader.cluster._connection()
        clone = pickle.loads(pickle.dumps(reader))
        assert clone.cluster._consumer is None and clone.options == reader.options
        reader.cluster.close()
