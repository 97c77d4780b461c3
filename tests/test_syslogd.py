"""syslogd (004:724-728): Talos's parser output for RFC 3164 and RFC 5424 (the cases of Talos
1.7.6's own parser test, ``internal/app/syslogd/internal/parser/parse_test.go``), and the
``/dev/log`` datagram socket writing one JSON line per message."""

from __future__ import annotations

import asyncio
import io
import os
import socket
from datetime import UTC, datetime
from pathlib import Path

import pytest

from ichor.machined import syslogd
from ichor.machined.gojson import go_json
from ichor.machined.platform import Layout
from ichor.machined.services.syslogd import syslogd_service


def _now() -> datetime:
    return datetime(2024, 6, 1, 8, 0, 0, 123456, tzinfo=UTC)


def _json(data: bytes) -> str | None:
    fields = syslogd.parse(data, now=_now)
    return None if fields is None else go_json(fields)


KATA = (
    'time="2024-02-16T17:54:19.857755073Z" level=warning msg="Could not add /dev/mshv to the devices cgroup'
)
KATA_JSON = 'time=\\"2024-02-16T17:54:19.857755073Z\\" level=warning msg=\\"Could not add /dev/mshv to the devices cgroup'


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (f"<4>Feb 16 17:54:19 {KATA}",
         f'{{"content":"{KATA_JSON}","facility":0,"hostname":"localhost","priority":4,"severity":4,"tag":"unknown","timestamp":"2024-02-16T17:54:19Z"}}'),
        ("<6>Mar  3 12:55:18 syslogd_test[834097]: Hello, syslogd!",
         '{"content":"Hello, syslogd!","facility":0,"hostname":"localhost","priority":6,"severity":6,"tag":"syslogd_test","timestamp":"2024-03-03T12:55:18Z"}'),
        ("<6>Mar  3 12:55:18 Hello, syslogd!",
         '{"content":"Hello, syslogd!","facility":0,"hostname":"localhost","priority":6,"severity":6,"tag":"unknown","timestamp":"2024-03-03T12:55:18Z"}'),
        (f"<4>Feb 16 17:54:19 kata[2569]: {KATA}",
         f'{{"content":"{KATA_JSON}","facility":0,"hostname":"localhost","priority":4,"severity":4,"tag":"kata","timestamp":"2024-02-16T17:54:19Z"}}'),
        (f"<4>Feb 16 17:54:19 hostname kata[2569]: {KATA}",
         f'{{"content":"{KATA_JSON}","facility":0,"hostname":"hostname","priority":4,"severity":4,"tag":"kata","timestamp":"2024-02-16T17:54:19Z"}}'),
        ('<165>1 2003-10-11T22:14:15.003Z mymachine.example.com evntslog - ID47 [exampleSDID@32473 iut="3" eventSource="Application" eventID="1011"] An application event log entry...',
         '{"app_name":"evntslog","facility":20,"hostname":"mymachine.example.com","message":"An application event log entry...","msg_id":"ID47","priority":165,"proc_id":"-","severity":5,"structured_data":"[exampleSDID@32473 iut=\\"3\\" eventSource=\\"Application\\" eventID=\\"1011\\"]","timestamp":"2003-10-11T22:14:15.003Z","version":1}'),
    ],
)  # fmt: skip
def test_talos_parser_cases(line: str, expected: str) -> None:
    # Talos's test ran in 2024: an RFC 3164 timestamp takes the current year.
    assert _json(line.encode()) == expected


def test_rfc5424_keeps_its_zone_and_nil_values() -> None:
    fields = syslogd.parse(b"<34>1 2003-08-24T05:14:15.000003-07:00 - su 123 - - 'su root' failed", now=_now)
    assert fields is not None
    assert (fields["timestamp"], fields["hostname"], fields["structured_data"], fields["message"]) == (
        "2003-08-24T05:14:15.000003-07:00", "-", "-", "'su root' failed")  # fmt: skip
    assert (fields["facility"], fields["severity"], fields["proc_id"]) == (4, 2, "123")


def test_go_json_escapes_html_characters_as_go_does() -> None:
    assert go_json({"b": "<a & b>", "a": 1}) == '{"a":1,"b":"\\u003ca \\u0026 b\\u003e"}'


@pytest.mark.parametrize(
    "data", [b"no priority", b"<999>Feb 16 17:54:19 x", b"<13>1 2003-10-11T22:14:15Z host"]
)
def test_what_is_not_syslog_is_skipped(data: bytes) -> None:
    assert syslogd.parse(data, now=_now) is None


def test_no_timestamp_takes_the_time_of_receipt() -> None:
    fields = syslogd.parse(b"<14>hello from python", now=_now)  # logging.handlers.SysLogHandler's form
    assert fields == {"priority": 14, "facility": 1, "severity": 6, "hostname": "localhost", "tag": "unknown",
                      "content": "hello from python", "timestamp": "2024-06-01T08:00:00Z"}  # fmt: skip


def test_socket_receives_datagrams_as_json_lines(tmp_path: Path) -> None:
    path = tmp_path / "dev" / "log"
    log = io.StringIO()

    async def main() -> None:
        server = asyncio.create_task(syslogd.serve(path, log, now=_now))
        try:
            while not path.is_socket():
                await asyncio.sleep(0.01)
            assert path.stat().st_mode & 0o777 == 0o666  # any user's program may log
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as client:
                client.sendto(b"<13>Jun  1 07:59:59 app[7]: first", os.fspath(path))
                client.sendto(b"not syslog", os.fspath(path))
                client.sendto(b"<13>1 2024-06-01T07:59:59Z h app 7 m - second", os.fspath(path))
            while log.getvalue().count("\n") < 2:
                await asyncio.sleep(0.01)
        finally:
            server.cancel()
            await asyncio.gather(server, return_exceptions=True)

    asyncio.run(asyncio.wait_for(main(), 5))
    lines = log.getvalue().splitlines()
    assert [line.split('"content":"')[-1].split('"')[0] for line in lines[:1]] == ["first"]
    assert '"message":"second"' in lines[1]
    assert not path.exists()  # removed when the service stops


def test_an_empty_directory_in_the_way_is_replaced(tmp_path: Path) -> None:
    # An extension's bind mount of a missing /dev/log source makes a directory there (Talos's runner too).
    (tmp_path / "log").mkdir()
    with syslogd.bind(tmp_path / "log"):
        assert (tmp_path / "log").is_socket()


def test_service_is_talos_syslogd_on_the_nodes_dev_log(tmp_path: Path) -> None:
    service = syslogd_service(Layout(tmp_path, "127.0.0.1"))
    # Talos's syslogd depends on machined, which Talos starts early; Ichor's machined service starts
    # with the config, so the early syslogd depends on nothing (it would wait for the config otherwise).
    assert (service.id, service.depends_on) == ("syslogd", ())
