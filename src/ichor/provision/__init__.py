"""Local clusters of node processes: ``talosctl cluster create|show|destroy`` (provisioner ``process``).

Each node is a machined process with its own root directory and loopback address, run by a
launcher (:mod:`ichor.provision.launcher`) that restarts it when it reboots, like a VM's firmware.
A cluster's state directory (``~/.talos/clusters/<name>``) holds every node's root, logs and PIDs,
and ``cluster.yaml`` describing them; destroy stops every process by PID and removes it.

Errors are :class:`~ichor.machinery.errors.MachineryError` s with hints; this package never
kills a process it did not record.
"""
