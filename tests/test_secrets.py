"""The secrets bundle: Talos's file format, generation rules, and every way an input can be wrong."""

from __future__ import annotations

import base64
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization

from ichor.machinery import pki
from ichor.machinery.contract import VersionContract
from ichor.machinery.errors import MachineryError, SecretsError
from ichor.machinery.secrets import SecretsBundle, new_token

NOW = datetime(2024, 3, 1, 12, 0, 0, tzinfo=UTC)

# Talos's own test bundle (siderolabs/talos,
# pkg/machinery/config/types/v1alpha1/testdata/stability/secrets.yaml): fact data, not code.
TALOS_STABILITY_BUNDLE = """\
# test set of secrets for config generation, please never use in production
cluster:
    id: 0raF93qnkMvF-FZNuvyGozXNdLiT2FOWSlyBaW4PR-w=
    secret: pofHbABZq7VXuObsdLdy/bHmz6hlMHZ3p8+6WKrv1ic=
secrets:
    bootstraptoken: inn7ol.u4ehnti8qyls9ymo
    secretboxencryptionsecret: 45yd2Ke+sytiICojDf8aibTfgt99nzJmO53cjDqrCto=
trustdinfo:
    token: d8cwfa.eyvpi0xwxyarbfid
certs:
    etcd:
        crt: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJmVENDQVNPZ0F3SUJBZ0lRVkNTWmFQU3Z0TlZTcjYrVkRyUks0akFLQmdncWhrak9QUVFEQWpBUE1RMHcKQ3dZRFZRUUtFd1JsZEdOa01CNFhEVEl6TVRBeE1qRXdORFl3T1ZvWERUTXpNVEF3T1RFd05EWXdPVm93RHpFTgpNQXNHQTFVRUNoTUVaWFJqWkRCWk1CTUdCeXFHU000OUFnRUdDQ3FHU000OUF3RUhBMElBQk9wVXN0MHN3MEJZCkFDN0hpTGNrRElvdVdTRVhWTlJVWE42UmNLTWVRQU9VOEhJQkZBaTJlS2Rka2VJOEhZOTJNWTU1U21xQlhNK3cKRTh0RFgyT3kxSk9qWVRCZk1BNEdBMVVkRHdFQi93UUVBd0lDaERBZEJnTlZIU1VFRmpBVUJnZ3JCZ0VGQlFjRApBUVlJS3dZQkJRVUhBd0l3RHdZRFZSMFRBUUgvQkFVd0F3RUIvekFkQmdOVkhRNEVGZ1FVejVmai9oZTZoUjhMCkFRTU5qTjgxNS8zV3B6d3dDZ1lJS29aSXpqMEVBd0lEU0FBd1JRSWdFWWcyTlp3NkExek02eURNWTRHN1JPVkwKc0JOU0VhSDd4VmVSalBSblAvZ0NJUURiYzFMNmI0SkU0MCtuUCtYNG5pZlB0QWp5REhhUzVMS0YzQWZkUkRWdApMUT09Ci0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K
        key: LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0tCk1IY0NBUUVFSU03Q2VnMk1GQW5TM3ROMzV6QTc0aFZ3VElkTkthK0ZwUHlYVERCdU4wVFlvQW9HQ0NxR1NNNDkKQXdFSG9VUURRZ0FFNmxTeTNTekRRRmdBTHNlSXR5UU1paTVaSVJkVTFGUmMzcEZ3b3g1QUE1VHdjZ0VVQ0xaNApwMTJSNGp3ZGozWXhqbmxLYW9GY3o3QVR5ME5mWTdMVWt3PT0KLS0tLS1FTkQgRUMgUFJJVkFURSBLRVktLS0tLQo=
    k8s:
        crt: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJpVENDQVMrZ0F3SUJBZ0lRYm1hNDNPalRwR0I5TjVxOVFEc3RFekFLQmdncWhrak9QUVFEQWpBVk1STXcKRVFZRFZRUUtFd3ByZFdKbGNtNWxkR1Z6TUI0WERUSXpNVEF4TWpFd05EWXdPVm9YRFRNek1UQXdPVEV3TkRZdwpPVm93RlRFVE1CRUdBMVVFQ2hNS2EzVmlaWEp1WlhSbGN6QlpNQk1HQnlxR1NNNDlBZ0VHQ0NxR1NNNDlBd0VICkEwSUFCTXNhRWZ5R3lFb0xyK0p1Wk91dkVVaXVNMStIQjZvZGtSdVV3ZEJ0ODdacDd1SkVoaEFsZitxNFFjT3gKcFRpZnBIRHJBOEFURjNCWUlFRmFXZ0xPTld1allUQmZNQTRHQTFVZER3RUIvd1FFQXdJQ2hEQWRCZ05WSFNVRQpGakFVQmdnckJnRUZCUWNEQVFZSUt3WUJCUVVIQXdJd0R3WURWUjBUQVFIL0JBVXdBd0VCL3pBZEJnTlZIUTRFCkZnUVU0ZEVkM1RoVzRKWlVWcXR1OEFZNWx1NUhQeGN3Q2dZSUtvWkl6ajBFQXdJRFNBQXdSUUloQUpJbkFMb0EKY1VhRUp4VlJ5dkhQenFQcTBvaGJOY2oyT3N2d3VKUFMzSktVQWlCSmhwNGFWMG9zUURRSGJnbjdXUWFYaHZFTwo5bWxTbVRURTAyOXBWb0YyWkE9PQotLS0tLUVORCBDRVJUSUZJQ0FURS0tLS0tCg==
        key: LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0tCk1IY0NBUUVFSUVZbFloNzVTUTZ6VUJFTUZ6em5pUzZuVVg3Q2VxQ013S3k0RTZHVEVFMGNvQW9HQ0NxR1NNNDkKQXdFSG9VUURRZ0FFeXhvUi9JYklTZ3V2NG01azY2OFJTSzR6WDRjSHFoMlJHNVRCMEczenRtbnU0a1NHRUNWLwo2cmhCdzdHbE9KK2tjT3NEd0JNWGNGZ2dRVnBhQXM0MWF3PT0KLS0tLS1FTkQgRUMgUFJJVkFURSBLRVktLS0tLQo=
    k8saggregator:
        crt: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJYakNDQVFXZ0F3SUJBZ0lRWnNnVDRZZzVxRkNIbS9QTnV5QUVSekFLQmdncWhrak9QUVFEQWpBQU1CNFgKRFRJek1UQXhNakV3TkRZd09Wb1hEVE16TVRBd09URXdORFl3T1Zvd0FEQlpNQk1HQnlxR1NNNDlBZ0VHQ0NxRwpTTTQ5QXdFSEEwSUFCRmQ1eEhFWHhZRndQeTdaWjhmd3FHRGU2YVQ5ZmxNRVlWZENRNDlEaWZobWVteTVDaHZRCnlVRkpZcFM4b21HODVTS1dnOEpFTkoyNnhEdm9WMFBCS2srallUQmZNQTRHQTFVZER3RUIvd1FFQXdJQ2hEQWQKQmdOVkhTVUVGakFVQmdnckJnRUZCUWNEQVFZSUt3WUJCUVVIQXdJd0R3WURWUjBUQVFIL0JBVXdBd0VCL3pBZApCZ05WSFE0RUZnUVV4K0xab1FrYjlmOTN0Y0g4NnZjOUc2ZE13T2t3Q2dZSUtvWkl6ajBFQXdJRFJ3QXdSQUlnClhudDVXdmEzOGtWVTB3NjExMEp4bU43Qm5zcWl2NnNMaXlJNXRUR1BDQk1DSUZDQlJ3RXZSYTNnU3pkdXB6ajcKQVJLV3NlK3V5YW9rMnlNYXZnaUVITWpUCi0tLS0tRU5EIENFUlRJRklDQVRFLS0tLS0K
        key: LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0tCk1IY0NBUUVFSUlMblhpQ3hOWU1CWHpncjVuYmc3bnVtUWM2UGlHaXdmWUN2eFF3Tlhxc3dvQW9HQ0NxR1NNNDkKQXdFSG9VUURRZ0FFVjNuRWNSZkZnWEEvTHRsbngvQ29ZTjdwcFAxK1V3UmhWMEpEajBPSitHWjZiTGtLRzlESgpRVWxpbEx5aVliemxJcGFEd2tRMG5ickVPK2hYUThFcVR3PT0KLS0tLS1FTkQgRUMgUFJJVkFURSBLRVktLS0tLQo=
    k8sserviceaccount:
        key: LS0tLS1CRUdJTiBFQyBQUklWQVRFIEtFWS0tLS0tCk1IY0NBUUVFSUlHVElBQjZZUzV0cFcrUnYxeDBPY09Jb1h0SXgzdGZteVFZNGxOWWRCbmpvQW9HQ0NxR1NNNDkKQXdFSG9VUURRZ0FFQ3drbVVTUmtrbnlOc0NjTFJNUTlmZWx6cFY0dDdIdlNRcnp6ZGRvK2pWYmlqd2kwVVE1YQp0VW8vZkxQbDlBckVNOHNRWTVOSlgraVdxYjFkQWFXa2VnPT0KLS0tLS1FTkQgRUMgUFJJVkFURSBLRVktLS0tLQo=
    os:
        crt: LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJQakNCOGFBREFnRUNBaEI5cStGVXpodzkycHVPemtpNzB1eGRNQVVHQXl0bGNEQVFNUTR3REFZRFZRUUsKRXdWMFlXeHZjekFlRncweU16RXdNVEl4TURRMk1EbGFGdzB6TXpFd01Ea3hNRFEyTURsYU1CQXhEakFNQmdOVgpCQW9UQlhSaGJHOXpNQ293QlFZREsyVndBeUVBaHVLczZxeCtKWi8wWG8ybXdpQUNjK1EwSVYySGhMd3ozVTZICmUxemZjS2lqWVRCZk1BNEdBMVVkRHdFQi93UUVBd0lDaERBZEJnTlZIU1VFRmpBVUJnZ3JCZ0VGQlFjREFRWUkKS3dZQkJRVUhBd0l3RHdZRFZSMFRBUUgvQkFVd0F3RUIvekFkQmdOVkhRNEVGZ1FVSlgzWlVNRktWWFZ5NWhKWQozZG9NWENpVEJZRXdCUVlESzJWd0EwRUFCbUxrbDhITmQ3cUpEN3VqQkk2UG9abVRQQWlEcU9GQ0NTVDZJYlZDClF3UzQ1bk1tMldtalRIc3ZrYU5FQ0dneTBhQXJaaFdsbnVYWUswY0t3Z2VJQ0E9PQotLS0tLUVORCBDRVJUSUZJQ0FURS0tLS0tCg==
        key: LS0tLS1CRUdJTiBFRDI1NTE5IFBSSVZBVEUgS0VZLS0tLS0KTUM0Q0FRQXdCUVlESzJWd0JDSUVJTURXbklEdVpSdlhQcW1tbSt6bk15SWMrdk53ZjdnYksvSmR3WC9iN2d1RQotLS0tLUVORCBFRDI1NTE5IFBSSVZBVEUgS0VZLS0tLS0K
"""
TOKEN = re.compile(r"^[a-z0-9]{6}\.[a-z0-9]{16}$")


