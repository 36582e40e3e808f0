#!/usr/bin/env python3
"""Checks deploy/k8s and deploy/Dockerfile without a cluster or a container
engine; deploy/check.sh runs it.

Every document parses and names its apiVersion, kind and metadata.name; the
SQL ConfigMap holds deploy/postgres's files byte for byte; what the workloads
mount or reference by name exists (Secrets excepted: they are made by hand);
Services select some workload's pods; the DaemonSet probes kfused over gRPC.

  python3 deploy/check_manifests.py                  # check; exit 1 on a problem
  python3 deploy/check_manifests.py --write-configmap  # regenerate k8s/postgres-sql.yaml
  python3 deploy/check_manifests.py --dockerfile       # deploy/Dockerfile's required parts
"""
import pathlib
import sys

import yaml

DEPLOY = pathlib.Path(__file__).resolve().parent
K8S = DEPLOY / "k8s"
SQL_FILES = ("fleet.sql", "roles.sql")
SQL_CONFIGMAP = K8S / "postgres-sql.yaml"
SQL_CONFIGMAP_NAME = "kfuse-fleet-sql"
NAMESPACE = "kfuse"
# Made by hand (deploy/README.md), so not among the manifests.
SECRETS = {"kfuse-signing-key", "kfuse-auth-tokens", "kfuse-fleet-login", "kfuse-postgres-admin"}


def write_configmap():
    lines = [
        "# Generated from deploy/postgres/*.sql by `python3 deploy/check_manifests.py",
        "# --write-configmap`; deploy/check.sh fails when it differs from them.",
        "# postgres-init-job.yaml applies these to the fleet database.",
        "apiVersion: v1",
        "kind: ConfigMap",
        "metadata:",
        f"  name: {SQL_CONFIGMAP_NAME}",
        f"  namespace: {NAMESPACE}",
        "  labels:",
        "    app.kubernetes.io/part-of: kfuse",
        "data:",
    ]
    for name in SQL_FILES:
        text = (DEPLOY / "postgres" / name).read_text()
        if not text.endswith("\n") or text.endswith("\n\n"):
            sys.exit(f"{name}: must end with exactly one newline to round-trip through YAML")
        lines.append(f"  {name}: |")
        lines.extend(("    " + line) if line else "" for line in text.splitlines())
    SQL_CONFIGMAP.write_text("\n".join(lines) + "\n")
    print(f"wrote {SQL_CONFIGMAP.relative_to(DEPLOY.parent)}")


def pod_specs(obj):
    """(where, pod spec, pod labels) for workloads that hold a pod template."""
    kind = obj["kind"]
    spec = obj.get("spec") or {}
    if kind in ("DaemonSet", "Deployment", "StatefulSet", "Job"):
        tmpl = spec.get("template") or {}
        return [(kind + "/" + obj["metadata"]["name"], tmpl.get("spec") or {},
                 (tmpl.get("metadata") or {}).get("labels") or {})]
    return []


def containers(pod):
    return (pod.get("initContainers") or []) + (pod.get("containers") or [])


