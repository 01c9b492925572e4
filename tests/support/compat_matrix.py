"""The compatibility matrix's modules, for tests: compat-matrix/ is a folder of scripts
(its name has a hyphen), so its directory is put on the import path here, once.

Tests drive old clients through the matrix's own drivers (``clients``) rather than
copies of them, and the CI subset runs rows through the matrix's runner (``run``).
"""
import os
import sys

MATRIX = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "compat-matrix")
if MATRIX not in sys.path:
    sys.path.append(MATRIX)

import cells  # noqa: E402
import clients  # noqa: E402
import render  # noqa: E402
import rows  # noqa: E402
import run  # noqa: E402

__all__ = ["MATRIX", "cells", "clients", "render", "rows", "run"]
