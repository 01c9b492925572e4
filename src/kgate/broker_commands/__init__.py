"""The broker's own commands (``kgate serve``, ``users``, ``storage``): they act on a broker
and its metadata store, so they see the server (``kgate.gateway``), which never sees them;
the composition root (``kgate.command``) puts them beside the client commands."""
