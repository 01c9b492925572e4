"""What every server-side SASL mechanism looks like to the connection that drives it."""
from abc import ABC, abstractmethod


class AuthenticationFailed(Exception):
    """The client failed to authenticate; the message is safe to send back to it."""


class Mechanism(ABC):
    name: str
    # Set once the exchange has succeeded: the authenticated user.
    principal: str | None = None

    @property
    def complete(self) -> bool:
        return self.principal is not None

    @abstractmethod
    def claimed_user(self, token: bytes) -> str | None:
        """The user ``token`` claims to be, read before any credential is checked (None: it names none).

        The login limiter keys on it, so a locked-out user's password is never tried.
        """

    @abstractmethod
    async def evaluate(self, token: bytes) -> bytes:
        """The server's answer to one client token; raises AuthenticationFailed."""
