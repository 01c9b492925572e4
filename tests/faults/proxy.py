"""A TCP proxy that delays and drops traffic on command: this kernel has no netem qdisc, so
delay and loss between namespaces happen here, in userspace.

It listens on LISTEN and forwards each connection to TARGET, chunk by chunk; a control
socket (a Unix socket path, which any namespace can reach) takes JSON lines such as
``{"delay_ms": 200, "jitter_ms": 100, "loss": 0.02}``. Delay holds each chunk back, in
order; loss is TCP's kind as an application sees it: with that probability per chunk the
connection is reset, both ways, mid-stream (a TCP proxy cannot drop a segment and keep the
stream). Chosen over toxiproxy because it is forty lines in the project's own language and
needs no Go toolchain.

    python -m tests.faults.proxy LISTEN_HOST:PORT TARGET_HOST:PORT CONTROL_PATH
"""
import asyncio
import json
import random
import sys

settings = {"delay_ms": 0.0, "jitter_ms": 0.0, "loss": 0.0}


async def _pump(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(65536):
            if random.random() < settings["loss"]:
                for side in (writer, peer):
                    side.transport.abort()
                return
            delay = settings["delay_ms"] + random.uniform(0, settings["jitter_ms"])
            if delay:
                await asyncio.sleep(delay / 1000)
            writer.write(chunk)
            await writer.drain()
    except OSError:
        pass
    finally:
        writer.close()


async def _connection(target: tuple[str, int], client_reader, client_writer) -> None:
    try:
        server_reader, server_writer = await asyncio.open_connection(*target)
    except OSError:
        client_writer.transport.abort()
        return
    await asyncio.gather(_pump(client_reader, server_writer, client_writer),
                         _pump(server_reader, client_writer, server_writer))


async def _control(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while line := await reader.readline():
        settings.update({k: float(v) for k, v in json.loads(line).items() if k in settings})
        writer.write(b"ok\n")
        await writer.drain()
    writer.close()


async def main(listen: str, target: str, control: str) -> None:
    host, _, port = listen.rpartition(":")
    to_host, _, to_port = target.rpartition(":")
    server = await asyncio.start_server(lambda r, w: _connection((to_host, int(to_port)), r, w), host, int(port))
    controller = await asyncio.start_unix_server(_control, control)
    print("proxy ready", flush=True)
    async with server, controller:
        await asyncio.gather(server.serve_forever(), controller.serve_forever())


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
