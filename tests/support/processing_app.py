"""A processing application for ``kgate process --app tests.support.processing_app:app`` in tests.

Settings come from the environment (the test that starts the process sets them). Each
handled record is appended to KGATE_TEST_LOG as ``partition offset`` with one write
system call, so the log survives a kill -9 of the process exactly as far as handlers got.
"""
import asyncio
import os

from kgate.processing import Processor
from tests.support.processing import CONSUMER_CONFIG


def app() -> Processor:
    env = os.environ
    processor = Processor(env["KGATE_TEST_BOOTSTRAP"], env["KGATE_TEST_GROUP"], [env["KGATE_TEST_TOPIC"]],
                          concurrency=int(env.get("KGATE_TEST_CONCURRENCY", "100")),
                          max_records=int(env.get("KGATE_TEST_MAX_RECORDS", "10000")),
                          max_bytes=int(env.get("KGATE_TEST_MAX_BYTES", str(64 * 1024 * 1024))),
                          commit_interval_ms=int(env.get("KGATE_TEST_COMMIT_INTERVAL_MS", "100")),
                          config=CONSUMER_CONFIG, mode=env.get("KGATE_TEST_MODE", "keyed"))
    log = os.open(env["KGATE_TEST_LOG"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    pause = float(env.get("KGATE_TEST_HANDLER_MS", "1")) / 1000
    # After this many records every handler waits for ever: a run a test kills cannot finish first.
    stall_after = int(env.get("KGATE_TEST_STALL_AFTER", "-1"))
    handled = [0]
    never = asyncio.Event()

    @processor.handler
    async def handle(record):
        if 0 <= stall_after <= handled[0]:
            await never.wait()
        await asyncio.sleep(pause)
        handled[0] += 1
        os.write(log, b"%d %d\n" % (record.partition, record.offset))

    return processor
