"""A record's bytes as a person reads them: text, pretty JSON or hex.

``auto`` picks JSON when the bytes parse as JSON, text when they are UTF-8, and hex
otherwise, so a topic of mixed payloads shows each record in its best form."""
import json

FORMATS = ("auto", "text", "json", "hex")
HEX_LIMIT = 4096  # bytes shown in hex; a longer value says how much is left out


def show(data: bytes | None, form: str = "auto") -> str:
    if data is None:
        return "(null)"
    if form == "hex" or (form == "auto" and not _is_text(data)):
        shown = data[:HEX_LIMIT].hex(" ")
        return shown + (f" ... ({len(data) - HEX_LIMIT} more bytes)" if len(data) > HEX_LIMIT else "")
    text = data.decode("utf-8", errors="replace")
    if form in ("json", "auto"):
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        except ValueError:
            if form == "json":
                return f"(not JSON) {text}"
    return text


def _is_text(data: bytes) -> bool:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return all(ch.isprintable() or ch in "\n\r\t" for ch in text)
