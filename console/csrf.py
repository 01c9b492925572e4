"""Protection of the console's write actions against cross-site requests.

Each browser gets a random session cookie (HttpOnly, SameSite=Strict) on its first
page; every form carries a token that is an HMAC of that cookie under a key made when
the process starts. A POST passes only with the cookie, the matching token and, when the
browser sends one, an Origin naming this console: a page on another site can neither
read the token nor, with SameSite=Strict, send the cookie."""
import hashlib
import hmac
import secrets


class CsrfGuard:
    def __init__(self, port: int):
        self._key = secrets.token_bytes(32)
        # Browsers send a host's cookies to every port of it: each console names its own.
        self.cookie_name = f"kgate_console_session_{port}"

    @staticmethod
    def new_session() -> str:
        return secrets.token_urlsafe(24)

    def token(self, session: str) -> str:
        return hmac.new(self._key, session.encode(), hashlib.sha256).hexdigest()

    def allows(self, session: str | None, token: str | None, origin: str | None, host: str | None) -> bool:
        if not session or not token or not hmac.compare_digest(self.token(session), token):
            return False
        return origin is None or origin in (f"http://{host}", f"https://{host}")

    def cookie(self, session: str) -> str:
        return f"{self.cookie_name}={session}; Path=/; HttpOnly; SameSite=Strict"