@pytest.fixture(scope="module")
def bundle() -> SecretsBundle:
    return SecretsBundle.generate(VersionContract.parse("v1.7"), now=NOW)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# --- Talos's file --------------------------------------------------------------------------


def test_talos_stability_bundle_parses() -> None:
    parsed = SecretsBundle.from_yaml(TALOS_STABILITY_BUNDLE, source="secrets.yaml")
    assert parsed.cluster_id == "0raF93qnkMvF-FZNuvyGozXNdLiT2FOWSlyBaW4PR-w="
    assert parsed.bootstrap_token == "inn7ol.u4ehnti8qyls9ymo"
    assert parsed.trustd_token == "d8cwfa.eyvpi0xwxyarbfid"
    assert parsed.aescbc_encryption_secret is None
    assert parsed.os.certificate().subject.rfc4514_string() == "O=talos"
    assert parsed.k8s_service_account_key.startswith(b"-----BEGIN EC PRIVATE KEY-----")


def test_talos_stability_bundle_round_trips_byte_for_byte() -> None:
    # Talos writes no comment; the leading comment line is a human note in its test data.
    expected = TALOS_STABILITY_BUNDLE.split("\n", 1)[1]
    assert SecretsBundle.from_yaml(TALOS_STABILITY_BUNDLE).to_yaml() == expected