def check():
    problems = []
    objects = []  # (file, doc)
    files = sorted(K8S.glob("*.yaml"))
    if not files:
        problems.append("no YAML files in deploy/k8s")
    for path in files:
        try:
            docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
        except yaml.YAMLError as e:
            problems.append(f"{path.name}: does not parse: {e}")
            continue
        if not docs:
            problems.append(f"{path.name}: no document")
        for i, d in enumerate(docs):
            where = f"{path.name}[{i}]"
            if not isinstance(d, dict):
                problems.append(f"{where}: not a mapping")
                continue
            for field in ("apiVersion", "kind"):
                if not isinstance(d.get(field), str) or not d[field]:
                    problems.append(f"{where}: no {field}")
            name = (d.get("metadata") or {}).get("name")
            if not isinstance(name, str) or not name:
                problems.append(f"{where}: no metadata.name")
                continue
            objects.append((path.name, d))
        print(f"  {path.name}: {len(docs)} document(s): " +
              ", ".join(f"{d.get('kind')}/{(d.get('metadata') or {}).get('name')}"
                        for d in docs if isinstance(d, dict)))

    by_kind = {}
    for _, d in objects:
        by_kind.setdefault(d["kind"], {})[d["metadata"]["name"]] = d

    # Namespaced objects all live in the namespace the manifests create.
    if NAMESPACE not in by_kind.get("Namespace", {}):
        problems.append(f"no Namespace {NAMESPACE}")
    for f, d in objects:
        if d["kind"] in ("Namespace", "Kustomization"):
            continue
        ns = d["metadata"].get("namespace")
        if ns != NAMESPACE:
            problems.append(f"{f}: {d['kind']}/{d['metadata']['name']} is in namespace {ns!r}, not {NAMESPACE}")

    # The SQL ConfigMap carries deploy/postgres's files unchanged.
    cm = by_kind.get("ConfigMap", {}).get(SQL_CONFIGMAP_NAME)
    if cm is None:
        problems.append(f"no ConfigMap {SQL_CONFIGMAP_NAME}")
    else:
        for name in SQL_FILES:
            want = (DEPLOY / "postgres" / name).read_text()
            if (cm.get("data") or {}).get(name) != want:
                problems.append(f"ConfigMap {SQL_CONFIGMAP_NAME}: {name} differs from deploy/postgres/{name} "
                                "(python3 deploy/check_manifests.py --write-configmap)")

    # References by name resolve.
    configmaps = set(by_kind.get("ConfigMap", {}))
    workload_labels = []
    for _, d in objects:
        for where, pod, labels in pod_specs(d):
            workload_labels.append((where, d["metadata"].get("namespace"), labels))
            for v in pod.get("volumes") or []:
                if "configMap" in v and v["configMap"].get("name") not in configmaps:
                    problems.append(f"{where}: volume {v['name']}: no ConfigMap {v['configMap'].get('name')}")
                if "secret" in v and v["secret"].get("secretName") not in SECRETS:
                    problems.append(f"{where}: volume {v['name']}: Secret {v['secret'].get('secretName')} "
                                    "is not one deploy/README.md tells how to make")
            mounted = {v["name"] for v in pod.get("volumes") or []}
            mounted |= {t["metadata"]["name"] for t in (d.get("spec") or {}).get("volumeClaimTemplates") or []}
            for c in containers(pod):
                for m in c.get("volumeMounts") or []:
                    if m["name"] not in mounted:
                        problems.append(f"{where}: container {c['name']} mounts undeclared volume {m['name']}")
                for e in c.get("env") or []:
                    ref = (e.get("valueFrom") or {}).get("secretKeyRef")
                    if ref and ref.get("name") not in SECRETS:
                        problems.append(f"{where}: env {e['name']}: unknown Secret {ref.get('name')}")
                    ref = (e.get("valueFrom") or {}).get("configMapKeyRef")
                    if ref and ref.get("name") not in configmaps:
                        problems.append(f"{where}: env {e['name']}: no ConfigMap {ref.get('name')}")
    for name, svc in by_kind.get("Service", {}).items():
        sel = (svc.get("spec") or {}).get("selector") or {}
        if not any(ns == svc["metadata"].get("namespace") and all(labels.get(k) == v for k, v in sel.items())
                   for _, ns, labels in workload_labels):
            problems.append(f"Service/{name}: selector {sel} matches no workload's pods")

    # kfused: GPU nodes, native gRPC probes on the API port, both ports declared.
    ds = by_kind.get("DaemonSet", {}).get("kfused")
    if ds is None:
        problems.append("no DaemonSet kfused")
    else:
        pod = ds["spec"]["template"]["spec"]
        if (pod.get("nodeSelector") or {}).get("nvidia.com/gpu.present") != "true":
            problems.append("DaemonSet/kfused: nodeSelector lacks nvidia.com/gpu.present=true")
        if not any(t.get("key") == "nvidia.com/gpu" for t in pod.get("tolerations") or []):
            problems.append("DaemonSet/kfused: no toleration for nvidia.com/gpu")
        kfused = next((c for c in pod.get("containers") or [] if c["name"] == "kfused"), None)
        if kfused is None:
            problems.append("DaemonSet/kfused: no container kfused")
        else:
            ports = {p["containerPort"] for p in kfused.get("ports") or []}
            if ports != {7420, 9420}:
                problems.append(f"DaemonSet/kfused: container ports {sorted(ports)}, want [7420, 9420]")
            for probe in ("readinessProbe", "livenessProbe"):
                grpc = (kfused.get(probe) or {}).get("grpc") or {}
                if grpc.get("port") != 7420 or grpc.get("service") != "kfuse.v1.KernelService":
                    problems.append(f"DaemonSet/kfused: {probe} is not grpc port 7420 kfuse.v1.KernelService")
            if "nvidia.com/gpu" not in ((kfused.get("resources") or {}).get("limits") or {}):
                problems.append("DaemonSet/kfused: no nvidia.com/gpu limit")
            args = kfused.get("args") or []
            for flag in ("--address=0.0.0.0:7420", "--store=/var/lib/kfuse/kfuse.db",
                         "--metrics_address=0.0.0.0:9420"):
                if flag not in args:
                    problems.append(f"DaemonSet/kfused: args lack {flag}")
            if any(a.startswith("--fleet_dsn=") and "password" in a for a in args):
                problems.append("DaemonSet/kfused: a password in --fleet_dsn (use PGPASSWORD)")
        store = next((v for v in pod.get("volumes") or [] if v["name"] == "store"), {})
        if "hostPath" not in store:
            problems.append("DaemonSet/kfused: the store volume is not a hostPath on the node's disk")

    # kustomization.yaml lists every other manifest.
    kust = by_kind.get("Kustomization", {})
    for name, k in kust.items():
        listed = set(k.get("resources") or [])
        present = {p.name for p in files if p.name != "kustomization.yaml"}
        if listed != present:
            problems.append(f"kustomization.yaml: resources {sorted(listed)} != files {sorted(present)}")

    for p in problems:
        print("  problem: " + p)
    print(f"  {len(objects)} object(s) in {len(files)} file(s), {len(problems)} problem(s)")
    return not problems


