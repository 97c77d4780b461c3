"""``talosctl dashboard``: a terminal dashboard of one or more nodes, as Talos's.

* ``_data``: polls a node through the Talos API into a snapshot (no UI; what is not served is
  ``n/a`` with the reason);
* ``_render``: a snapshot as the rich renderables of each screen (no textual);
* ``_app``: the textual app: F1-F4 screens, node and log switching, the polling worker.

textual is imported only when the dashboard runs (``_app``), never when the CLI starts.
"""

__all__: list[str] = []
