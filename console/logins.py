"""Who the console talks to the cluster as.

Started with a SASL security protocol but no ``--sasl-username``, the console asks each
browser for the cluster's own SASL credentials and keeps a cluster connection per login
(session), so the cluster's ACLs decide what each person sees and may change; nothing is
stored but the open connection. Started with a username (or without SASL), everyone
shares the one connection the command line describes."""
import argparse
import collections
import threading

from .cluster_reader import ClusterReader

MAX_LOGINS = 100  # sessions with an open cluster connection; the oldest is closed past it


class SharedLogin:
    """Everyone uses the connection of the command line's options."""

    asks_credentials = False

    def __init__(self, args: argparse.Namespace):
        self._reader = ClusterReader(args)

    def reader(self, session: str | None) -> ClusterReader | None:
        return self._reader

    def close(self) -> None:
        self._reader.close()


class SaslLogins:
    """A cluster connection per browser session, made with the credentials it logged in with."""

    asks_credentials = True

    def __init__(self, args: argparse.Namespace):
        self._args = args
        self._lock = threading.Lock()
        self._readers: collections.OrderedDict[str, ClusterReader] = collections.OrderedDict()

    def reader(self, session: str | None) -> ClusterReader | None:
        with self._lock:
            return self._readers.get(session) if session else None

    def login(self, session: str, username: str, password: str) -> None:
        """Connect as ``username``; ConnectError (refused credentials, unreachable cluster) leaves no login."""
        reader = ClusterReader(argparse.Namespace(**{**vars(self._args), "sasl_username": username,
                                                    "sasl_password": password}))
        try:
            reader.call(lambda admin: admin.describe_cluster())
        except Exception:
            reader.close()
            raise
        with self._lock:
            previous = self._readers.pop(session, None)
            self._readers[session] = reader
            evicted = [self._readers.popitem(last=False)[1] for _ in range(len(self._readers) - MAX_LOGINS)]
        for old in [previous, *evicted]:
            if old is not None:
                old.close()

    def logout(self, session: str | None) -> None:
        with self._lock:
            reader = self._readers.pop(session, None) if session else None
        if reader is not None:
            reader.close()

    def close(self) -> None:
        with self._lock:
            readers, self._readers = list(self._readers.values()), collections.OrderedDict()
        for reader in readers:
            reader.close()


def for_arguments(args: argparse.Namespace):
    if args.security_protocol.startswith("SASL_") and not args.sasl_username:
        return SaslLogins(args)
    return SharedLogin(args)
