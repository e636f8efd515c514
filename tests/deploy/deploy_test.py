#!/usr/bin/env python3
"""Checks of deploy/: the kustomize base and overlays, the Helm chart, their agreement, the
values schema, the Kubernetes OpenAPI schemas, and `kubectl apply -k` against the simulated API
server.

    deploy_test.py --build-dir DIR <case>

Cases (one CTest each): helm_matches_kustomize, helm_values, helm_schema, openapi,
kubectl_apply. Exit status 0 = pass, 77 = skipped (kubectl is not installed: it cannot be
installed from Debian), anything else = fail. Objects are compared as JSON, never as text: every
rendering goes through `helm-render --to-json`.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHART = os.path.join(ROOT, "deploy", "helm", "hami-cpp")
KUSTOMIZE = os.path.join(ROOT, "deploy", "kustomize")
SKIP = 77


class Skip(Exception):
    pass


class Context:
    def __init__(self, build_dir):
        self.build_dir = build_dir
        self.helm_render = os.path.join(build_dir, "bin", "helm-render")
        self.kubectl = shutil.which("kubectl")
        self.tmp = tempfile.mkdtemp(prefix="hami_deploy_")

    def run(self, argv, stdin=None, check=True, env=None):
        p = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=env)
        if check and p.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} failed ({p.returncode}):\n{p.stderr}{p.stdout}")
        return p

    def to_json(self, yaml_text):
        return json.loads(self.run([self.helm_render, "--to-json"], stdin=yaml_text).stdout)

    def helm(self, values=None, extra=()):
        argv = [self.helm_render]
        if values is not None:
            path = os.path.join(self.tmp, "values.json")
            with open(path, "w") as f:
                json.dump(values, f)  # JSON is YAML
            argv += ["-f", path]
        return self.to_json(self.run(argv + list(extra) + [CHART]).stdout)

    def need_kubectl(self):
        if not self.kubectl:
            raise Skip("kubectl is not installed (Debian does not package it)")

    def kustomize(self, name):
        self.need_kubectl()
        return self.to_json(self.run([self.kubectl, "kustomize", os.path.join(KUSTOMIZE, name)]).stdout)


def key(o):
    md = o["metadata"]
    return (o["apiVersion"], o["kind"], md.get("namespace", ""), md["name"])


def diff(a, b, path=""):
    """Human-readable differences between two JSON values (empty when equal)."""
    out = []
    if type(a) is not type(b):
        return [f"{path}: {json.dumps(a)[:120]} != {json.dumps(b)[:120]}"]
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in b:
                out.append(f"{path}/{k}: only in the first ({json.dumps(a[k])[:120]})")
            elif k not in a:
                out.append(f"{path}/{k}: only in the second ({json.dumps(b[k])[:120]})")
            else:
                out += diff(a[k], b[k], f"{path}/{k}")
    elif isinstance(a, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items != {len(b)} items"]
        for i, (x, y) in enumerate(zip(a, b)):
            out += diff(x, y, f"{path}/{i}")
    elif a != b:
        out.append(f"{path}: {json.dumps(a)[:120]} != {json.dumps(b)[:120]}")
    return out


def assert_same_objects(first, second, what):
    a = {key(o): o for o in first}
    b = {key(o): o for o in second}
    problems = [f"only in {what[0]}: {k}" for k in sorted(set(a) - set(b))]
    problems += [f"only in {what[1]}: {k}" for k in sorted(set(b) - set(a))]
    for k in sorted(set(a) & set(b)):
        problems += [f"{'/'.join(k)}{d}" for d in diff(a[k], b[k])]
    if problems:
        raise AssertionError(f"{what[0]} and {what[1]} differ:\n  " + "\n  ".join(problems))
    print(f"{what[0]} == {what[1]}: {len(a)} objects")


def find(objects, kind, name):
    for o in objects:
        if o["kind"] == kind and o["metadata"]["name"] == name:
            return o
    raise AssertionError(f"no {kind} {name} among {[key(o) for o in objects]}")


def container(obj, name):
    for c in obj["spec"]["template"]["spec"]["containers"]:
        if c["name"] == name:
            return c
    raise AssertionError(f"no container {name}")


# ---- cases -----------------------------------------------------------------------------------

def case_helm_matches_kustomize(ctx):
    """The chart's defaults render the kustomize base exactly; the values that mirror the
    overlays render the overlays."""
    base = ctx.kustomize("base")
    assert_same_objects(base, ctx.helm(), ("kustomize base", "helm defaults"))
    assert_same_objects(ctx.kustomize("overlays/servicemonitor"), ctx.helm({"prometheus": {"enabled": True}}),
                        ("overlay servicemonitor", "helm prometheus.enabled"))
    nodeport = {"scheduler": {"service": {"type": "NodePort"}}, "devicePlugin": {"service": {"type": "NodePort"}}}
    assert_same_objects(ctx.kustomize("overlays/nodeport"), ctx.helm(nodeport),
                        ("overlay nodeport", "helm service types NodePort"))
    every = {"devices": {v: {"enabled": True} for v in [
        "ascend", "iluvatar", "hygon", "cambricon", "metax", "mthreads", "enflame", "kunlun",
        "awsneuron", "amd", "vastai", "biren"]}}
    assert_same_objects(ctx.kustomize("overlays/heterogeneous"), ctx.helm(every),
                        ("overlay heterogeneous", "helm every devices.<vendor>.enabled"))
    kinds = sorted({o["kind"] for o in base})
    for want in ["ClusterRole", "ClusterRoleBinding", "ConfigMap", "DaemonSet", "Deployment",
                 "MutatingWebhookConfiguration", "Role", "RoleBinding", "Service", "ServiceAccount"]:
        assert want in kinds, f"the base has no {want}"


def case_helm_values(ctx):
    """HAMi's values keys reach the objects they configure."""
    values = {
        "global": {"imageRegistry": "registry.example.com", "imageTag": "v9", "gpuHookPath": "/opt/hook",
                   "labels": {"team": "ml"}},
        "resourceMem": "example.com/gpumem",
        "schedulerName": "gpu-scheduler",
        "scheduler": {
            "defaultSchedulerPolicy": {"nodeSchedulerPolicy": "spread", "gpuSchedulerPolicy": "binpack"},
            "kubeQPS": 200, "kubeBurst": "400", "kubeTimeout": 20, "nodeLockRetryTimeout": "10s",
            "nodeLabelSelector": {"gpu": "on", "zone": "a"},
            "leaderElect": True, "replicas": 2,
            "patch": {"enabled": False},
            "service": {"httpTargetPort": 9443},
            "admissionWebhook": {"failurePolicy": "Fail", "whitelistNamespaces": ["kube-system"]},
        },
        "devicePlugin": {"deviceSplitCount": 4, "deviceMemoryScaling": 1.5,
                         "nodeConfiguration": {"externalConfigName": "my-node-config"}},
        "devices": {"nvidia": {"gpuCorePolicy": "force"}, "ascend": {"enabled": True},
                    "hygon": {"enabled": True, "customresources": ["hygon.com/dcunum", "hygon.com/dcumem"]},
                    "metax": {"enabled": True}},
        "metaxsGPUTopologyAware": "true",
        "legacyMetrics": True,
    }
    objs = ctx.helm(values)
    sched = find(objs, "Deployment", "hami-scheduler")
    ext = container(sched, "vgpu-scheduler-extender")
    assert ext["image"] == "registry.example.com/hami-cpp:v9", ext["image"]
    cmd = ext["command"]
    for want in ["--http_bind=0.0.0.0:9443", "--cert_file=/tls/tls.crt", "--key_file=/tls/tls.key",
                 "--scheduler-name=gpu-scheduler", "--node-scheduler-policy=spread",
                 "--gpu-scheduler-policy=binpack", "--kube-qps=200", "--kube-burst=400", "--kube-timeout=20s",
                 "--node-lock-retry-timeout=10s", "--node-label-selector=gpu=on,zone=a", "--legacy-metrics=true",
                 "--enable-ascend=true"]:
        assert want in cmd, f"{want} not in {cmd}"
    assert not any(a.startswith("--webhook-cert-secret") for a in cmd), cmd
    assert sched["spec"]["replicas"] == 2
    assert any(v.get("secret", {}).get("secretName") == "hami-scheduler-tls"
               for v in sched["spec"]["template"]["spec"]["volumes"])
    assert container(sched, "kube-scheduler")["image"] == "registry.example.com/kube-scheduler:v9"
    find(objs, "PodDisruptionBudget", "hami-scheduler")
    cfg = find(objs, "ConfigMap", "hami-scheduler")["data"]["config.yaml"]
    assert "urlPrefix: https://127.0.0.1:9443" in cfg and "schedulerName: gpu-scheduler" in cfg, cfg
    assert "- name: example.com/gpumem" in cfg, cfg
    for want in ["- name: huawei.com/Ascend910B3-memory", "- name: huawei.com/Ascend310P",
                 "- name: hygon.com/dcumem"]:
        assert want in cfg, f"{want} not in {cfg}"
    assert "iluvatar.ai" not in cfg, cfg
    assert not any(a.startswith("--enable-iluvatar") for a in cmd), cmd
    dev = find(objs, "ConfigMap", "hami-scheduler-device")["data"]["device-config.yaml"]
    for want in ["resourceMemoryName: example.com/gpumem", "deviceSplitCount: 4",
                 "deviceMemoryScaling: 1.5", "gpuCorePolicy: force", "\nhygon: {}\n",
                 "\nvnpus:\n  hamiVnpuCore: false\n", "\nmetax:\n  sgpuTopologyAware: true\n"]:
        assert want in dev, f"{want} not in {dev}"
    hook = find(objs, "MutatingWebhookConfiguration", "hami-webhook")["webhooks"][0]
    assert hook["failurePolicy"] == "Fail"
    assert {"key": "kubernetes.io/metadata.name", "operator": "NotIn", "values": ["kube-system"]} in \
        hook["namespaceSelector"]["matchExpressions"], hook
    assert hook["clientConfig"]["service"]["port"] == 443
    plugin = find(objs, "DaemonSet", "hami-device-plugin")
    assert {"name": "HOOK_PATH", "value": "/opt/hook"} in container(plugin, "device-plugin")["env"]
    assert {"name": "node-config", "configMap": {"name": "my-node-config"}} in plugin["spec"]["template"]["spec"]["volumes"]
    assert not [o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "hami-device-plugin"]
    monitor = find(objs, "DaemonSet", "hami-monitor")
    assert "--legacy-metrics=true" in container(monitor, "vgpu-monitor")["command"]
    assert all(o["metadata"]["labels"].get("team") == "ml" for o in objs)
    # Another release name and fullnameOverride name the objects as HAMi's chart does.
    names = {o["metadata"]["name"] for o in ctx.helm(extra=["--name", "gpu"])}
    assert "gpu-hami-scheduler" in names and "gpu-hami-webhook" in names, names
    names = {o["metadata"]["name"] for o in ctx.helm({"fullnameOverride": "vgpu"})}
    assert "vgpu-scheduler" in names and "vgpu-device-plugin-monitor" in names, names
    # The webhook off: plain HTTP between kube-scheduler and the extender, no webhook object.
    objs = ctx.helm({"scheduler": {"admissionWebhook": {"enabled": False}}})
    assert not [o for o in objs if o["kind"] == "MutatingWebhookConfiguration"]
    cfg = find(objs, "ConfigMap", "hami-scheduler")["data"]["config.yaml"]
    assert "urlPrefix: http://127.0.0.1:443" in cfg and "enableHTTPS" not in cfg, cfg


