"""machined: the node agent — everything a running node knows and does.

A node's knowledge lives in resources kept by the controller runtime in :mod:`ichor.machined.cosi`;
controllers turn configuration into resources. This package may import from ``ichor.machinery`` but
never from ``ichor.cli`` or the API client.
"""