# --- generation ----------------------------------------------------------------------------


def test_generated_identifiers(bundle: SecretsBundle) -> None:
    assert len(base64.urlsafe_b64decode(bundle.cluster_id)) == 32
    assert bundle.cluster_id.endswith("=")
    assert len(base64.b64decode(bundle.cluster_secret, validate=True)) == 32
    assert len(base64.b64decode(bundle.secretbox_encryption_secret, validate=True)) == 32
    assert TOKEN.match(bundle.bootstrap_token) and TOKEN.match(bundle.trustd_token)
    assert bundle.bootstrap_token != bundle.trustd_token
    assert bundle.aescbc_encryption_secret is None


def test_tokens_use_the_whole_alphabet() -> None:
    seen = set("".join(new_token().replace(".", "") for _ in range(200)))
    assert seen == set("0123456789abcdefghijklmnopqrstuvwxyz")


def test_generated_bundle_yaml_layout_and_round_trip(bundle: SecretsBundle) -> None:
    text = bundle.to_yaml()
    top = [line.split(":")[0] for line in text.splitlines() if not line.startswith(" ")]
    assert top == ["cluster", "secrets", "trustdinfo", "certs"]
    certs = [
        line.strip().rstrip(":")
        for line in text.splitlines()
        if line.startswith("    ") and line.endswith(":")
    ]
    assert certs == ["etcd", "k8s", "k8saggregator", "k8sserviceaccount", "os"]
    assert "    secretboxencryptionsecret: " in text and "aescbcencryptionsecret" not in text
    assert SecretsBundle.from_yaml(text) == bundle


