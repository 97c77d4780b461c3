"""The dashboard's terminal UI (textual): one screen per F-key, the selected node's snapshot on it.

The app owns the API client and one polling worker; both end when the app exits. Every
``interval`` seconds every node is polled at once; the selected node's screens and the log of the
selected service are redrawn from the result. Switching node or screen redraws at once from the
last snapshot and fetches that node's log without waiting for the next poll.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.widgets import ContentSwitcher, DataTable, Log, Static

from ichor.cli.dashboard import _render
from ichor.cli.dashboard._data import NodeSnapshot, NodeSource

DEFAULT_LOG_SERVICE = "machined"


class DashboardApp(App[None]):
    """``talosctl dashboard``. ``connect`` opens the client (in the app's event loop) and returns
    ``(client, sources)``, one source per node, in the order the node keys walk them."""

    TITLE = "talosctl dashboard"
    CSS = """
    #header { height: 1; }
    #tabs { height: 1; }
    #keys { height: 1; dock: bottom; color: $text-muted; }
    #switcher { height: 1fr; }
    #summary-table { width: 56; height: 1fr; }
    #logs-box { width: 1fr; }
    #logs-title { height: 1; text-style: bold; }
    #logs { height: 1fr; border: round $primary; }
    #monitor-facts { height: auto; }
    .graph-label { height: 1; }
    .graph { height: 3; margin-bottom: 1; }
    #processes { height: 1fr; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("f1", "show('summary')", "Summary"),
        Binding("f2", "show('monitor')", "Monitor"),
        Binding("f3", "show('network')", "Network"),
        Binding("f4", "show('config')", "Config URL"),
        # Priority: the focused process table would take left/right for scrolling sideways.
        Binding("left,h", "node(-1)", "previous node", priority=True),
        Binding("right,l", "node(1)", "next node", priority=True),
        Binding("left_square_bracket", "log_service(-1)", "previous log"),
        Binding("right_square_bracket", "log_service(1)", "next log"),
        Binding("j", "scroll_processes(1)", show=False),
        Binding("k", "scroll_processes(-1)", show=False),
        Binding("q,ctrl+c", "quit", "quit"),
    ]

    def __init__(
        self,
        connect: Callable[[], tuple[Any, list[NodeSource]]],
        *,
        interval: float,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        super().__init__()
        self._connect = connect
        self.interval = interval
        self._now = now
        self.client: Any = None
        self.sources: list[NodeSource] = []
        self.snapshots: dict[str, NodeSnapshot] = {}
        self.selected = 0
        self.screen_id = "summary"
        self.log_service = DEFAULT_LOG_SERVICE
        self.polls = 0
        """Completed poll rounds (tests wait on it)."""
        self.log_lines: list[str] = []

    # --- layout ----------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield Static(id="header")
        yield Static(id="tabs")
        with ContentSwitcher(initial="summary", id="switcher"):
            with Horizontal(id="summary"):
                yield VerticalScroll(Static(id="summary-body"), id="summary-table")
                with Vertical(id="logs-box"):
                    yield Static(id="logs-title")
                    yield Log(id="logs", auto_scroll=True)
            with Vertical(id="monitor"):
                yield Static(id="monitor-facts")
                yield Static("CPU, node processes (% of one core)", classes="graph-label")
                yield Static(id="cpu-graph", classes="graph")
                yield Static("RAM (% of host memory)", classes="graph-label")
                yield Static(id="mem-graph", classes="graph")
                yield DataTable(id="processes", cursor_type="row", zebra_stripes=True)
            yield VerticalScroll(Static(id="network-body"), id="network")
            yield VerticalScroll(Static(id="config-body"), id="config")
        yield Static(_render.KEYS, id="keys")

    def on_mount(self) -> None:
        self.client, self.sources = self._connect()
        self.query_one("#processes", DataTable).add_columns(*_render.PROCESS_COLUMNS)
        self._redraw()
        self.run_worker(self._poll_forever(), name="poll", group="poll", exclusive=True)

    async def on_unmount(self) -> None:
        # aclose, not close: TLS closes in loop callbacks, and a loop that ends first leaves the
        # sockets open (an in-process dashboard, as in the tests, then leaks them).
        if self.client is not None:
            client, self.client = self.client, None
            await client.aclose()

    # --- data ------------------------------------------------------------------------------------

    @property
    def node(self) -> str:
        return self.sources[self.selected].node if self.sources else ""

    async def _poll_forever(self) -> None:
        while True:
            await self.poll_once()
            await asyncio.sleep(self.interval)

    async def _poll_node(self, source: NodeSource) -> NodeSnapshot:
        # A node that does not answer within a few intervals is shown as such; the others go on.
        try:
            async with asyncio.timeout(max(3 * self.interval, 10)):
                return await source.poll()
        except TimeoutError:
            return NodeSnapshot(node=source.node, errors={"node": "did not answer in time"})

    async def poll_once(self) -> None:
        snapshots = await asyncio.gather(*(self._poll_node(s) for s in self.sources))
        self.snapshots = {s.node: s for s in snapshots}
        await self._fetch_logs()
        self.polls += 1
        self._redraw()

    async def _fetch_logs(self) -> None:
        from ichor.client import ClientError

        if not self.sources:
            return
        source, service = self.sources[self.selected], self.log_service
        try:
            async with asyncio.timeout(max(3 * self.interval, 10)):
                lines = await source.logs(service)
        except ClientError as exc:
            lines = [f"error: {str(exc).splitlines()[0]}"]
        except TimeoutError:
            lines = [f"error: {source.node} did not send the {service} log in time"]
        if (source.node, service) == (self.node, self.log_service):  # still what is on screen
            self.log_lines = lines
            try:
                log = self.query_one("#logs", Log)
            except NoMatches:  # the app is closing: the screen is gone
                return
            log.clear()
            log.write_lines(lines or [f"(the {service} log is empty)"])

    # --- drawing ---------------------------------------------------------------------------------

    def _redraw(self) -> None:
        with contextlib.suppress(NoMatches):  # a poll that ends while the app closes has no screen
            self._draw()

    def _draw(self) -> None:
        snap = self.snapshots.get(self.node)
        nodes = [s.node for s in self.sources]
        self.query_one("#header", Static).update(_render.header(snap, self.node, self._now()))
        self.query_one("#tabs", Static).update(_render.tabs(self.screen_id, nodes, self.selected))
        self.query_one("#logs-title", Static).update(f"Logs: {self.log_service} on {self.node}")
        if snap is None:
            return
        if "node" in snap.errors:
            message = f"{self.node}: {snap.errors['node']}"
            for body in ("#summary-body", "#network-body", "#config-body", "#monitor-facts"):
                self.query_one(body, Static).update(message)
            self.query_one("#processes", DataTable).clear()
            return
        self.query_one("#summary-body", Static).update(_render.summary(snap))
        self.query_one("#network-body", Static).update(_render.network(snap))
        self.query_one("#config-body", Static).update(_render.config(snap, self.node))
        self.query_one("#monitor-facts", Static).update(_render.monitor_facts(snap))
        source = self.sources[self.selected]
        for graph_id, history in (("#cpu-graph", source.cpu_history), ("#mem-graph", source.memory_history)):
            widget = self.query_one(graph_id, Static)
            widget.update(_render.graph(list(history), widget.size.width or self.size.width))
        table = self.query_one("#processes", DataTable)
        row = table.cursor_row
        table.clear()
        table.add_rows(_render.process_rows(snap))
        if table.row_count:
            table.move_cursor(row=min(row, table.row_count - 1))

    # --- keys ------------------------------------------------------------------------------------

    def action_show(self, screen_id: str) -> None:
        self.screen_id = screen_id
        self.query_one("#switcher", ContentSwitcher).current = screen_id
        if screen_id == "monitor":
            self.query_one("#processes", DataTable).focus()
        self._redraw()

    def action_node(self, step: int) -> None:
        if not self.sources:
            return
        self.selected = (self.selected + step) % len(self.sources)
        self._redraw()
        self.run_worker(self._fetch_logs(), group="logs", exclusive=True)

    def action_log_service(self, step: int) -> None:
        snap = self.snapshots.get(self.node)
        # A Skipped service never ran and has no log: the walk passes over it.
        ids = sorted(s.id for s in snap.services if s.state != "Skipped") if snap is not None else []
        if not ids:
            return
        position = ids.index(self.log_service) if self.log_service in ids else -step
        self.log_service = ids[(position + step) % len(ids)]
        self._redraw()
        self.run_worker(self._fetch_logs(), group="logs", exclusive=True)

    def action_scroll_processes(self, step: int) -> None:
        table = self.query_one("#processes", DataTable)
        if table.row_count:
            table.move_cursor(row=max(0, min(table.cursor_row + step, table.row_count - 1)))
