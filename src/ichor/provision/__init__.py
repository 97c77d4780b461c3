"""Local clusters of node processes: ``talosctl cluster create|show|destroy`` (provisioner ``process``).

Each node is a machined process with its own root directory and loopback address, run by a
launcher (:mod:`ichor.provision.launcher`) that restarts it when it reboots, like a VM's firmware.
A cluster's state directory (``~/.talos/clusters/<name>``) holds every node's root and logs, and
``cluster.yaml`` describing them (:mod:`._record`). Every process of the cluster carries the state
directory in its environment, so show and destroy find all of them, even one whose parent died
(:mod:`._processes`); destroy ends them by PID and removes the directory only once all are gone
(:mod:`._teardown`). create is :mod:`._cluster`.

Errors are :class:`~ichor.machinery.errors.MachineryError` s with hints; this package never
signals a process that is not the cluster's (checked by PID and start time).
"""
