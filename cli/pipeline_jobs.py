"""``kgate pipeline land|minute-counts``: the Spark pipeline jobs from the command line.

Spark is an optional extra (``scripts/setup-spark`` in a checkout, or
``pip install '.[spark]'``), so pyspark is imported only
once a job is about to run, and its absence is a usage error (exit 2) that says how
to install it. The connection options are those of every client command, turned into
the data source's ``kafka.*`` options; the data source's options (and, on the kgate
source, that the topics it names exist) are checked before Spark starts, so a typo costs no
JVM start-up. A job that fails prints the data
source's own message: exit 3 when the brokers could not be reached, 1 otherwise.
"""

from kgate.pipeline import errors

from . import client_options as options
from .client_options import ConnectError, Failed, UsageError

INSTALL_HINT = ("Spark is not installed: run scripts/setup-spark in the kgate checkout "
                "(or pip install '.[spark]' there)")


def add_parser(commands) -> None:
    jobs = options.family(commands, "pipeline", help="run a Spark pipeline job over topics (needs the Spark extra)",
                          description="Run a Spark Structured Streaming job on the kgate data source "
                                      "(works against any Kafka cluster). Needs the Spark extra: "
                                      "scripts/setup-spark in a checkout.", dest="job")
    land = options.subcommand(jobs, "land", "land topics into Parquet, partitioned by topic and event date",
                              description="Land topics into Parquet under OUTPUT/topic=T/date=YYYY-MM-DD/ "
                                          "(the record timestamp's UTC date), exactly once: a run resumes "
                                          "where the checkpoint says the last one stopped.")
    _job_arguments(land)
    land.add_argument("--output", required=True, metavar="DIR", help="where the Parquet files go")
    counts = options.subcommand(jobs, "minute-counts", "count records per minute and key, into a topic",
                                description="Count records per event-time minute, topic and key, and write "
                                            "the counts as JSON records to OUTPUT_TOPIC (update mode: the "
                                            "last record of a minute and key holds its count).")
    _job_arguments(counts)
    counts.add_argument("--output-topic", required=True, metavar="TOPIC",
                        help="the topic the counts are written to (keyed by the counted key)")
    counts.add_argument("--watermark", default="10 minutes", metavar="DELAY",
                        help="how late a record may be and still be counted (default '10 minutes')")


def _job_arguments(parser) -> None:
    which = parser.add_mutually_exclusive_group(required=True)
    which.add_argument("--subscribe", metavar="TOPIC[,TOPIC...]", help="the topics to read")
    which.add_argument("--subscribe-pattern", metavar="REGEX", help="read every topic the expression matches")
    parser.add_argument("--checkpoint", required=True, metavar="DIR",
                        help="the job's checkpoint: where the next run resumes from")
    parser.add_argument("--starting-offsets", default="earliest", metavar="earliest|latest|JSON",
                        help="where a job without a checkpoint starts (default earliest)")
    parser.add_argument("--max-offsets-per-trigger", metavar="N", help="records per micro-batch at most")
    parser.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                        help="any other data source option: failOnDataLoss, minPartitions, kafka.* (repeatable)")
    parser.add_argument("--interval-ms", type=int, metavar="MS",
                        help="keep running, a micro-batch every MS (default: process what is there, then stop)")
    parser.add_argument("--source", choices=jobs_sources(), default="kgate",
                        help="what reads the topics: the kgate data source (default) or Spark's own Kafka "
                             "connector (kafka; scripts/setup-spark installs it)")
    parser.add_argument("--master", default="local[*]", help="the Spark master (default local[*])")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="a Spark setting (repeatable)")


def jobs_sources() -> tuple[str, ...]:
    from kgate.pipeline.jobs import SOURCES  # no Spark needed: pyspark is imported by the jobs themselves

    return SOURCES


