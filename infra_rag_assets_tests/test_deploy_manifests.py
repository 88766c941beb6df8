"""The Kubernetes pieces in deploy/ are valid before anyone applies them.

* every manifest of deploy/k8s against the Kubernetes JSON schemas (the copies kubernetes-validate
  ships, strict: an unknown or misspelt field fails), for the oldest and newest version we claim;
* the Kubernetes objects inside the Dagster Helm values (volumes, mounts, security contexts,
  resources, env, secret refs) against the same definitions: the chart pastes them into pods;
* the Helm values against the Dagster chart's own values.schema.json, given as a path in
  DAGSTER_CHART_SCHEMA (a file of the chart version you deploy; it is not vendored here: see
  deploy/README.md). Skipped, saying so, without it.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from jsonschema import Draft7Validator, Draft202012Validator
from referencing import Registry, Resource

pytestmark = pytest.mark.unit

DEPLOY = Path(__file__).resolve().parents[1] / "deploy"
K8S_VERSIONS = ("1.31.0", "1.37.0")
K8S_DEFINITIONS = "https://kubernetes.io/api/_definitions.json"
# The chart's schema points at this (long gone) mirror of the Kubernetes definitions.
CHART_K8S_PREFIX = "https://kubernetesjsonschema.dev/"


def manifests() -> list[tuple[str, dict]]:
    docs = []
    for path in sorted((DEPLOY / "k8s").glob("*.yaml")):
        if path.name != "kustomization.yaml":
            docs += [(path.name, doc) for doc in yaml.safe_load_all(path.read_text()) if doc]
    return docs


def helm_values() -> dict:
    return yaml.safe_load((DEPLOY / "helm" / "values.yaml").read_text())


def k8s_registry(version: str) -> Registry:
    """The bundled definitions of ``version``, under their own id and the chart's old URLs."""
    root = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema" / f"v{version}-local-strict"
    contents = json.loads((root / "_definitions.json").read_text())
    contents.pop("$id")
    contents["definitions"] = contents["$defs"]  # the chart's refs say #/definitions/...
    resource = Resource.from_contents(contents)

    def retrieve(uri: str) -> Resource:
        if uri == K8S_DEFINITIONS or (uri.startswith(CHART_K8S_PREFIX) and uri.endswith("/_definitions.json")):
            return resource
        raise LookupError(f"no offline copy of {uri}")

    return Registry(retrieve=retrieve)


def k8s_errors(value, definition: str, version: str) -> list[str]:
    schema = {"$ref": f"{K8S_DEFINITIONS}#/$defs/io.k8s.api.core.v1.{definition}"}
    validator = Draft202012Validator(schema, registry=k8s_registry(version))
    return [f"{definition}: {e.json_path}: {e.message}" for e in validator.iter_errors(value)]


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize(("name", "doc"), manifests(), ids=lambda v: v if isinstance(v, str) else v["kind"])
def test_manifest_is_valid_kubernetes(name, doc, version):
    kubernetes_validate.validate(doc, version, strict=True)


