"""ichor.client without a network: endpoint normalisation, one-to-many replies, tables, errors, expiry."""

from __future__ import annotations

import base64
import functools
import hashlib
import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ichor.api.gen.common import common_pb2
from ichor.api.gen.machine import machine_pb2
from ichor.cli._root import GlobalOptions
from ichor.client import (
    AllNodesFailedError,
    Client,
    ClientError,
    NodeLineBuffer,
    NoEndpointsError,
    NoNodesError,
    expiry_warning,
    format_tabbed,
    node_replies,
    parse_endpoint,
    parse_endpoints,
    parse_fingerprint,
    prefix_lines,
    render_table,
    roles_for,
    warn_if_expiring,
)
from ichor.client._channel import CallContext, FailoverChannel, translate_error
from ichor.machinery.clientconfig import Context, TalosConfig, issue_admin_context
from ichor.machinery.errors import ClientConfigError
from ichor.machinery.secrets import SecretsBundle

# --------------------------------------------------------------------------- endpoints


@pytest.mark.parametrize(
    ("raw", "address"),
    [
        ("10.5.0.2", "10.5.0.2:50000"),
        ("10.5.0.2:50001", "10.5.0.2:50001"),
        ("node.example", "node.example:50000"),
        ("https://node.example", "node.example:443"),
        ("https://node.example:6443", "node.example:6443"),
        ("tcp://10.5.0.2", "10.5.0.2:50000"),
        ("grpc://10.5.0.2:1234", "10.5.0.2:1234"),
        ("::1", "[::1]:50000"),
        ("[::1]", "[::1]:50000"),
        ("[fd00::2]:50001", "[fd00::2]:50001"),
        (" 10.5.0.2 ", "10.5.0.2:50000"),
    ],
)
def test_endpoints_are_normalised_like_talosctl(raw: str, address: str) -> None:
    assert parse_endpoint(raw).address == address


@pytest.mark.parametrize("raw", ["10.5.0.2:http", "10.5.0.2:0", "10.5.0.2:70000", "[::1:50000", ":50000"])
def test_bad_endpoints_are_refused_by_name(raw: str) -> None:
    with pytest.raises(ClientError, match="invalid endpoint") as err:
        parse_endpoint(raw)
    assert repr(raw) in str(err.value)


def test_endpoint_lists_split_commas_and_drop_duplicates() -> None:
    eps = parse_endpoints(["10.5.0.2,10.5.0.3", "10.5.0.2:50000", " "])
    assert [e.address for e in eps] == ["10.5.0.2:50000", "10.5.0.3:50000"]