def source_options(args) -> dict:
    """The data source's options from the command line."""
    client = options.kafka_config(args)
    source = {"kafka.bootstrap.servers": ",".join(client["bootstrap_servers"]),
              "kafka.security.protocol": client["security_protocol"],
              "kafka.default.api.timeout.ms": str(args.connect_timeout_ms),
              "startingOffsets": args.starting_offsets, "includeHeaders": "true"}
    # In the Java client's terms, which Spark's Kafka connector needs and the kgate data source translates.
    if "sasl_mechanism" in client:
        module = "plain.PlainLoginModule" if client["sasl_mechanism"] == "PLAIN" else "scram.ScramLoginModule"
        source.update({"kafka.sasl.mechanism": client["sasl_mechanism"],
                       "kafka.sasl.jaas.config": f"org.apache.kafka.common.security.{module} required "
                                                 f"username={_quoted(client['sasl_plain_username'])} "
                                                 f"password={_quoted(client['sasl_plain_password'])};"})
    if "ssl_cafile" in client:
        source.update({"kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": client["ssl_cafile"]})
    if args.source == "kafka":
        # The Java client refuses a default.api.timeout.ms below its request.timeout.ms (30 s by default).
        source["kafka.request.timeout.ms"] = str(args.connect_timeout_ms)
    if args.subscribe:
        source["subscribe"] = args.subscribe
    else:
        source["subscribePattern"] = args.subscribe_pattern
    if args.max_offsets_per_trigger is not None:
        source["maxOffsetsPerTrigger"] = args.max_offsets_per_trigger
    source.update(options.key_values(args.option, "--option"))
    return source


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def run(args) -> int:
    return options.run(_run, args, f"kgate pipeline {args.job}")


def _run(args) -> None:
    from kgate.pipeline.options import parse_read

    try:
        import pyspark  # noqa: F401  (only to learn whether the extra is installed)
    except ImportError:
        raise UsageError(INSTALL_HINT) from None
    source = source_options(args)
    if args.interval_ms is not None and args.interval_ms <= 0:
        raise UsageError("--interval-ms must be positive")
    try:
        read = parse_read(source, streaming=True)
    except errors.OptionError as exc:
        raise UsageError(str(exc)) from None
    if args.source == "kgate":
        _check_subscription(read)
    from kgate.pipeline import jobs
    from kgate.pipeline.jobs.land import land
    from kgate.pipeline.jobs.minute_counts import minute_counts

    conf = options.key_values(args.conf, "--conf")
    if args.source == "kafka":
        try:
            conf.update(jobs.connector_conf(conf))
        except jobs.MissingConnector as exc:
            raise UsageError(str(exc)) from None
    spark = jobs.session(f"kgate-{args.job}", args.master, conf)
    try:
        available_now = args.interval_ms is None
        if args.job == "land":
            query = land(spark, source, args.output, args.checkpoint, available_now, args.interval_ms, args.source)
        else:
            query = minute_counts(spark, source, args.output_topic, args.checkpoint, available_now,
                                  args.interval_ms, args.watermark, args.source)
        try:
            query.awaitTermination()
        except KeyboardInterrupt:
            query.stop()
            raise
        except Exception as exc:  # StreamingQueryException: the data source's message is inside
            raise _job_failure(exc) from None
    finally:
        spark.stop()


def _check_subscription(read) -> None:
    """What the kgate data source's planning would refuse first (a named topic that is not
    there, brokers out of reach), asked before a Spark JVM starts rather than half a minute
    after, in the data source's own words. Spark's Kafka connector waits for a missing topic
    instead, so ``--source kafka`` is left to it."""
    from kgate.pipeline.cluster import Cluster

    cluster = Cluster(read.client)
    try:
        cluster.partitions(read.subscription)
    except errors.UnknownTopicError as exc:
        raise Failed(str(exc)) from None
    except errors.BrokerError as exc:
        raise ConnectError(str(exc)) from None
    finally:
        cluster.close()


def _job_failure(exc: Exception):
    """The data source's own line out of Spark's report, as ConnectError or Failed."""
    text = str(exc)
    prefix = f"{errors.__name__}."
    lines = [line.strip() for line in text.splitlines() if prefix in line]
    line = lines[0] if lines else (text.strip().splitlines() or [type(exc).__name__])[0]
    line = line[line.find(prefix):] if prefix in line else line
    kind, _, message = line.partition(": ")
    if kind == prefix + errors.BrokerError.__name__:
        return ConnectError(message)
    return Failed(message if kind.startswith(prefix) else line)