def test_kustomization_lists_every_manifest():
    kustomization = yaml.safe_load((DEPLOY / "k8s" / "kustomization.yaml").read_text())
    on_disk = {p.name for p in (DEPLOY / "k8s").glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == on_disk


def test_serving_pod_is_probed_read_only_and_unprivileged():
    deployment = next(doc for _, doc in manifests() if doc["kind"] == "Deployment")
    pod = deployment["spec"]["template"]["spec"]
    (serve,) = pod["containers"]
    assert serve["livenessProbe"]["httpGet"]["path"] == "/livez"
    assert serve["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert serve["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["securityContext"]["runAsNonRoot"] is True
    mounts = {m["name"]: m for m in serve["volumeMounts"]}
    assert mounts["data"].get("readOnly") is True  # the release is read, never written
    env = {e["name"]: e for e in serve["env"]}
    assert env["ANTHROPIC_API_KEY"]["valueFrom"]["secretKeyRef"]["optional"] is True
    service = next(doc for _, doc in manifests() if doc["kind"] == "Service")
    assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]


def helm_k8s_objects(values: dict) -> list[tuple[str, str, object]]:
    """(where, Kubernetes definition, value) of every Kubernetes object the values hand the chart."""
    found: list[tuple[str, str, object]] = []

    def pod_parts(where: str, section: dict) -> None:
        for key, definition in (
            ("podSecurityContext", "PodSecurityContext"),
            ("securityContext", "SecurityContext"),
            ("resources", "ResourceRequirements"),
        ):
            if key in section:
                found.append((f"{where}.{key}", definition, section[key]))
        for key, definition in (
            ("volumes", "Volume"),
            ("volumeMounts", "VolumeMount"),
            ("envSecrets", "SecretEnvSource"),
            ("envConfigMaps", "ConfigMapEnvSource"),
        ):
            found.extend((f"{where}.{key}[{i}]", definition, item) for i, item in enumerate(section.get(key, [])))
        if isinstance(section.get("env"), list):
            found.extend((f"{where}.env[{i}]", "EnvVar", item) for i, item in enumerate(section["env"]))

    for i, deployment in enumerate(values["dagster-user-deployments"]["deployments"]):
        pod_parts(f"dagster-user-deployments.deployments[{i}]", deployment)
    pod_parts("runLauncher.config.k8sRunLauncher", values["runLauncher"]["config"]["k8sRunLauncher"])
    pod_parts("dagsterWebserver", values["dagsterWebserver"])
    pod_parts("dagsterDaemon", values["dagsterDaemon"])
    return found


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_helm_values_hand_the_chart_valid_kubernetes_objects(version):
    objects = helm_k8s_objects(helm_values())
    assert len(objects) >= 15  # the user deployment alone has volumes, mounts, env, secrets, contexts
    errors = [f"{where}: {e}" for where, definition, value in objects for e in k8s_errors(value, definition, version)]
    assert not errors, "\n".join(errors)


def without_required(schema):
    """The schema with every ``required`` dropped: Helm merges maps into the chart's defaults, so
    a values file names only what it changes, and the defaults supply the rest."""
    if isinstance(schema, dict):
        return {k: without_required(v) for k, v in schema.items() if k != "required"}
    if isinstance(schema, list):
        return [without_required(v) for v in schema]
    return schema


def chart_errors(values: dict, schema: dict) -> list[str]:
    """Errors of ``values`` against the chart's schema, as Helm would see them after merging.

    Maps merge with the chart's defaults (their required keys come from there); lists replace
    the defaults, so each user deployment must be complete on its own.
    """
    registry = k8s_registry(K8S_VERSIONS[-1])
    merged_view = Draft7Validator(without_required(schema), registry=registry)
    errors = [f"{e.json_path}: {e.message}" for e in merged_view.iter_errors(values)]
    deployment_schema = {**copy.deepcopy(schema), "$ref": "#/definitions/UserDeployment"}
    deployment_schema.pop("properties")
    deployment_schema.pop("required", None)
    one = Draft7Validator(deployment_schema, registry=registry)
    for i, deployment in enumerate(values.get("dagster-user-deployments", {}).get("deployments", [])):
        errors += [f"deployments[{i}]{e.json_path[1:]}: {e.message}" for e in one.iter_errors(deployment)]
    return errors


@pytest.fixture
def chart_schema() -> dict:
    path = os.environ.get("DAGSTER_CHART_SCHEMA", "")
    if not path:
        pytest.skip("DAGSTER_CHART_SCHEMA (the Dagster chart's values.schema.json) is not set")
    return json.loads(Path(path).read_text())


def test_helm_values_match_the_dagster_chart_schema(chart_schema):
    values = helm_values()
    errors = chart_errors(values, chart_schema)
    assert not errors, "\n".join(errors)


def test_chart_schema_check_catches_a_misspelt_key(chart_schema):
    """The check is not vacuous: a typo in a strict section and an incomplete deployment fail."""
    values = helm_values()
    values["runLauncher"]["config"]["k8sRunLauncher"]["loadInClusterConfig"] = True  # the chart says Incluster
    del values["dagster-user-deployments"]["deployments"][0]["port"]
    errors = chart_errors(values, chart_schema)
    assert any("loadInClusterConfig" in e for e in errors), errors
    assert any("'port' is a required property" in e for e in errors), errors


def test_kubernetes_checks_catch_a_misspelt_field():
    """Neither Kubernetes check is vacuous: a misspelt field fails both."""
    assert k8s_errors({"name": "data", "mountpath": "/x"}, "VolumeMount", K8S_VERSIONS[-1])
    deployment = copy.deepcopy(next(doc for _, doc in manifests() if doc["kind"] == "Deployment"))
    deployment["spec"]["template"]["spec"]["containers"][0]["readinessProbe"]["httpGet"]["paht"] = "/readyz"
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, K8S_VERSIONS[-1], strict=True)


def test_image_scripts_parse():
    """The Dockerfile's shell scripts at least parse (the image build itself is not run in CI)."""
    for script in sorted((DEPLOY / "image").glob("*.sh")):
        subprocess.run(["sh", "-n", str(script)], check=True)


def test_build_context_is_an_allowlist_without_tests_or_data():
    rules = [r.strip() for r in (DEPLOY.parent / ".dockerignore").read_text().splitlines()]
    rules = [r for r in rules if r and not r.startswith("#")]
    assert rules[0] == "*"  # everything out, then what the wheel is built from back in
    allowed = {r[1:].rstrip("/") for r in rules if r.startswith("!")}
    assert "infra_rag_assets" in allowed and "pyproject.toml" in allowed
    assert not allowed & {"infra_rag_assets_tests", "eval", ".infra_rag", "docs"}
