"""What every client command shares: connection options, connecting, and exit codes.

The client commands (``topics``, ``groups``, ``produce``, ``consume``, ``brokers``)
speak the Kafka protocol through kafka-python to ``--bootstrap-server``, so they work
against any Kafka cluster, not only kgate. They differ in what they ask; how they
connect and how a failure becomes an exit code and one line on stderr must not, so
scripts can rely on both. That lives here, once.
"""
import argparse
import logging
import os
import re
import socket
import sys
import time

import kafka.errors as Errors
from kafka import KafkaAdminClient
from kafka.net.compat import KafkaNetClient

from kgate.protocol.security import SASL_MECHANISMS, SECURITY_PROTOCOLS

from . import output

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_CONNECT = 0, 1, 2, 3

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"
DEFAULT_CONNECT_TIMEOUT_MS = 5000
PASSWORD_VARIABLE = "KGATE_SASL_PASSWORD"

# Failures of the connection itself rather than of an operation: exit 3.
_CONNECT_ERRORS = (Errors.KafkaConnectionError, Errors.NodeNotReadyError,
                   Errors.KafkaTimeoutError)
_AUTH_ERRORS = (Errors.SaslAuthenticationFailedError, Errors.UnsupportedSaslMechanismError,
                Errors.IllegalSaslStateError)

# kafka-python logs every retry at WARNING or ERROR; with no handler Python would print
# them all on stderr. The commands report failures themselves, in one line.
logging.getLogger("kafka").addHandler(logging.NullHandler())


class CommandError(Exception):
    """A failure the command reports as one line on stderr and an exit code."""
    exit_code = EXIT_FAILED


class Failed(CommandError):
    """The broker refused or could not do the operation (unknown topic or group, ...)."""
    exit_code = EXIT_FAILED


class UsageError(CommandError):
    """The command line (or the input it names) is wrong; nothing was asked of the broker."""
    exit_code = EXIT_USAGE


class ConnectError(CommandError):
    """No broker could be reached, or it refused our credentials."""
    exit_code = EXIT_CONNECT


def parser(defaults: bool = True) -> argparse.ArgumentParser:
    """A parent parser with the connection options.

    They are accepted before a family's action and after it (``kgate topics
    --bootstrap-server B list`` and ``kgate topics list --bootstrap-server B``): the
    family's parser holds the defaults, and its actions' parsers take the same options
    without defaults (``defaults=False``), so an action sets only what it was given.
    """
    def default(value):
        return value if defaults else argparse.SUPPRESS

    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("connection")
    group.add_argument("--bootstrap-server", metavar="HOST:PORT", default=default(DEFAULT_BOOTSTRAP),
                       help=f"a broker to start from; several may be given comma-separated "
                            f"(default {DEFAULT_BOOTSTRAP})")
    group.add_argument("--security-protocol", choices=SECURITY_PROTOCOLS, default=default("PLAINTEXT"),
                       help="how to talk to the brokers (default PLAINTEXT)")
    group.add_argument("--sasl-mechanism", choices=SASL_MECHANISMS, default=default(None),
                       help="SASL mechanism for SASL_PLAINTEXT and SASL_SSL (default PLAIN)")
    group.add_argument("--sasl-username", metavar="NAME", default=default(None),
                       help="the SASL user to log in as (with --security-protocol SASL_*)")
    group.add_argument("--sasl-password", metavar="PASSWORD", default=default(None),
                       help=f"SASL password (default: the {PASSWORD_VARIABLE} environment variable, "
                            f"which keeps it out of the process list)")
    group.add_argument("--ssl-cafile", metavar="PEM", default=default(None),
                       help="CA certificates to verify the brokers with, for SSL and SASL_SSL "
                            "(default: the system's)")
    group.add_argument("--connect-timeout-ms", type=int, default=default(DEFAULT_CONNECT_TIMEOUT_MS), metavar="MS",
                       help=f"give up (exit 3) when no broker answers within this "
                            f"(default {DEFAULT_CONNECT_TIMEOUT_MS})")
    return parent


def family(commands, name: str, help: str, description: str, dest: str = "action"):
    """A family of client commands (``topics``, ``groups``, ...): its parser takes the
    connection options too; returns where its actions (``args.<dest>``) are added."""
    parent = commands.add_parser(name, help=help, description=description, parents=[parser()])
    return parent.add_subparsers(dest=dest, required=True, metavar=dest.upper())