def case_helm_schema(ctx):
    """Keys of features hami-cpp lacks, bad values and typos are refused, naming the key."""
    refused = [
        ({"scheduler": {"certManager": {"enabled": True}}}, "scheduler.certManager.enabled"),
        ({"devicePlugin": {"migStrategy": "mixed"}}, "devicePlugin.migStrategy"),
        ({"devices": {"ascend": {"enabled": "yes"}}}, "devices.ascend.enabled"),
        ({"devices": {"hygon": {"customresources": "hygon.com/dcunum"}}},
         "devices.hygon.customresources"),
        ({"mockDevicePlugin": {"enabled": True}}, "mockDevicePlugin.enabled"),
        ({"scheduler": {"defaultSchedulerPolicy": {"nodeSchedulerPolicy": "fastest"}}},
         "scheduler.defaultSchedulerPolicy.nodeSchedulerPolicy"),
        ({"devicePlugin": {"deviceSplitCount": 0}}, "devicePlugin.deviceSplitCount"),
        ({"scheduler": {"replcias": 2}}, "replcias"),
        ({"devices": {"nvidia": {"gpuCorePolicy": "strict"}}}, "devices.nvidia.gpuCorePolicy"),
    ]
    for values, named in refused:
        path = os.path.join(ctx.tmp, "bad.json")
        with open(path, "w") as f:
            json.dump(values, f)
        p = ctx.run([ctx.helm_render, "-f", path, CHART], check=False)
        assert p.returncode == 1, f"{values} was accepted"
        assert named in p.stderr, f"{values}: the error does not name {named}:\n{p.stderr}"
        print(f"refused {json.dumps(values)}: {p.stderr.strip().splitlines()[-1]}")
    # HAMi's own defaults for keys hami-cpp does not use are accepted (a values file copied
    # from HAMi's chart keeps working).
    upstream_style = {
        "mluResourceName": "cambricon.com/vmlu", "hcuResourceName": "hygon.com/hcunum",
        "podSecurityPolicy": {"enabled": False},
        "scheduler": {"patch": {"image": {"registry": "docker.io", "repository": "jettech/kube-webhook-certgen",
                                          "tag": "v1.5.2", "pullPolicy": "IfNotPresent", "pullSecrets": []}},
                      "certManager": {"enabled": False}},
        "devicePlugin": {"passDeviceSpecsEnabled": True, "nvidiaDriverRoot": "auto", "gdsEnabled": None},
        "devices": {"kunlun": {"enabled": True, "customresources": ["kunlunxin.com/xpu"]},
                    "ascend": {"enabled": False}},
    }
    ctx.helm(upstream_style)


