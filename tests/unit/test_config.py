"""Broker settings: defaults, a TOML file, --set overrides; bad ones fail naming the setting."""
import os
import subprocess
import sys

import pytest

from kgate.gateway.config import ConfigError, ConfigType, Listener, Settings, config_type

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

TOML = """
listeners = "127.0.0.1:0"
"data.dir" = "from-file"
num.partitions = 3
auto.create.topics.enable = false

[log]
retention.ms = 60000
"retention.bytes" = 4096
level = "DEBUG"

[socket.request]
max.bytes = 2048
"""


@pytest.fixture
def config_file(tmp_path):
    def write(text: str = TOML) -> str:
        path = tmp_path / "kgate.toml"
        path.write_text(text)
        return str(path)
    return write


def test_defaults():
    settings = Settings.load()
    assert settings.listeners == [Listener("127.0.0.1", 9092)]
    assert settings["num.partitions"] == 1 and settings["auto.create.topics.enable"] is True
    assert settings["entry.format"] == "kafka"


def test_toml_file_with_tables_and_dotted_keys(config_file):
    settings = Settings.load(config_file=config_file())
    assert settings.listeners == [Listener("127.0.0.1", 0)]
    assert settings.data_dir == "from-file"
    assert settings["num.partitions"] == 3
    assert settings["auto.create.topics.enable"] is False
    assert settings["log.retention.ms"] == 60000 and settings["log.retention.bytes"] == 4096
    assert settings["log.level"] == "DEBUG"
    assert settings["socket.request.max.bytes"] == 2048


def test_set_overrides_the_file(config_file):
    settings = Settings.load(config_file=config_file(),
                             overrides=["num.partitions=5", "auto.create.topics.enable = TRUE",
                                        "log.retention.bytes=-1", "advertised.listeners=kgate.example:9092"])
    assert settings["num.partitions"] == 5
    assert settings["auto.create.topics.enable"] is True
    assert settings["log.retention.bytes"] == -1
    assert settings["log.retention.ms"] == 60000  # untouched by --set
    assert settings["advertised.listeners"] == "kgate.example:9092"


def test_listen_and_data_dir_arguments_override_the_file(config_file):
    settings = Settings.load(listen=["127.0.0.1:9999", "0.0.0.0:1234"], data_dir="from-args",
                             config_file=config_file())
    assert settings.listeners == [Listener("127.0.0.1", 9999), Listener("0.0.0.0", 1234)]
    assert settings.data_dir == "from-args"
    assert settings["num.partitions"] == 3


@pytest.mark.parametrize("override,setting", [
    ("bogus=1", "bogus"),
    ("num.partitions=0", "num.partitions"),
    ("num.partitions=three", "num.partitions"),
    ("socket.request.max.bytes=-5", "socket.request.max.bytes"),
    ("log.retention.ms=-2", "log.retention.ms"),
    ("auto.create.topics.enable=maybe", "auto.create.topics.enable"),
    ("entry.format=avro", "entry.format"),
    ("log.level=TRACE", "log.level"),
    ("advertised.listeners=no-port", "advertised.listeners"),
    ("num.partitions", "num.partitions"),  # no '='
    ("group.consumer.migration.policy=sideways", "group.consumer.migration.policy"),
])
def test_bad_override_names_the_setting(override, setting):
    with pytest.raises(ConfigError, match=setting.replace(".", r"\.")):
        Settings.load(overrides=[override])


@pytest.mark.parametrize("text,setting", [
    ("[log]\nretention.ms = 'soon'\n", "log.retention.ms"),
    ("unknown.key = 1\n", "unknown.key"),
    ("[num]\npartitions = true\n", "num.partitions"),
    ("num.partitions = 2.5\n", "num.partitions"),  # not an integer: must not be truncated to 2
    ("log.level = 'verbose'\n", "log.level"),
])
def test_bad_file_value_names_the_setting(config_file, text, setting):
    with pytest.raises(ConfigError, match=setting.replace(".", r"\.")):
        Settings.load(config_file=config_file(text))