def subcommand(actions, name: str, help: str, description: str | None = None, listing: bool = False,
               in_family: bool = True):
    """A client subcommand's parser: its help, the connection options, ``--output`` if it lists.
    ``in_family``: an action of a family, whose parser holds the options' defaults."""
    sub = actions.add_parser(name, help=help, description=description or help, parents=[parser(not in_family)])
    if listing:
        output.add_option(sub)
    return sub


def kafka_config(args) -> dict:
    """kafka-python settings from the connection options; UsageError when they do not fit together."""
    config = {"bootstrap_servers": args.bootstrap_server.split(","),
              "security_protocol": args.security_protocol,
              "client_id": "kgate-cli"}
    sasl = args.security_protocol.startswith("SASL_")
    password = args.sasl_password if args.sasl_password is not None else os.environ.get(PASSWORD_VARIABLE)
    if sasl:
        if not args.sasl_username:
            raise UsageError(f"--security-protocol {args.security_protocol} needs --sasl-username")
        if not password:
            raise UsageError(f"--security-protocol {args.security_protocol} needs --sasl-password "
                             f"(or {PASSWORD_VARIABLE})")
        config.update(sasl_mechanism=args.sasl_mechanism or "PLAIN", sasl_plain_username=args.sasl_username,
                      sasl_plain_password=password)
    elif args.sasl_mechanism or args.sasl_username or args.sasl_password:
        raise UsageError("SASL options need --security-protocol SASL_PLAINTEXT or SASL_SSL")
    if args.ssl_cafile:
        if not args.security_protocol.endswith("SSL"):
            raise UsageError("--ssl-cafile needs --security-protocol SSL or SASL_SSL")
        if not os.path.isfile(args.ssl_cafile):
            raise UsageError(f"--ssl-cafile {args.ssl_cafile}: no such file")
        config["ssl_cafile"] = args.ssl_cafile
    if args.connect_timeout_ms <= 0:
        raise UsageError("--connect-timeout-ms must be positive")
    return config


class ConnectionWatch(logging.Handler):
    """Remembers why kafka-python's connections failed, and says so to ``on_lost``.

    kafka-python retries a failed bootstrap (refused connection, failed login) until
    its timeout and then raises only "Unable to bootstrap", and a consumer whose broker
    went away just polls nothing: the cause is only in its log.
    """

    def __init__(self, on_lost=None):
        super().__init__(logging.WARNING)
        self.on_lost = on_lost
        self.cause: BaseException | None = None
        self.auth_failure: BaseException | None = None

    def emit(self, record):
        for arg in record.args if isinstance(record.args, tuple) else ():
            if isinstance(arg, _AUTH_ERRORS):
                self.auth_failure = self.auth_failure or arg
            elif isinstance(arg, Errors.KafkaConnectionError):
                self.cause = arg
                if self.on_lost is not None:
                    self.on_lost(arg)

    def __enter__(self):
        logging.getLogger("kafka").addHandler(self)
        return self

    def __exit__(self, *exc):
        logging.getLogger("kafka").removeHandler(self)
        return False


def _all_refused(bootstrap: str) -> bool:
    """Whether every bootstrap address refuses a TCP connection right now: nothing
    listens there (a stopped broker, a wrong port), so waiting out the connect
    timeout cannot help."""
    for address in bootstrap.split(","):
        host, _, port = address.strip().rpartition(":")
        try:
            socket.create_connection((host.strip("[]"), int(port)), timeout=1).close()
        except ConnectionRefusedError:
            continue
        except (OSError, ValueError):
            return False
        return False
    return True


class _NetClients:
    """A ``kafka_client`` factory that keeps the network clients it makes, so the ones
    left behind by a bootstrap that gave up can be closed."""

    def __init__(self):
        self.made = []

    def __call__(self, **configs):
        client = KafkaNetClient(**configs)
        self.made.append(client)
        return client

    def close(self):
        for client in self.made:
            client.close()


