"""Cluster metadata: the store interface, its implementations, and cluster state on top."""
