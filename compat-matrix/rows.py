"""The matrix's catalogue: every row (client, release, pin) and what its generation has.

A row states what its protocol generation allows: the magic it writes and reads,
the codecs it may send, whether it sets per-record headers and timestamps, and, per
feature column, either nothing (the cell runs) or the reason the column does not
apply. Nothing here runs anything; ``clients.py`` knows how to start each family and
``cells.py`` what each column checks.
"""
from dataclasses import dataclass, field

import clients

COLUMNS = ["records", "gzip", "snappy", "lz4", "zstd", "group", "sasl-plain", "sasl-scram", "idempotent", "admin",
           "transactions", "kip848", "share"]
CODEC_COLUMNS = ["gzip", "snappy", "lz4", "zstd"]
LEGACY_CODECS = ("none", "gzip", "snappy", "lz4")
ALL_CODECS = LEGACY_CODECS + ("zstd",)

NO_SASL_0_9 = "0.9 has no SaslHandshake: SASL PLAIN and SCRAM came with 0.10"
NO_IDEMPOTENCE = "idempotent producers came with 0.11 (InitProducerId)"
NO_ZSTD = "zstd came with 2.1 (Produce v7)"
NO_ADMIN_API = "CreateTopics came with 0.10.1"
NO_TRANSACTIONS = "transactions came with 0.11 (InitProducerId with a transactional id, EndTxn)"
NO_KIP848 = "{} has no consumer of KIP-848's protocol (group.protocol=consumer)"
NO_SHARE = "{} has no share consumer (KIP-932)"
ZSTD_UNREADABLE = ("it writes zstd (Produce v7) but fetches with Fetch v4, and Kafka serves zstd only from "
                   "Fetch v10 (UNSUPPORTED_COMPRESSION_TYPE)")


@dataclass(frozen=True)
class Row:
    family: str          # client family: kafka-python, aiokafka, confluent-kafka, kcat, sarama, kafkajs, java
    release: str         # the library release
    pin: str             # the generation it is pinned to, "" when it negotiates
    magic: int           # message format it writes and reads
    codecs: tuple        # codecs it may send
    headers: bool        # sets per-record headers
    timestamps: bool     # sets create timestamps (a magic-0 generation drops them)
    client: clients.Client
    not_applicable: dict = field(default_factory=dict)  # column -> why it does not apply
    subset: bool = False  # run by the CI subset
    # column -> why the cell fails against Kafka too (a client limitation); the cell still runs
    known: dict = field(default_factory=dict)
    share: bool = False  # has a share consumer the driver runs (the share column); others: NO_SHARE

    @property
    def id(self) -> str:
        return f"{self.family}-{self.release}" + (f"@{self.pin}" if self.pin else "")

    @property
    def generation(self) -> str:
        return self.pin or "negotiated (ApiVersions)"

    def reason_not_applicable(self, column: str) -> str | None:
        if column == "share" and not self.share:
            return self.not_applicable.get(column, NO_SHARE.format(f"{self.family} {self.release}"))
        if column in CODEC_COLUMNS and column not in self.codecs:
            return self.not_applicable.get(column, f"{self.family} {self.release} cannot send {column} "
                                                   f"at this generation")
        return self.not_applicable.get(column)


def _version(pin: str) -> tuple:
    return tuple(int(part) for part in pin.split("."))


# -- kafka-python and kafka-python-ng -------------------------------------------------------------

# 1.4 and 2.0 compare pins with (0, 11, 0) and (2, 1, 0): a two-part (0, 11) or (2, 1) falls
# below them (Fetch v3 without headers; no zstd), so their pins have three parts.
KAFKA_PYTHON_PINS = {
    "1.4.7": ["0.9", "0.10.0", "0.10.1", "0.10.2", "0.11.0", "1.0"],
    "2.0.2": ["0.9", "0.10.0", "0.10.1", "0.10.2", "0.11.0", "1.0", "1.1", "2.0", "2.1.0"],
    "3.0.12": ["0.9", "0.10.0", "0.10.1", "0.10.2", "0.11", "1.0", "2.1", "2.4", "2.8", "3.4", "3.9", "4.0"],
}
# What an unpinned client ends up speaking to kgate (it probes the newest it knows).
KAFKA_PYTHON_NEWEST = {"1.4.7": "1.0", "2.0.2": "2.1", "3.0.12": "4.0", "2.2.3": "2.1"}
KAFKA_PYTHON_SUBSET = {("2.0.2", "0.9"), ("2.0.2", "0.10.0"), ("3.0.12", "")}