def connect(args, factory, **settings):
    """``factory(**settings)`` (KafkaAdminClient, KafkaConsumer, KafkaProducer) connected
    with the connection options, or ConnectError within ``--connect-timeout-ms``.

    Bootstrap runs in growing slices (0.5 s, 1 s, 2 s, ...) with a one-second reconnect
    backoff: a wrong password is reported after one login attempt instead of after
    the whole timeout, and does not retry into the broker's failed-login limit.
    """
    config = {**kafka_config(args), "reconnect_backoff_ms": 1000, "reconnect_backoff_max_ms": 1000,
              **settings}
    deadline = time.monotonic() + args.connect_timeout_ms / 1000
    slice_ms = 500
    with ConnectionWatch() as watch:
        while True:
            remaining_ms = int((deadline - time.monotonic()) * 1000)
            clients = _NetClients()
            try:
                return factory(**config, kafka_client=clients,
                               bootstrap_timeout_ms=max(1, min(slice_ms, remaining_ms)))
            except Errors.KafkaTimeoutError:
                clients.close()
            if watch.auth_failure is not None:
                raise ConnectError(f"authentication failed at {args.bootstrap_server}: {reason(watch.auth_failure)}")
            if watch.cause is not None and _all_refused(args.bootstrap_server):
                raise ConnectError(f"cannot connect to {args.bootstrap_server}: connection refused")
            if time.monotonic() >= deadline:
                cause = f": {reason(watch.cause)}" if watch.cause is not None else ""
                raise ConnectError(f"cannot connect to {args.bootstrap_server} "
                                   f"within {args.connect_timeout_ms} ms{cause}")
            slice_ms *= 2


def admin(args) -> KafkaAdminClient:
    """An admin client on the connection options (a context manager: ``with admin(args) as client``)."""
    return connect(args, KafkaAdminClient)


def reason(exc) -> str:
    """An exception's (or an error string's) own words, without kafka-python's ``[Error N] XError:`` prefixes."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return re.sub(r"^(?:\[Error -?\d+\] |\w+Error: )+", "", text) or type(exc).__name__


def broker_error(code: int, subject: str, message: str | None = None) -> None:
    """Raise Failed for a non-zero Kafka error code about ``subject``."""
    if code:
        raise Failed(error_text(code, subject, message))


def error_text(code: int, subject: str, message: str | None = None) -> str:
    """The broker's message if it sent one, the code's name always (scripts grep for it)."""
    name = Errors.for_code(code).message or f"error {code}"
    return f"{message} ({name})" if message else f"{subject}: {name}"


def result_text(result: str, subject: str) -> str:
    """kafka-python's ``[Error N] XError: message`` result string as ``error_text`` words."""
    code = re.match(r"\[Error (-?\d+)\]", result)
    return error_text(int(code.group(1)), subject, reason(result)) if code else f"{subject}: {reason(result)}"


def error_named(class_name: str) -> str:
    """kafka-python reports some results as an error class name; give Kafka's code name."""
    error = getattr(Errors, class_name, None)
    return getattr(error, "message", None) or class_name


def key_values(pairs, option: str) -> dict:
    """``k=v`` arguments as a dict; UsageError naming the option for anything else."""
    out = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise UsageError(f"{option} expects KEY=VALUE, got {pair!r}")
        out[key] = value
    return out


def run(command, args, name: str) -> int:
    """Run ``command(args)`` and turn every failure into one line on stderr and its exit code.

    kafka-python's own exceptions are mapped here rather than in each command, so no
    command can leak a traceback for a case it did not think of.
    """
    try:
        command(args)
        return EXIT_OK
    except CommandError as exc:
        code, message = exc.exit_code, str(exc)
    except _AUTH_ERRORS as exc:
        code, message = EXIT_CONNECT, f"authentication failed: {reason(exc)}"
    except Errors.IncompatibleBrokerVersion as exc:
        code, message = EXIT_FAILED, f"the broker does not support this operation: {reason(exc)}"
    except Errors.BrokerResponseError as exc:
        code, message = EXIT_FAILED, f"{exc.message}: {exc.description}"
    except _CONNECT_ERRORS as exc:
        code, message = EXIT_CONNECT, f"lost the connection to the broker: {reason(exc)}"
    except Errors.KafkaError as exc:
        code, message = EXIT_FAILED, reason(exc)
    except BrokenPipeError:
        # The reader went away (``| head``): stop quietly, as other Unix tools do, and
        # point stdout at /dev/null so the interpreter's final flush does not fail too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # a bug here or in kafka-python: still one line, still non-zero
        code, message = EXIT_FAILED, f"unexpected {type(exc).__name__}: {exc}"
    print(f"{name}: {message}", file=sys.stderr)
    return code