def test_old_contract_uses_aescbc() -> None:
    old = SecretsBundle.generate(VersionContract.parse("v1.2"), now=NOW)
    assert old.aescbc_encryption_secret and not old.secretbox_encryption_secret
    text = old.to_yaml()
    assert "aescbcencryptionsecret" in text and "secretboxencryptionsecret" not in text
    assert SecretsBundle.from_yaml(text) == old


def test_load_reads_a_file(tmp_path: Path, bundle: SecretsBundle) -> None:
    path = tmp_path / "secrets.yaml"
    path.write_text(bundle.to_yaml())
    assert SecretsBundle.load(path) == bundle


# --- bad bundles ---------------------------------------------------------------------------


def _plain(bundle: SecretsBundle) -> dict[str, Any]:
    return bundle.to_plain()


def _yaml(doc: dict[str, Any]) -> str:
    from ichor.machinery.yamlio import dump_document, from_plain

    return dump_document(from_plain(doc))


def _error(doc: dict[str, Any] | str) -> SecretsError:
    text = doc if isinstance(doc, str) else _yaml(doc)
    with pytest.raises(SecretsError) as err:
        SecretsBundle.from_yaml(text, source="my-secrets.yaml")
    assert str(err.value).startswith("my-secrets.yaml: ")
    assert err.value.hint and "talosctl gen secrets" in err.value.hint
    return err.value


def test_missing_sections_are_listed(bundle: SecretsBundle) -> None:
    doc = _plain(bundle)
    del doc["trustdinfo"]
    del doc["cluster"]["secret"]
    del doc["certs"]["k8saggregator"]
    del doc["certs"]["k8sserviceaccount"]
    message = str(_error(doc))
    for problem in (
        "cluster.secret is required",
        "trustdinfo is required",
        "certs.k8saggregator is required",
        "certs.k8sserviceaccount is required",
    ):
        assert problem in message


def test_encryption_secret_rules(bundle: SecretsBundle) -> None:
    doc = _plain(bundle)
    del doc["secrets"]["secretboxencryptionsecret"]
    assert "one of [secrets.secretboxencryptionsecret, secrets.aescbcencryptionsecret] is required" in str(
        _error(doc)
    )
    doc = _plain(bundle)
    doc["secrets"]["aescbcencryptionsecret"] = "x"
    assert "only one of" in str(_error(doc))