@given(st.ip_addresses(), st.one_of(st.none(), st.integers(1, 65535)))
def test_endpoint_host_is_what_the_certificate_must_name(ip: object, port: int | None) -> None:
    host = str(ip)
    text = host if port is None else (f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
    ep = parse_endpoint(text)
    assert ep.host == host and ep.port == (port or 50000) and ep.is_ip


def test_dial_order_is_shuffled_but_complete() -> None:
    import asyncio
    import ssl

    eps = parse_endpoints([f"10.0.0.{i}" for i in range(1, 7)])

    async def order(seed: int) -> list[str]:
        channel = FailoverChannel(
            eps, ssl.create_default_context(), call=CallContext(), connect_timeout=1, rng=random.Random(seed)
        )
        return [e.address for e in channel.dial_order]

    orders = {tuple(asyncio.run(order(seed))) for seed in range(10)}
    assert len(orders) > 1
    assert all(sorted(o) == sorted(e.address for e in eps) for o in orders)


# --------------------------------------------------------------------------- one-to-many


def _reply_with_one_failure() -> machine_pb2.VersionResponse:
    good = machine_pb2.Version(
        metadata=common_pb2.Metadata(hostname="10.5.0.2"), version=machine_pb2.VersionInfo(tag="v1.7.6")
    )
    bad = machine_pb2.Version()
    bad.metadata.hostname = "10.5.0.3"
    bad.metadata.error = "rpc error: code = Unavailable desc = connection refused"
    bad.metadata.status.code = 14
    bad.metadata.status.message = "connection refused"
    # On the wire the failure is a common.EmptyResponse element; decode it as the RPC's type, as talosctl does.
    return machine_pb2.VersionResponse.FromString(
        machine_pb2.VersionResponse(messages=[good]).SerializeToString()
        + machine_pb2.VersionResponse(messages=[bad]).SerializeToString()
    )


def test_one_to_many_reply_splits_good_messages_and_node_errors() -> None:
    replies = node_replies(_reply_with_one_failure())
    assert [(node, m.version.tag) for node, m in replies] == [("10.5.0.2", "v1.7.6")]
    assert [str(e) for e in replies.errors] == [
        "10.5.0.3: rpc error: code = Unavailable desc = connection refused"
    ]
    assert replies.errors[0].code_name == "Unavailable"
    assert replies.check() is replies  # one node answered: the command goes on and warns
    assert replies.warning() == (
        "1 error occurred:\n\t* 10.5.0.3: rpc error: code = Unavailable desc = connection refused"
    )


def test_error_without_status_is_printed_verbatim_and_all_failed_raises() -> None:
    only_bad = common_pb2.EmptyResponse(
        messages=[common_pb2.Empty(metadata=common_pb2.Metadata(hostname="n1", error="boom"))]
    ).SerializeToString()
    replies = node_replies(machine_pb2.VersionResponse.FromString(only_bad))
    with pytest.raises(AllNodesFailedError) as err:
        replies.check("error getting version")
    assert str(err.value) == "error getting version: 1 error occurred:\n\t* n1: boom"


def test_messages_without_hostname_take_the_peer_name() -> None:
    reply = machine_pb2.VersionResponse(
        messages=[machine_pb2.Version(version=machine_pb2.VersionInfo(tag="x"))]
    )
    assert [n for n, _ in node_replies(reply, fallback_node="192.168.1.5")] == ["192.168.1.5"]


# --------------------------------------------------------------------------- output


def test_table_matches_go_tabwriter_padding_3() -> None:
    out = render_table(
        [["NODE", "ID", "STATE"], ["10.5.0.2", "apid", "Running"], ["10.5.0.22", "etcd", "Up"]]
    )
    assert out == (
        "NODE        ID     STATE\n"
        "10.5.0.2    apid   Running\n"
        "10.5.0.22   etcd   Up\n"
    )  # fmt: skip


def test_tabwriter_blocks_end_at_lines_with_fewer_cells() -> None:
    # Go aligns column blocks independently: a line without the column ends the block.
    text = "a\tbbbbbb\tc\nlonger\tx\ty\nno tabs here\nz\tw\n"
    assert format_tabbed(text) == (
        "a        bbbbbb   c\n"
        "longer   x        y\n"
        "no tabs here\n"
        "z   w\n"
    )  # fmt: skip


def test_node_prefixes_and_line_reassembly() -> None:
    assert prefix_lines("10.5.0.2", "a\nb\n") == "10.5.0.2: a\n10.5.0.2: b\n"
    buf = NodeLineBuffer()
    assert buf.feed("n1", b"hel") == []
    assert buf.feed("n2", b"x\ny") == ["n2: x"]
    assert buf.feed("n1", b"lo\nwor") == ["n1: hello"]
    assert sorted(buf.flush()) == ["n1: wor", "n2: y"]


# --------------------------------------------------------------------------- errors a user can act on


@functools.cache
def _bundle() -> SecretsBundle:
    """One generated bundle for the file (generating one costs ~1 s of RSA keys); read-only here."""
    return SecretsBundle.generate()


def _write(tmp_path: Path, name: str, ctx: Context) -> Path:
    cfg = TalosConfig(context=name, contexts={name: ctx})
    return cfg.save(tmp_path / "talosconfig")


def test_no_endpoints_names_config_endpoint_and_e_flag(tmp_path: Path) -> None:
    path = _write(tmp_path, "demo", issue_admin_context(_bundle(), nodes=["10.5.0.2"]))
    with pytest.raises(NoEndpointsError) as err:
        Client.from_options(GlobalOptions(talosconfig=str(path)))
    assert "failed to determine endpoints" in str(err.value)
    assert "'demo'" in str(err.value)
    assert err.value.hint is not None
    assert "talosctl config endpoint <IP>" in err.value.hint and "-e/--endpoints" in err.value.hint


def test_endpoint_flag_overrides_the_context(tmp_path: Path) -> None:
    path = _write(tmp_path, "demo", issue_admin_context(_bundle(), endpoints=["10.0.0.1"]))
    client = Client.from_options(
        GlobalOptions(talosconfig=str(path), endpoints=["10.0.0.9"], nodes=["n1", "n2"])
    )
    assert [e.address for e in client.endpoints] == ["10.0.0.9:50000"]
    assert client.metadata == (("nodes", "n1"), ("nodes", "n2"))
    with pytest.raises(ValueError, match="one node at a time"):
        client.cosi  # noqa: B018
    assert client.with_nodes("n1")._cosi_metadata == (("node", "n1"),)
    assert client.with_node("n2").metadata == (("node", "n2"),)
    assert client.without_nodes()._cosi_metadata == ()


def test_missing_nodes_is_talosctls_error_with_a_hint(tmp_path: Path) -> None:
    path = _write(tmp_path, "demo", issue_admin_context(_bundle(), endpoints=["10.0.0.1"]))
    client = Client.from_options(GlobalOptions(talosconfig=str(path)))
    with pytest.raises(NoNodesError) as err:
        client.require_nodes()
    assert str(err.value).startswith("nodes are not set for the command: please use `--nodes` flag")
    assert err.value.hint is not None and "talosctl config node" in err.value.hint
    several = client.with_nodes("a", "b")
    with pytest.raises(NoNodesError, match="'kubeconfig' is not supported with multiple nodes"):
        several.require_single_node("kubeconfig")


def test_insecure_without_nodes_says_to_pass_nodes() -> None:
    with pytest.raises(NoEndpointsError) as err:
        Client.from_options(GlobalOptions(), insecure=True)
    assert err.value.hint is not None and "--nodes" in err.value.hint


def test_damaged_talosconfig_values_are_config_errors(tmp_path: Path) -> None:
    ctx = issue_admin_context(_bundle(), endpoints=["10.0.0.1"])
    ctx.ca = "not base64!"
    with pytest.raises(ClientConfigError, match="error decoding ca"):
        Client.from_context(ctx, name="demo")
    ctx = issue_admin_context(_bundle(), endpoints=["10.0.0.1"])
    ctx.key = issue_admin_context(SecretsBundle.generate()).key  # a key that is not the certificate's
    with pytest.raises(ClientConfigError, match="could not load client key pair"):
        Client.from_context(ctx, name="demo")


def test_missing_talosconfig_lists_where_it_looked(tmp_path: Path) -> None:
    with pytest.raises(ClientConfigError, match="does not exist") as err:
        Client.from_options(GlobalOptions(talosconfig=str(tmp_path / "nope")))
    assert err.value.hint is not None and "talosctl gen config" in err.value.hint


@pytest.mark.parametrize("bad", ["", "abc", base64.b64encode(b"short").decode(), "!!!!"])
def test_bad_fingerprints_are_refused(bad: str) -> None:
    with pytest.raises(ClientError, match="error parsing certificate fingerprint"):
        parse_fingerprint(bad)


def test_good_fingerprint_round_trips() -> None:
    fp = base64.b64encode(hashlib.sha256(b"x").digest()).decode()
    assert parse_fingerprint(f" {fp} ") == fp


def test_permission_denied_names_the_role_needed() -> None:
    from grpclib.const import Status
    from grpclib.exceptions import GRPCError

    err = translate_error(
        GRPCError(Status.PERMISSION_DENIED, "not authorized"),
        method="/machine.MachineService/Reboot",
        call=CallContext(context_name="ro", roles=["os:reader"]),
    )
    assert str(err) == "rpc error: code = PermissionDenied desc = not authorized"
    assert err.hint is not None
    assert "os:admin or os:operator" in err.hint and "context 'ro' has os:reader" in err.hint
    assert roles_for("/machine.MachineService/EtcdSnapshot") == ("os:admin", "os:operator", "os:etcd:backup")
    assert roles_for("/machine.MachineService/Version") == ("os:admin", "os:operator", "os:reader")
    assert roles_for("/machine.MachineService/SomethingNew") == ("os:admin",)


def test_no_request_forwarding_says_workers_do_not_forward_not_a_role() -> None:
    from grpclib.const import Status
    from grpclib.exceptions import GRPCError

    err = translate_error(
        GRPCError(Status.PERMISSION_DENIED, "no request forwarding"),
        method="/machine.MachineService/Version",
        call=CallContext(context_name="e2e", roles=["os:admin"], endpoints_source="-e/--endpoints"),
    )
    assert str(err) == "rpc error: code = PermissionDenied desc = no request forwarding"
    assert err.hint is not None
    assert "workers do not forward requests" in err.hint
    assert "talosctl config endpoint" in err.hint and "-e/--endpoints" in err.hint
    assert "role" not in err.hint


# --------------------------------------------------------------------------- expiry warning


def test_expiring_certificate_warns_once_per_process() -> None:
    now = datetime(2030, 1, 1, tzinfo=UTC)
    ctx = issue_admin_context(_bundle(), endpoints=["10.0.0.1"], ttl=timedelta(days=10), now=now)
    crt = base64.b64decode(ctx.crt)
    seen: list[str] = []
    Client.from_context(ctx, name="demo", now=now, warn=seen.append)
    Client.from_context(ctx, name="demo", now=now, warn=seen.append)
    assert len(seen) == 1
    assert "context 'demo' expires in 10 days (2030-01-11)" in seen[0]
    assert warn_if_expiring(crt, "demo", now=now, write=seen.append) is None


def test_no_warning_for_a_fresh_certificate_and_a_loud_one_when_expired() -> None:
    now = datetime(2030, 1, 1, tzinfo=UTC)
    ctx = issue_admin_context(_bundle(), ttl=timedelta(days=365), now=now)
    crt = base64.b64decode(ctx.crt)
    assert expiry_warning(crt, "demo", now=now) is None
    assert expiry_warning(crt, "demo", now=now + timedelta(days=340)) is not None
    expired = expiry_warning(crt, "demo", now=now + timedelta(days=400))
    assert expired is not None and "expired 35 days ago" in expired
