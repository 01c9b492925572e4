"""Share groups (KIP-932): records of a topic partition handed out one by one to the members
of a share group, each locked, acknowledged and redelivered on its own."""