def case_openapi(ctx):
    """Every object of the chart's renderings (and of the kustomize renderings, with kubectl)
    against the Kubernetes OpenAPI schemas (npm kubernetes-models, v1.27.1 and v1.33.0)."""
    files = []

    def save(name, objs):
        path = os.path.join(ctx.tmp, name + ".json")
        with open(path, "w") as f:
            json.dump(objs, f)
        files.append(path)

    save("helm-defaults", ctx.helm())
    save("helm-everything", ctx.helm({"prometheus": {"enabled": True},
                                      "scheduler": {"replicas": 3, "patch": {"enabled": False},
                                                    "service": {"type": "NodePort"}},
                                      "devicePlugin": {"service": {"type": "NodePort"}}}))
    if ctx.kubectl:
        for name in ["base", "overlays/servicemonitor", "overlays/nodeport", "overlays/heterogeneous"]:
            save("kustomize-" + name.replace("/", "-"), ctx.kustomize(name))
    work = os.path.join(ctx.build_dir, "deploy-openapi")
    p = ctx.run(["bash", os.path.join(ROOT, "tests", "deploy", "openapi", "run.sh"), work] + files, check=False)
    print(p.stdout[-3000:])
    if p.returncode != 0:
        raise AssertionError(f"schema validation failed:\n{p.stderr}{p.stdout}")
    # The validator itself must be able to fail: a misspelt field and a wrong type.
    bad = [{"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "x"},
            "spec": {"selector": {}, "template": {"spec": {"hostPid": True,
                                                            "containers": [{"name": "c", "ports": [{"containerPort": "80"}]}]}}}}]
    path = os.path.join(ctx.tmp, "bad.json")
    with open(path, "w") as f:
        json.dump(bad, f)
    p = ctx.run(["bash", os.path.join(ROOT, "tests", "deploy", "openapi", "run.sh"), work, path], check=False)
    assert p.returncode == 1 and "hostPid: unknown field" in p.stdout and "must be integer" in p.stdout, p.stdout


