"""An optional dependency a chosen feature needs, not installed.

The broker's extras (``pip install 'kgate-broker[s3]'``) keep clients of the file store
free of an object-store client; a broker configured for what an extra brings says in
one line which extra to install, rather than ending in an import traceback.
"""


class MissingExtra(ImportError):
    def __init__(self, feature: str, extra: str, module: str | None):
        super().__init__(f"{feature} needs the {extra} extra ({module} is not installed): "
                         f"pip install 'kgate-broker[{extra}]'", name=module)