def test_unreadable_or_malformed_file(config_file, tmp_path):
    missing = str(tmp_path / "absent.toml")
    with pytest.raises(ConfigError, match="absent.toml"):
        Settings.load(config_file=missing)
    with pytest.raises(ConfigError, match="kgate.toml"):
        Settings.load(config_file=config_file("num.partitions = = 3\n"))


@pytest.mark.parametrize("listen", ["localhost", "127.0.0.1:http", "127.0.0.1:70000", ":9092"])
def test_bad_listener(listen):
    with pytest.raises(ConfigError, match="listener"):
        Settings.load(listen=[listen])


@pytest.mark.parametrize("override,setting", [("bogus=1", "bogus"), ("num.partitions=0", "num.partitions")])
def test_kgate_serve_refuses_bad_settings_at_start_up(tmp_path, override, setting):
    result = subprocess.run(
        [sys.executable, "-m", "kgate", "serve", "--listen", "127.0.0.1:0", "--data-dir", str(tmp_path),
         "--set", override],
        cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode != 0
    assert setting in result.stderr
    assert "listening" not in result.stdout


def test_describe_configs_reports_kafkas_types():
    assert config_type("sasl.enabled.mechanisms") == ConfigType.LIST
    assert config_type("log.retention.ms") == ConfigType.LONG
    assert config_type("message.max.bytes") == ConfigType.INT  # as Kafka types it
    assert config_type("ssl.key.password") == ConfigType.PASSWORD
    assert config_type("auto.create.topics.enable") == ConfigType.BOOLEAN
    assert config_type("entry.format") == ConfigType.STRING


def test_listeners_take_kafkas_security_protocols():
    assert Listener.parse("SASL_SSL://127.0.0.1:9094") == Listener("127.0.0.1", 9094, "SASL_SSL")
    assert Listener.parse("127.0.0.1:9092").security_protocol == "PLAINTEXT"
    assert Listener.parse("SASL_PLAINTEXT://[::1]:0") == Listener("::1", 0, "SASL_PLAINTEXT")
    with pytest.raises(ConfigError, match="security protocol"):
        Listener.parse("KERBEROS://127.0.0.1:1")


# obstore imported as if it were not installed: a None in sys.modules makes its import fail.
WITHOUT_OBSTORE = "import sys; sys.modules['obstore'] = None; from kgate.command import run; run()"


@pytest.mark.parametrize("command", [["serve", "--listen", "127.0.0.1:0"], ["storage", "check"]])
def test_s3_storage_without_the_s3_extra_says_which_extra_in_one_line(tmp_path, command):
    result = subprocess.run(
        [sys.executable, "-c", WITHOUT_OBSTORE, *command, "--data-dir", str(tmp_path),
         "--storage", "s3://bucket/prefix?endpoint=http://127.0.0.1:9&region=us-east-1"],
        cwd=REPO, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    assert "kgate-broker[s3]" in result.stderr and "obstore" in result.stderr
    assert "listening" not in result.stdout


@pytest.mark.parametrize("given, retention_ms, roll_ms", [
    ([], 604_800_000, 604_800_000),
    (["log.retention.hours=24", "log.roll.hours=1"], 86_400_000, 3_600_000),
    (["log.retention.hours=24", "log.retention.minutes=30"], 1_800_000, 604_800_000),
    (["log.retention.hours=24", "log.retention.minutes=30", "log.retention.ms=5000", "log.roll.ms=7",
      "log.roll.hours=2"], 5000, 7),
    (["log.retention.hours=-5"], -1, 604_800_000),
])
def test_retention_and_roll_times_resolve_from_their_units_as_kafka_does(given, retention_ms, roll_ms):
    """The milliseconds when given, else the minutes, else the hours (a negative retention: -1)."""
    settings = Settings.load(overrides=given)
    assert (settings["log.retention.ms"], settings["log.roll.ms"]) == (retention_ms, roll_ms)