def kafka_python(release: str, pin: str, package: str = "kafka-python") -> Row:
    generation = _version(pin or KAFKA_PYTHON_NEWEST[release])
    major = _version(release)[0]
    magic = 0 if generation < (0, 10) else 1 if generation < (0, 11) else 2
    zstd = major >= 2 and generation >= (2, 1)
    na = {}
    if generation < (0, 10):
        na["sasl-plain"] = na["sasl-scram"] = NO_SASL_0_9
    elif major < 2:
        na["sasl-scram"] = f"kafka-python {release} has no SCRAM (2.0 added it)"
    if package == "kafka-python-ng" or major < 3:
        na["idempotent"] = f"{package} {release} has no idempotent producer"
        na["transactions"] = f"{package} {release} has no transactional producer (kafka-python 2.1 added it)"
    elif generation < (0, 11):
        na["idempotent"] = NO_IDEMPOTENCE
        na["transactions"] = NO_TRANSACTIONS
    na["kip848"] = NO_KIP848.format(f"{package} {release}")
    if generation < (0, 10, 1):
        na["admin"] = NO_ADMIN_API
    elif major < 2 and pin:
        na["admin"] = f"kafka-python {release}'s KafkaAdminClient needs ApiVersions, which a pinned client skips"
    if not zstd:
        na["zstd"] = NO_ZSTD if major >= 2 else f"kafka-python {release} has no zstd (2.0 added it)"
    known = {"zstd": f"{package} {release}: {ZSTD_UNREADABLE}"} if zstd and major == 2 else {}
    return Row(package, release, pin, magic, ALL_CODECS if zstd else LEGACY_CODECS, headers=magic == 2,
               timestamps=True, not_applicable=na, known=known, subset=(release, pin) in KAFKA_PYTHON_SUBSET,
               client=clients.PythonClient.in_venv("kafka_python", package, release, pin))


# -- aiokafka ------------------------------------------------------------------------------------

def aiokafka(release: str, pin: str, subset: bool = False) -> Row:
    generation = _version(pin) if pin else (4, 0)
    magic = 1 if generation < (0, 11) else 2
    na = {}
    if generation < (0, 11):
        na["idempotent"] = NO_IDEMPOTENCE
        na["transactions"] = NO_TRANSACTIONS
    if generation < (2, 1):
        na["zstd"] = NO_ZSTD
    na["kip848"] = NO_KIP848.format(f"aiokafka {release}")
    known = {"zstd": f"aiokafka {release}: {ZSTD_UNREADABLE}"} if _version(release) < (0, 12) else {}
    return Row("aiokafka", release, pin, magic, ALL_CODECS if generation >= (2, 1) else LEGACY_CODECS,
               headers=magic == 2, timestamps=True, not_applicable=na, known=known, subset=subset,
               client=clients.PythonClient.in_venv("aiokafka_client", "aiokafka", release, pin))


# -- librdkafka: confluent-kafka wheels, Debian's python3-confluent-kafka and kcat --------------------

FALLBACK_0_9 = {"sasl-plain": NO_SASL_0_9, "sasl-scram": NO_SASL_0_9, "zstd": NO_ZSTD,
                "idempotent": NO_IDEMPOTENCE + "; librdkafka needs ApiVersions for it",
                "admin": "librdkafka's admin API needs ApiVersions",
                "transactions": NO_TRANSACTIONS + "; librdkafka needs ApiVersions for them",
                "kip848": "KIP-848's protocol came with Kafka 4.0; librdkafka needs ApiVersions for it",
                "share": "share groups came with Kafka 4.0; librdkafka needs ApiVersions for them"}
# group.protocol=consumer: early access from librdkafka 2.4, generally available from 2.12.
KIP848_LIBRDKAFKA = (2, 12)
# The first confluent-kafka release of the matrix with ShareConsumer (a preview in 2.16).
SHARE_CONFLUENT = (2, 16)


def librdkafka(family: str, release: str, pin: str, client: clients.Client, sets_records: bool, underneath: str,
               subset: bool = False, share: bool = False, **na) -> Row:
    """``pin`` "0.9.0": api.version.request=false with broker.version.fallback=0.9.0;
    ``underneath``: the librdkafka release the client runs on."""
    legacy = pin == "0.9.0"
    if _version(underneath)[:2] < KIP848_LIBRDKAFKA:
        na.setdefault("kip848", f"librdkafka {underneath} predates group.protocol=consumer (generally available "
                                f"from 2.12)")
    return Row(family, release, pin, 0 if legacy else 2, LEGACY_CODECS if legacy else ALL_CODECS,
               headers=sets_records and not legacy, timestamps=sets_records,
               not_applicable={**na, **(FALLBACK_0_9 if legacy else {})}, subset=subset, client=client, share=share)


def confluent(release: str, pin: str, subset: bool = False) -> Row:
    # confluent-kafka's wheels bundle the librdkafka of the same version.
    return librdkafka("confluent-kafka", release, pin,
                      clients.PythonClient.in_venv("confluent", "confluent-kafka", release, pin), True, release, subset,
                      share=_version(release) >= SHARE_CONFLUENT)