@pytest.mark.parametrize(
    ("path", "value", "problem"),
    [
        (("certs", "etcd", "crt"), "%%%not-base64%%%", "certs.etcd.crt is not valid base64"),
        (
            ("certs", "k8s", "key"),
            _b64(b"just some text"),
            "certs.k8s.key is invalid: private key: not PEM data",
        ),
        (("certs", "k8sserviceaccount", "key"), "@@", "certs.k8sserviceaccount.key is not valid base64"),
        (
            ("certs", "os", "key"),
            None,
            "certs.os.key is invalid: private key: unsupported key type 'CERTIFICATE'",
        ),
        (
            ("certs", "os", "crt"),
            None,
            "certs.os is invalid: certificate: the key does not belong to the certificate",
        ),
        (("cluster", "id"), 12, "cluster.id must be a string"),
    ],
)
def test_bad_values_name_their_key_path(
    bundle: SecretsBundle, path: tuple[str, ...], value: Any, problem: str
) -> None:
    doc = _plain(bundle)
    if problem.startswith("certs.os.key"):
        value = doc["certs"]["os"]["crt"]  # a certificate where the key belongs
    if problem.startswith("certs.os is invalid"):
        value = doc["certs"]["etcd"]["crt"]  # another CA's certificate
    node = doc
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    assert problem in str(_error(doc))


def test_not_a_mapping_and_invalid_yaml() -> None:
    assert "single YAML mapping" in str(_error("- a\n- b\n"))
    with pytest.raises(MachineryError, match=r"my\.yaml: invalid YAML at line"):
        SecretsBundle.from_yaml("cluster:\n  id: [unclosed\n", source="my.yaml")


def test_load_missing_and_unreadable(tmp_path: Path) -> None:
    with pytest.raises(SecretsError, match="does not exist") as err:
        SecretsBundle.load(tmp_path / "nope.yaml")
    assert err.value.hint and "gen secrets" in err.value.hint
    with pytest.raises(SecretsError, match="cannot read secrets bundle"):
        SecretsBundle.load(tmp_path)  # a directory


# --- from a control plane config ------------------------------------------------------------


def _controlplane_config(bundle: SecretsBundle) -> dict[str, Any]:
    token_id, token_secret = bundle.bootstrap_token.split(".")

    def pair(value: pki.CertKey) -> dict[str, str]:
        return {"crt": value.crt_b64(), "key": value.key_b64()}

    return {
        "version": "v1alpha1",
        "machine": {"type": "controlplane", "token": bundle.trustd_token, "ca": pair(bundle.os)},
        "cluster": {
            "id": bundle.cluster_id,
            "secret": bundle.cluster_secret,
            "token": f"{token_id}.{token_secret}",
            "secretboxEncryptionSecret": bundle.secretbox_encryption_secret,
            "ca": pair(bundle.k8s),
            "aggregatorCA": pair(bundle.k8s_aggregator),
            "serviceAccount": {"key": _b64(bundle.k8s_service_account_key)},
            "etcd": {"ca": pair(bundle.etcd)},
        },
    }


def test_from_controlplane_config_round_trip(bundle: SecretsBundle) -> None:
    assert SecretsBundle.from_controlplane_config(_controlplane_config(bundle)) == bundle


def test_from_controlplane_config_reads_ruamel_documents(bundle: SecretsBundle) -> None:
    from ichor.machinery.yamlio import load_documents

    raw = load_documents(_yaml(_controlplane_config(bundle)))[0]
    assert SecretsBundle.from_controlplane_config(raw) == bundle


def test_worker_config_is_refused_with_a_hint(bundle: SecretsBundle) -> None:
    cfg = _controlplane_config(bundle)
    cfg["machine"]["ca"]["key"] = ""
    del cfg["cluster"]["ca"]["key"]
    with pytest.raises(SecretsError) as err:
        SecretsBundle.from_controlplane_config(cfg)
    assert ".machine.ca.key is required" in str(err.value)
    assert ".cluster.ca.key is required" in str(err.value)
    assert err.value.hint and "controlplane" in err.value.hint


def test_controlplane_config_bad_values(bundle: SecretsBundle) -> None:
    cfg = _controlplane_config(bundle)
    cfg["cluster"]["etcd"]["ca"]["crt"] = "***"
    cfg["cluster"]["serviceAccount"]["key"] = _b64(b"nope")
    with pytest.raises(SecretsError) as err:
        SecretsBundle.from_controlplane_config(cfg)
    assert ".cluster.etcd.ca.crt is not valid base64" in str(err.value)
    assert ".cluster.serviceAccount.key is invalid" in str(err.value)
    with pytest.raises(SecretsError, match=r"no \.machine or \.cluster"):
        SecretsBundle.from_controlplane_config({"version": "v1alpha1"})


