"""Runs a kgate broker that serves version 0 only of kgate's inter-broker APIs with a version 1
(KgateProduceReference, KgateReadEnd), as a broker not upgraded yet does in a rolling upgrade.

Used as a broker's wrapper command (tests/support/broker_process.py): called as
``python v0_peer_broker.py PYTHON -m kgate ARGS...``, it narrows kgate's table of internal
versions, which both ApiVersions (to peers) and the request decoder read, and runs the real
broker with ARGS in this process, so the broker's PID is this one.
"""
import runpy
import sys

from kgate.protocol.api_versions import INTERNAL, KGATE_PRODUCE_REFERENCE, KGATE_READ_END

INTERNAL.update({KGATE_PRODUCE_REFERENCE: (0, 0), KGATE_READ_END: (0, 0)})
_, _python, _module_flag, module, *arguments = sys.argv
sys.argv = [module, *arguments]
runpy.run_module(module, run_name="__main__", alter_sys=True)