DEBIAN_PYTHON = "/usr/bin/python3"
DEBIAN_LIBRDKAFKA = "2.0.2"
KCAT_NA = {"admin": "kcat has no admin API",
           "transactions": "kcat's transactional mode is one transaction per run, committed when its input ends "
                           "(aborted only on Ctrl-C): the column's commit, abort, commit sequence needs a client API"}


def debian_confluent(pin: str) -> Row:
    return librdkafka("python3-confluent-kafka", f"1.7.0+librdkafka-{DEBIAN_LIBRDKAFKA}", pin,
                      clients.PythonClient("confluent", DEBIAN_PYTHON, pin), True, DEBIAN_LIBRDKAFKA)


def kcat(pin: str, subset: bool = False) -> Row:
    return librdkafka("kcat", f"librdkafka-{DEBIAN_LIBRDKAFKA}", pin, clients.Kcat(pin), False, DEBIAN_LIBRDKAFKA,
                      subset, **KCAT_NA)


# -- Sarama ----------------------------------------------------------------------------------------

SARAMA_GROUPS = "Sarama's ConsumerGroup needs V0_10_2_0"
SARAMA_SCRAM = "Sarama 1.22 speaks SCRAM only through SaslAuthenticate (1.0)"


def sarama(pin: str, subset: bool = False) -> Row:
    generation = tuple(int(part) for part in pin[1:].split("_"))
    magic = 0 if generation < (0, 10) else 1 if generation < (0, 11) else 2
    na = {"zstd": "Sarama 1.22 sends zstd in Produce v3, which Kafka refuses (UNSUPPORTED_COMPRESSION_TYPE)",
          "transactions": "Sarama 1.22 has no transactional producer (Sarama 1.37 added it)",
          "kip848": NO_KIP848.format("Sarama 1.22")}
    if generation < (0, 10):
        na["lz4"] = "Sarama sends lz4 from V0_10_0_0"
        na["sasl-plain"] = na["sasl-scram"] = NO_SASL_0_9
    elif generation < (1, 0):
        na["sasl-scram"] = SARAMA_SCRAM
    if generation < (0, 10, 2):
        na["group"] = SARAMA_GROUPS
    if generation < (0, 11):
        na["idempotent"] = NO_IDEMPOTENCE
    if generation < (0, 10, 1):
        na["admin"] = NO_ADMIN_API
    codecs = ("none", "gzip", "snappy") if generation < (0, 10) else LEGACY_CODECS
    return Row("sarama", "1.22.1", pin, magic, codecs, headers=magic == 2, timestamps=True, not_applicable=na,
               subset=subset, client=clients.Sarama(pin))


# -- kafkajs and the Java client ------------------------------------------------------------------------

KAFKAJS_CODECS = "kafkajs ships gzip only; other codecs are separate plugin packages"


def kafkajs(release: str, subset: bool = False) -> Row:
    return Row("kafkajs", release, "", 2, ("none", "gzip"), headers=True, timestamps=True,
               not_applicable={**{c: KAFKAJS_CODECS for c in ("snappy", "lz4", "zstd")},
                               "kip848": NO_KIP848.format(f"kafkajs {release}")}, subset=subset,
               client=clients.Kafkajs(release))


def java(release: str = "3.9.1", subset: bool = False) -> Row:
    na = {"share": "the matrix's Java driver has no share mode: KafkaShareConsumer 4.4 is checked by "
                   "tests/integration/test_share_groups.py"} if release >= "4" else {}
    return Row("kafka-clients", release, "", 2, ALL_CODECS, headers=True, timestamps=True, subset=subset,
               client=clients.Java(release), not_applicable=na)


ROWS = [
    *(kafka_python(release, pin) for release, pins in KAFKA_PYTHON_PINS.items() for pin in pins + [""]),
    kafka_python("2.2.3", "0.10.0", package="kafka-python-ng"),
    kafka_python("2.2.3", "", package="kafka-python-ng"),
    aiokafka("0.11.0", "0.10.2"),
    aiokafka("0.11.0", "2.1"),
    aiokafka("0.14.0", "", subset=True),
    confluent("2.3.0", "0.9.0"),
    confluent("2.3.0", ""),
    confluent("2.16.1", "0.9.0", subset=True),
    confluent("2.16.1", "", subset=True),
    debian_confluent("0.9.0"),
    debian_confluent(""),
    kcat("0.9.0"),
    kcat("", subset=True),
    *(sarama(pin, subset=pin in ("V0_10_0_0", "V2_1_0_0"))
      for pin in ("V0_9_0_0", "V0_10_0_0", "V0_10_2_0", "V1_0_0_0", "V2_1_0_0")),
    kafkajs("1.16.0"),
    kafkajs("2.2.4", subset=True),
    java(subset=True),
    java("4.4.0"),
]


def subset() -> list[Row]:
    return [row for row in ROWS if row.subset]