def dockerfile_instructions(text):
    """[(INSTRUCTION, arguments)] with continuation lines joined, comments dropped."""
    out, cur = [], ""
    for line in text.splitlines():
        stripped = line.strip()
        if not cur and (not stripped or stripped.startswith("#")):
            continue
        if cur and stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            cur += stripped[:-1] + " "
            continue
        cur += stripped
        word, _, rest = cur.partition(" ")
        out.append((word.upper(), rest.strip()))
        cur = ""
    return out


def setup_packages():
    """The package list scripts/setup installs (its pkgs=( ... ) array)."""
    text = (DEPLOY.parent / "scripts" / "setup").read_text()
    start = text.index("pkgs=(") + len("pkgs=(")
    return set(text[start:text.index(")", start)].split())


def check_dockerfile():
    problems = []
    ins = dockerfile_instructions((DEPLOY / "Dockerfile").read_text())
    froms = [i for i, (w, _) in enumerate(ins) if w == "FROM"]
    args = dict(a.partition("=")[::2] for w, a in ins[:froms[0] if froms else 0] if w == "ARG")
    if len(froms) != 2:
        problems.append(f"{len(froms)} FROM lines, want 2 (build, runtime)")
    else:
        build, runtime = ins[froms[0]:froms[1]], ins[froms[1]:]
        if build[0][1] != "nvidia/cuda:${CUDA_VERSION}-devel-${CUDA_OS} AS build":
            problems.append(f"build stage is FROM {build[0][1]}, want the CUDA devel image AS build")
        if runtime[0][1] != "nvidia/cuda:${CUDA_VERSION}-runtime-${CUDA_OS}":
            problems.append(f"runtime stage is FROM {runtime[0][1]}, want the matching CUDA runtime image")
        if not args.get("CUDA_VERSION", "").startswith("13."):
            problems.append(f"CUDA_VERSION {args.get('CUDA_VERSION')!r} is not CUDA 13")
        if args.get("CUDA_OS") != "ubuntu24.04":
            problems.append(f"CUDA_OS {args.get('CUDA_OS')!r}, want ubuntu24.04 (gRPC 1.51, protobuf 3.21)")
        build_runs = " ".join(a for w, a in build if w == "RUN")
        if "scripts/setup" not in build_runs:
            problems.append("the build stage does not build with scripts/setup")
        missing = sorted(p for p in setup_packages() if p not in build_runs.split())
        if missing:
            problems.append(f"the build stage does not install {missing} (scripts/setup does)")
        runtime_runs = " ".join(a for w, a in runtime if w == "RUN")
        if "-dev" in runtime_runs:
            problems.append("the runtime stage installs a -dev package")
        users = [a for w, a in runtime if w == "USER"]
        if not users or users[-1] in ("root", "0"):
            problems.append("the runtime stage does not end as a non-root USER")
        exposed = {p for w, a in runtime if w == "EXPOSE" for p in a.split()}
        if not {"7420", "9420"} <= exposed:
            problems.append(f"EXPOSE {sorted(exposed)}, want 7420 and 9420")
        if not any(w == "VOLUME" and "/var/lib/kfuse" in a for w, a in runtime):
            problems.append("no VOLUME /var/lib/kfuse")
        copies = " ".join(a for w, a in runtime if w == "COPY")
        if "/out/bin/ /usr/local/bin/" not in copies:
            problems.append("the binaries are not copied together into /usr/local/bin (kfuse-worker beside kfused)")
        entry = [a for w, a in runtime if w == "ENTRYPOINT"]
        want = ["/usr/local/bin/kfused", "--address=0.0.0.0:7420", "--store=/var/lib/kfuse/kfuse.db"]
        if not entry or yaml.safe_load(entry[-1]) != want:
            problems.append(f"ENTRYPOINT {entry[-1] if entry else None}, want {want}")
    for p in problems:
        print("  problem: Dockerfile: " + p)
    print(f"  Dockerfile: {len(ins)} instructions, {len(problems)} problem(s)")
    return not problems


if __name__ == "__main__":
    if sys.argv[1:] == ["--write-configmap"]:
        write_configmap()
    elif sys.argv[1:] == ["--dockerfile"]:
        sys.exit(0 if check_dockerfile() else 1)
    elif sys.argv[1:]:
        sys.exit(__doc__)
    else:
        sys.exit(0 if check() else 1)