# --- from a kubeadm PKI directory ------------------------------------------------------------


def _kubeadm_pki(root: Path) -> dict[str, bytes]:
    # kubeadm writes RSA CAs; mix in a PKCS#8 "PRIVATE KEY" to cover that spelling too.
    k8s = pki.new_rsa_ca(organization="kubernetes", ttl=pki_ttl(), now=NOW, bits=2048)
    front = pki.new_ecdsa_ca(common_name="front-proxy-ca", ttl=pki_ttl(), now=NOW)
    etcd = pki.new_rsa_ca(organization="etcd", ttl=pki_ttl(), now=NOW, bits=2048)
    etcd_key = pki.load_private_key(etcd.key).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    files = {
        "ca.crt": k8s.crt,
        "ca.key": k8s.key,
        "front-proxy-ca.crt": front.crt,
        "front-proxy-ca.key": front.key,
        "etcd/ca.crt": etcd.crt,
        "etcd/ca.key": etcd_key,
        "sa.key": pki.new_rsa_key(2048),
    }
    for name, data in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_bytes(data)
    return files


def pki_ttl() -> Any:
    from datetime import timedelta

    return timedelta(days=3650)


def test_from_kubernetes_pki(tmp_path: Path) -> None:
    files = _kubeadm_pki(tmp_path)
    got = SecretsBundle.from_kubernetes_pki(tmp_path, "abcdef.0123456789abcdef", now=NOW)
    assert got.k8s == pki.CertKey(files["ca.crt"], files["ca.key"])
    assert got.etcd == pki.CertKey(files["etcd/ca.crt"], files["etcd/ca.key"])
    assert got.k8s_aggregator == pki.CertKey(files["front-proxy-ca.crt"], files["front-proxy-ca.key"])
    assert got.k8s_service_account_key == files["sa.key"]
    assert got.bootstrap_token == "abcdef.0123456789abcdef"
    assert got.os.certificate().subject.rfc4514_string() == "O=talos"
    assert SecretsBundle.from_yaml(got.to_yaml()) == got
    generated_token = SecretsBundle.from_kubernetes_pki(tmp_path, "", now=NOW).bootstrap_token
    assert TOKEN.match(generated_token)


def test_from_kubernetes_pki_errors(tmp_path: Path) -> None:
    with pytest.raises(SecretsError, match="does not exist") as err:
        SecretsBundle.from_kubernetes_pki(tmp_path / "missing", "")
    assert err.value.hint and "--from-kubernetes-pki" in err.value.hint
    afile = tmp_path / "file"
    afile.write_text("x")
    with pytest.raises(SecretsError, match="is not a directory"):
        SecretsBundle.from_kubernetes_pki(afile, "")

    root = tmp_path / "pki"
    root.mkdir()
    files = _kubeadm_pki(root)
    with pytest.raises(SecretsError, match="invalid bootstrap token") as err:
        SecretsBundle.from_kubernetes_pki(root, "short.token")
    assert err.value.hint and "--kubernetes-bootstrap-token" in err.value.hint

    (root / "front-proxy-ca.key").unlink()
    with pytest.raises(SecretsError, match=re.escape(f"'{root / 'front-proxy-ca.key'}' does not exist")):
        SecretsBundle.from_kubernetes_pki(root, "")
    (root / "front-proxy-ca.key").write_bytes(files["ca.key"])  # the wrong CA's key
    with pytest.raises(SecretsError, match="the key does not belong to the certificate"):
        SecretsBundle.from_kubernetes_pki(root, "")
    (root / "front-proxy-ca.key").write_bytes(files["front-proxy-ca.key"])
    (root / "sa.key").write_bytes(b"garbage")
    with pytest.raises(SecretsError, match=r"sa\.key: not PEM data"):
        SecretsBundle.from_kubernetes_pki(root, "")


def test_from_kubernetes_pki_unreadable_file(tmp_path: Path) -> None:
    _kubeadm_pki(tmp_path)
    (tmp_path / "ca.key").unlink()
    (tmp_path / "ca.key").mkdir()  # unreadable as a file, even for root
    with pytest.raises(SecretsError, match=r"cannot read .*ca\.key"):
        SecretsBundle.from_kubernetes_pki(tmp_path, "")