def start_apiserver(ctx, kubeconfig):
    server = subprocess.Popen([os.path.join(ctx.build_dir, "bin", "hami-sim-apiserver"), "--port", "0",
                               "--self-signed", "--token", "admin", "--rbac", "--write-kubeconfig", kubeconfig],
                              stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = server.stdout.readline()
    assert "listening on" in line, line
    return server


def case_kubectl_apply(ctx):
    """`kubectl apply -k` of the base and of each overlay into a simulated API server of its own
    (HTTPS, RBAC on): every object is stored as rendered, and a second apply changes nothing.
    (Each rendering gets a fresh server: applying an overlay over the base makes kubectl send
    strategic merge patches, which the simulated server does not merge by key yet.)"""
    ctx.need_kubectl()
    for name in ["base", "overlays/nodeport", "overlays/heterogeneous"]:
        kubeconfig = os.path.join(ctx.tmp, "kubeconfig")
        server = start_apiserver(ctx, kubeconfig)
        try:
            k = [ctx.kubectl, "--kubeconfig", kubeconfig]
            path = os.path.join(KUSTOMIZE, name)
            print(ctx.run(k + ["apply", "-k", path]).stdout)
            rendered = ctx.kustomize(name)
            stored = json.loads(ctx.run(k + ["get", "-k", path, "-o", "json"]).stdout)["items"]
            assert len(stored) == len(rendered), (len(stored), len(rendered))
            stored_by_key = {key(o): o for o in stored}
            for o in rendered:
                got = stored_by_key.get(key(o))
                assert got is not None, f"{key(o)} not stored"
                for field in o:
                    if field in ("metadata", "status"):
                        continue
                    d = diff(o[field], got[field], f"{'/'.join(key(o))}/{field}")
                    assert not d, "\n".join(d)
                assert o["metadata"].get("labels") == got["metadata"].get("labels"), key(o)
            again = ctx.run(k + ["apply", "-k", path]).stdout
            changed = [l for l in again.splitlines() if l and not l.endswith("unchanged")]
            assert not changed, f"a second apply changed objects:\n{again}"
            if name != "base":
                continue
            # A ServiceAccount of the base may do what its role allows and nothing else.
            token = ctx.run(k + ["-n", "kube-system", "create", "token", "hami-monitor"]).stdout.strip()
            as_monitor = k + ["--token", token]
            ctx.run(as_monitor + ["get", "pods", "-A"])
            p = ctx.run(as_monitor + ["get", "nodes"], check=False)
            assert p.returncode != 0 and "forbidden" in p.stderr, p.stderr
            print(f"hami-monitor's token: get pods allowed, get nodes refused: {p.stderr.strip()}")
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=30)


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build-dir", required=True)
    parser.add_argument("case", choices=sorted(CASES))
    args = parser.parse_args()
    ctx = Context(os.path.abspath(args.build_dir))
    try:
        if not os.path.exists(ctx.helm_render):
            raise AssertionError(f"{ctx.helm_render} is missing (built from tests/deploy/helm_render)")
        CASES[args.case](ctx)
    except Skip as e:
        print(f"SKIP: {e}")
        return SKIP
    finally:
        shutil.rmtree(ctx.tmp, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
