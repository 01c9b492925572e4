"""A JVM application of Kafka's ecosystem as a child process, for tests, run as its script in
Kafka's ``bin/`` runs it: a main class and one properties file.

The properties file and the log (stdout and stderr) go to a directory the caller owns; the
process is stopped by PID (SIGTERM, then SIGKILL). The jars come from ``scripts/setup-ecosystem``.
"""
import subprocess
from pathlib import Path

from tests.support.broker_process import terminate

INSTALL = Path(__file__).resolve().parents[2] / ".cache" / "ecosystem"
# Small and quick to start: these share this machine with the brokers and the suite, and a test's
# application lives too short a time for C2's compilations to pay back (C1 only). slf4j-simple
# prints times on its log lines, to set them beside the test's and the brokers'.
JVM = ["-Xms128m", "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
       "-Dorg.slf4j.simpleLogger.showDateTime=true", "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS"]


class JavaApplication:
    """``main`` on ``classpath``, given ``directory/<name>.properties`` written from ``settings``."""

    def __init__(self, directory: Path, name: str, classpath: str, main: str, settings: dict,
                 jvm: list[str] | None = None):
        """``jvm``: the JVM's options, JVM's small test ones by default."""
        self.directory = directory
        self.name, self.classpath, self.main = name, classpath, main
        self.settings = settings
        self.jvm = JVM if jvm is None else jvm
        self.log_path = directory / f"{name}.log"
        self.process: subprocess.Popen | None = None

    def start(self):
        self.directory.mkdir(parents=True, exist_ok=True)
        config = self.directory / f"{self.name}.properties"
        config.write_text("".join(f"{key}={value}\n" for key, value in self.settings.items()))
        command = ["java", *self.jvm, "-cp", self.classpath, self.main, str(config)]
        with open(self.log_path, "ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        return self

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        """kill -9, a crash: the application leaves its group only when its session times out,
        and its open transactions stay open until a successor fences them or they time out."""
        self.process.kill()
        self.process.wait(30)

    def stop(self) -> None:
        if self.process is not None:
            terminate(self.process, 30)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")
