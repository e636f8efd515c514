#!/usr/bin/env python3
"""Checks of deploy/ with the real tools: the Helm chart (helm lint and template), its values
schema, the kustomize base being what scripts/gen_kustomize_base.sh generates from it now, the
hand-written overlays' agreement with it, and the objects of both accepted by a real
kube-apiserver (server-side validation, helm install / upgrade / uninstall, kubectl apply -k),
from the binaries scripts/kube-tools.sh builds.

    deploy_test.py --build-dir DIR --kube-bin DIR <case>

Cases (one CTest each): see CASES below. Exit status 0 = pass, anything else = fail. Objects are
compared as JSON, never as text; only the generated base's files are compared as text, with the
generator's own output.
"""
import argparse
import difflib
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

try:
    import yaml
except ImportError:  # pragma: no cover - the README's test command installs python3-yaml
    sys.exit("deploy_test.py needs PyYAML (Debian: python3-yaml)")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CHART = os.path.join(ROOT, "deploy", "helm", "hami-cpp")
KUSTOMIZE = os.path.join(ROOT, "deploy", "kustomize")
OVERLAYS = ["base", "overlays/servicemonitor", "overlays/clusterip", "overlays/heterogeneous"]


class ControlPlane:
    """etcd + kube-apiserver + kube-controller-manager (build/bin/hami-kube-control-plane)."""

    def __init__(self, ctx):
        self.dir = tempfile.mkdtemp(prefix="hami_cp_", dir=ctx.tmp)
        self.proc = subprocess.Popen(
            [os.path.join(ctx.build_dir, "bin", "hami-kube-control-plane"), "--kube-bin", ctx.kube_bin,
             "--dir", self.dir], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.kubeconfig = None
        for line in self.proc.stdout:
            if line.startswith("kubeconfig: "):
                self.kubeconfig = line.split(": ", 1)[1].strip()
            if line.strip() == "ready":
                break
        if self.kubeconfig is None or self.proc.poll() is not None:
            raise AssertionError("the control plane did not start (see the output above)")
        self.audit_log = os.path.join(self.dir, "audit.log")

    def token_kubeconfig(self, token):
        """A kubeconfig that authenticates with `token` alone (the administrator's has a client
        certificate, which the API server would take first)."""
        with open(self.kubeconfig) as f:
            admin = yaml.safe_load(f)
        cfg = {"apiVersion": "v1", "kind": "Config", "clusters": admin["clusters"],
               "users": [{"name": "token", "user": {"token": token}}],
               "contexts": [{"name": "token", "context": {"cluster": admin["clusters"][0]["name"], "user": "token"}}],
               "current-context": "token"}
        path = os.path.join(self.dir, f"kubeconfig-token-{time.monotonic_ns()}")
        with open(path, "w") as f:
            json.dump(cfg, f)
        return path

    def stop(self):
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()


class Context:
    def __init__(self, build_dir, kube_bin):
        self.build_dir = build_dir
        self.kube_bin = kube_bin
        self.kubectl_bin = os.path.join(kube_bin, "kubectl")
        self.helm_bin = os.path.join(kube_bin, "helm")
        self.tmp = tempfile.mkdtemp(prefix="hami_deploy_")
        # helm keeps its state under these; none of the user's own.
        self.env = dict(os.environ, HELM_CACHE_HOME=os.path.join(self.tmp, "helm-cache"),
                        HELM_CONFIG_HOME=os.path.join(self.tmp, "helm-config"),
                        HELM_DATA_HOME=os.path.join(self.tmp, "helm-data"), KUBECONFIG="/dev/null")

    def run(self, argv, stdin=None, check=True):
        p = subprocess.run(argv, input=stdin, capture_output=True, text=True, env=self.env)
        if check and p.returncode != 0:
            raise AssertionError(f"{' '.join(argv)} failed ({p.returncode}):\n{p.stderr}{p.stdout}")
        return p

    @staticmethod
    def objects(yaml_text):
        return [d for d in yaml.safe_load_all(yaml_text) if d]

    def values_file(self, values):
        path = os.path.join(self.tmp, f"values-{time.monotonic_ns()}.json")
        with open(path, "w") as f:
            json.dump(values, f)  # JSON is YAML
        return path

    def helm_argv(self, values=None, release="hami", extra=()):
        argv = [self.helm_bin, "template", release, CHART, "--namespace", "kube-system"]
        if values is not None:
            argv += ["-f", self.values_file(values)]
        return argv + list(extra)

    def helm(self, values=None, release="hami", extra=()):
        return self.objects(self.run(self.helm_argv(values, release, extra)).stdout)

    def kubectl(self, cp, *args, check=True, stdin=None):
        return self.run([self.kubectl_bin, "--kubeconfig", cp.kubeconfig] + list(args), stdin=stdin,
                        check=check)

    def kustomize(self, name):
        return self.objects(self.run([self.kubectl_bin, "kustomize", os.path.join(KUSTOMIZE, name)]).stdout)


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

GEN_BASE = "bash scripts/gen_kustomize_base.sh"


def check_generated_base(ctx):
    """deploy/kustomize/base is, file by file and byte for byte, what scripts/gen_kustomize_base.sh
    writes from the chart with this helm now."""
    generated = os.path.join(ctx.tmp, "generated-base")
    ctx.run(["bash", os.path.join(ROOT, "scripts", "gen_kustomize_base.sh"), "--helm", ctx.helm_bin,
             "--out", generated])
    committed = os.path.join(KUSTOMIZE, "base")
    want, have = set(os.listdir(generated)), set(os.listdir(committed))
    problems = [f"{n}: generated, but not in deploy/kustomize/base" for n in sorted(want - have)]
    problems += [f"{n}: in deploy/kustomize/base, but not generated" for n in sorted(have - want)]
    for name in sorted(want & have):
        with open(os.path.join(generated, name)) as f:
            new = f.read().splitlines()
        with open(os.path.join(committed, name)) as f:
            old = f.read().splitlines()
        if new != old:
            lines = list(difflib.unified_diff(old, new, "deploy/kustomize/base/" + name, "generated/" + name,
                                              lineterm=""))
            problems.append("\n".join(lines[:40] + (["..."] if len(lines) > 40 else [])))
    if problems:
        raise AssertionError("deploy/kustomize/base is not what the chart renders now: run `" + GEN_BASE +
                             "` and commit the result.\n" + "\n".join(problems))
    print(f"deploy/kustomize/base == `{GEN_BASE}`: {len(want)} files")


def case_helm_matches_kustomize(ctx):
    """The kustomize base is generated from the chart (check_generated_base: a chart change without
    regenerating fails here, naming the command) and builds into exactly the chart's default
    objects; the values that mirror the hand-written overlays render the overlays. (The base is
    the chart rendered for a Kubernetes 1.32 cluster: its kube-scheduler image is the cluster's
    release.)"""
    check_generated_base(ctx)
    base = ctx.kustomize("base")
    pinned = ["--kube-version", "v1.32.0"]
    assert_same_objects(base, ctx.helm(extra=pinned), ("kustomize base", "helm defaults"))
    assert_same_objects(ctx.kustomize("overlays/servicemonitor"), ctx.helm({"prometheus": {"enabled": True}}, extra=pinned),
                        ("overlay servicemonitor", "helm prometheus.enabled"))
    clusterip = {"scheduler": {"service": {"type": "ClusterIP"}}, "devicePlugin": {"service": {"type": "ClusterIP"}}}
    assert_same_objects(ctx.kustomize("overlays/clusterip"), ctx.helm(clusterip, extra=pinned),
                        ("overlay clusterip", "helm service types ClusterIP"))
    every = {"devices": {v: {"enabled": True} for v in [
        "ascend", "iluvatar", "hygon", "cambricon", "metax", "mthreads", "enflame", "kunlun",
        "awsneuron", "amd", "vastai", "biren"]}}
    assert_same_objects(ctx.kustomize("overlays/heterogeneous"), ctx.helm(every, extra=pinned),
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
    # global.imageTag is hami-cpp's release, not kube-scheduler's: that one follows the cluster.
    kube_scheduler = container(sched, "kube-scheduler")["image"]
    assert kube_scheduler.startswith("registry.example.com/kube-scheduler:v1."), kube_scheduler
    assert not kube_scheduler.endswith(":v9"), kube_scheduler
    # The cluster's release without a distribution's suffix (k3s, EKS, GKE) or a missing "v";
    # the image's own tag wins over all.
    for version, tag in [("v1.30.4+k3s1", "v1.30.4"), ("v1.29.3-eks-adc7111", "v1.29.3"),
                         ("v1.28.5-gke.1217000", "v1.28.5"), ("v1.31.0", "v1.31.0"),
                         ("1.32.1", "v1.32.1")]:
        rendered = ctx.helm(values, extra=["--kube-version", version])
        image = container(find(rendered, "Deployment", "hami-scheduler"), "kube-scheduler")["image"]
        assert image == "registry.example.com/kube-scheduler:" + tag, (version, image)
    # Services as HAMi's chart has them: NodePort, and the ports name the Service's port too.
    ports = {"scheduler": {"service": {"monitorPort": 32001, "schedulerPort": 32002}},
             "devicePlugin": {"service": {"httpPort": 32003}}}
    rendered = ctx.helm(ports)
    sched_svc = find(rendered, "Service", "hami-scheduler")["spec"]
    assert sched_svc["type"] == "NodePort", sched_svc
    assert [(p["name"], p["port"], p.get("nodePort")) for p in sched_svc["ports"]] == \
        [("http", 443, 32002), ("monitor", 32001, 32001)], sched_svc["ports"]
    mon_svc = find(rendered, "Service", "hami-device-plugin-monitor")["spec"]
    assert mon_svc["type"] == "NodePort" and mon_svc["ports"][0]["port"] == 32003 and \
        mon_svc["ports"][0]["nodePort"] == 32003, mon_svc
    lb = ctx.helm({"scheduler": {"service": {"type": "LoadBalancer"}}})
    assert find(lb, "Service", "hami-scheduler")["spec"]["type"] == "LoadBalancer"
    # The monitor under a copied HAMi values file: the runtime class that gives it NVML, and
    # SYS_PTRACE kept although HAMi's securityContext (SYS_ADMIN alone) replaces ours.
    v210 = hami_values(os.path.join(ROOT, "tests", "deploy", "hami-values", "v2.10.0.yaml"))
    v210["devicePlugin"]["runtimeClassName"] = "nvidia"
    monitor = find(ctx.helm(v210), "DaemonSet", "hami-monitor")
    assert monitor["spec"]["template"]["spec"].get("runtimeClassName") == "nvidia", monitor["spec"]
    caps = container(monitor, "vgpu-monitor")["securityContext"]["capabilities"]
    assert caps["add"] == ["SYS_ADMIN", "SYS_PTRACE"] and caps["drop"] == ["ALL"], caps
    # (null removes a default key in Helm's merge.)
    privileged = {"devicePlugin": {"monitor": {"securityContext": {
        "privileged": True, "capabilities": None, "allowPrivilegeEscalation": None}}}}
    sc = container(find(ctx.helm(privileged), "DaemonSet", "hami-monitor"), "vgpu-monitor")["securityContext"]
    assert sc == {"privileged": True}, sc
    # Vendors scheduled by default as in HAMi's chart: all but Ascend and Iluvatar.
    defaults = ctx.helm()
    managed = find(defaults, "ConfigMap", "hami-scheduler")["data"]["config.yaml"]
    device_config = find(defaults, "ConfigMap", "hami-scheduler-device")["data"]["device-config.yaml"]
    for res in ["amd.com/gpu", "aws.amazon.com/neuron", "birentech.com/gpu", "cambricon.com/vmlu",
                "enflame.com/vgcu", "hygon.com/dcunum", "kunlunxin.com/xpu", "metax-tech.com/sgpu",
                "mthreads.com/vgpu", "vastaitech.com/va"]:
        assert "- name: " + res in managed, res
    for section in ["amd", "awsneuron", "biren", "cambricon", "enflame", "hygon", "kunlun", "metax",
                    "mthreads", "vastai"]:
        assert "\n" + section + ":" in "\n" + device_config, section
    assert "huawei.com/Ascend910B3" not in managed and "iluvatar.ai" not in managed, managed
    assert "vnpus" not in device_config and "iluvatars" not in device_config, device_config
    # Settings HAMi's chart takes beyond its defaults: the scheduler's nodeSelector, extraEnvs as
    # a list of EnvVar objects (or as NAME: value pairs), host networking, a RuntimeClass.
    more = {"scheduler": {"nodeSelector": {"role": "control"}},
            "devicePlugin": {"hostNetwork": True, "createRuntimeClass": True, "runtimeClassName": "nvidia",
                             "extraEnvs": [{"name": "A", "value": "1"},
                                           {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
                             "monitor": {"extraEnvs": {"C": "3"}}}}
    rendered = ctx.helm(more)
    assert find(rendered, "Deployment", "hami-scheduler")["spec"]["template"]["spec"]["nodeSelector"] == \
        {"role": "control"}
    plugin = find(rendered, "DaemonSet", "hami-device-plugin")
    pod = plugin["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True and pod["dnsPolicy"] == "ClusterFirstWithHostNet", pod
    env = container(plugin, "device-plugin")["env"]
    assert {"name": "A", "value": "1"} in env and \
        {"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}} in env, env
    assert {"name": "C", "value": "3"} in container(find(rendered, "DaemonSet", "hami-monitor"),
                                                    "vgpu-monitor")["env"]
    rc = find(rendered, "RuntimeClass", "nvidia")
    assert rc["handler"] == "nvidia", rc
    assert not [o for o in ctx.helm() if o["kind"] == "RuntimeClass"]
    assert "nodeSelector" not in find(ctx.helm(), "Deployment", "hami-scheduler")["spec"]["template"]["spec"]
    # topology-aware: the plugin publishes the GPU pair scores that policy ranks sets by.
    def plugin_env(v):
        ds = find(ctx.helm(v), "DaemonSet", "hami-device-plugin")
        return {e["name"]: e.get("value") for e in container(ds, "device-plugin").get("env", [])}
    for policy in ["topology-aware", "topology"]:
        env = plugin_env({"scheduler": {"defaultSchedulerPolicy": {"gpuSchedulerPolicy": policy}}})
        assert env.get("ENABLE_TOPOLOGY_SCORE") == "true", (policy, env)
    assert "ENABLE_TOPOLOGY_SCORE" not in plugin_env(None)
    # gpuOperatorToolkitReady: an init container waits for the GPU Operator's toolkit-ready file.
    plugin = find(ctx.helm({"devicePlugin": {"gpuOperatorToolkitReady": {"enabled": True}}}),
                  "DaemonSet", "hami-device-plugin")["spec"]["template"]["spec"]
    init = plugin["initContainers"][0]
    assert init["name"] == "toolkit-validation" and "toolkit-ready" in init["command"][2], init
    assert init["env"] == [{"name": "READY_DIR", "value": "/run/nvidia/validations"}], init
    assert init["securityContext"] == {"privileged": True, "runAsUser": 0}, init
    assert {"name": "toolkit-validations", "hostPath": {"path": "/run/nvidia/validations",
                                                        "type": "DirectoryOrCreate"}} in plugin["volumes"]
    assert "initContainers" not in find(ctx.helm(), "DaemonSet", "hami-device-plugin")["spec"]["template"]["spec"]
    # v2.7's devicePlugin.vgpuMonitor.resources: the monitor's resources.
    res = {"limits": {"memory": "300Mi"}}
    mon = find(ctx.helm({"devicePlugin": {"vgpuMonitor": {"resources": res}}}), "DaemonSet", "hami-monitor")
    assert container(mon, "vgpu-monitor")["resources"] == res, mon
    # gdrcopyEnabled, gdsEnabled, mofedEnabled: the plugin's environment when they are booleans.
    env = plugin_env({"devicePlugin": {"gdrcopyEnabled": True, "gdsEnabled": False, "mofedEnabled": None}})
    assert env.get("GDRCOPY_ENABLED") == "true" and env.get("GDS_ENABLED") == "false", env
    assert "MOFED_ENABLED" not in env and "GDRCOPY_ENABLED" not in plugin_env(None), env
    # deviceListStrategy reaches the plugin as upstream's DEVICE_LIST_STRATEGY.
    assert plugin_env(None)["DEVICE_LIST_STRATEGY"] == "envvar"
    env = plugin_env({"devicePlugin": {"deviceListStrategy": "volume-mounts,cdi-cri"}})
    assert env["DEVICE_LIST_STRATEGY"] == "volume-mounts,cdi-cri", env
    # With a CDI strategy the plugin mounts the host's CDI spec directories (it writes a spec per
    # MIG device it makes); without one it does not.
    def plugin_pod(v):
        return find(ctx.helm(v), "DaemonSet", "hami-device-plugin")["spec"]["template"]["spec"]
    cdi = plugin_pod({"devicePlugin": {"deviceListStrategy": "cdi-cri"}})
    mounts = container({"spec": {"template": {"spec": cdi}}}, "device-plugin")["volumeMounts"]
    assert {"name": "cdi-run", "mountPath": "/var/run/cdi"} in mounts, mounts
    assert {"name": "cdi-etc", "mountPath": "/etc/cdi", "readOnly": True} in mounts, mounts
    assert {"name": "cdi-run", "hostPath": {"path": "/var/run/cdi", "type": "DirectoryOrCreate"}} \
        in cdi["volumes"], cdi["volumes"]
    assert not [v for v in plugin_pod(None)["volumes"] if v["name"].startswith("cdi-")]
    # certManager.enabled: a self-signed Issuer and a Certificate into the Secret hami-scheduler
    # mounts, the CA injected into the webhook; hami-scheduler issues nothing itself.
    assert not [o for o in ctx.helm() if o["apiVersion"].startswith("cert-manager.io/")]
    for host, names, ips in [("10.0.0.7", [], ["10.0.0.7"]), ("hami.example.com", ["hami.example.com"], None)]:
        cm = ctx.helm({"scheduler": {"certManager": {"enabled": True},
                                     "admissionWebhook": {"customURL": {"enabled": True, "host": host}}}})
        cert = find(cm, "Certificate", "hami-scheduler-serving-cert")["spec"]
        assert cert["secretName"] == "hami-scheduler-tls", cert
        assert cert["dnsNames"] == ["hami-scheduler", "hami-scheduler.kube-system", "hami-scheduler.kube-system.svc",
                                    "hami-scheduler.kube-system.svc.cluster.local"] + names, cert
        assert cert.get("ipAddresses") == ips, cert
        assert cert["issuerRef"] == {"kind": "Issuer", "name": "hami-scheduler-selfsigned-issuer"}, cert
        assert find(cm, "Issuer", "hami-scheduler-selfsigned-issuer")["spec"] == {"selfSigned": {}}
        hook = find(cm, "MutatingWebhookConfiguration", "hami-webhook")["metadata"]
        assert hook["annotations"]["cert-manager.io/inject-ca-from"] == "kube-system/hami-scheduler-serving-cert", hook
        sched = find(cm, "Deployment", "hami-scheduler")
        cmd = container(sched, "vgpu-scheduler-extender")["command"]
        assert "--cert_file=/tls/tls.crt" in cmd and "--key_file=/tls/tls.key" in cmd, cmd
        assert not [a for a in cmd if a.startswith("--webhook-cert")], cmd
        assert {"name": "tls", "secret": {"secretName": "hami-scheduler-tls"}} in \
            sched["spec"]["template"]["spec"]["volumes"], sched
    # A webhook reached at a custom URL: its host is in the certificate hami-scheduler issues.
    custom = {"scheduler": {"admissionWebhook": {"customURL": {"enabled": True, "host": "10.0.0.7"}}}}
    rendered = ctx.helm(custom)
    cmd = container(find(rendered, "Deployment", "hami-scheduler"), "vgpu-scheduler-extender")["command"]
    assert "--webhook-cert-extra-hosts=10.0.0.7" in cmd, cmd
    hook = find(rendered, "MutatingWebhookConfiguration", "hami-webhook")["webhooks"][0]["clientConfig"]
    assert hook["url"] == "https://10.0.0.7:31998/webhook", hook
    assert not any(a.startswith("--webhook-cert-extra-hosts") for a in
                   container(find(ctx.helm(), "Deployment", "hami-scheduler"),
                             "vgpu-scheduler-extender")["command"])
    # HAMi's values files of v2.7 to v2.10 pass the schema as they are; v2.7's spelling of the
    # device plugin's node selector is honoured.
    assert len(HAMI_VALUES) == 4, HAMI_VALUES
    for path in HAMI_VALUES:
        rendered = ctx.helm(hami_values(path))
        plugin = find(rendered, "DaemonSet", "hami-device-plugin")
        assert plugin["spec"]["template"]["spec"]["nodeSelector"] == {"gpu": "on"}, path
    v27 = hami_values(os.path.join(ROOT, "tests", "deploy", "hami-values", "v2.7.1.yaml"))
    v27["devicePlugin"]["nvidianodeSelector"] = {"accelerator": "nvidia"}
    daemonsets = [o for o in ctx.helm(v27) if o["kind"] == "DaemonSet"]  # plugin and monitor
    assert len(daemonsets) == 2, [key(d) for d in daemonsets]
    for d in daemonsets:
        assert d["spec"]["template"]["spec"]["nodeSelector"] == {"accelerator": "nvidia"}, key(d)
    own = {**values, "scheduler": {**values["scheduler"],
                                   "kubeScheduler": {"image": {"tag": "v1.30.0-custom"}}}}
    image = container(find(ctx.helm(own, extra=["--kube-version", "v1.30.4+k3s1"]), "Deployment",
                           "hami-scheduler"), "kube-scheduler")["image"]
    assert image == "registry.example.com/kube-scheduler:v1.30.0-custom", image
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
    names = {o["metadata"]["name"] for o in ctx.helm(release="gpu")}
    assert "gpu-hami-scheduler" in names and "gpu-hami-webhook" in names, names
    names = {o["metadata"]["name"] for o in ctx.helm({"fullnameOverride": "vgpu"})}
    assert "vgpu-scheduler" in names and "vgpu-device-plugin-monitor" in names, names
    # The webhook off: plain HTTP between kube-scheduler and the extender, no webhook object.
    objs = ctx.helm({"scheduler": {"admissionWebhook": {"enabled": False}}})
    assert not [o for o in objs if o["kind"] == "MutatingWebhookConfiguration"]
    cfg = find(objs, "ConfigMap", "hami-scheduler")["data"]["config.yaml"]
    assert "urlPrefix: http://127.0.0.1:443" in cfg and "enableHTTPS" not in cfg, cfg


def case_helm_lint(ctx):
    """`helm lint --strict` of the chart with its defaults and with every switch on."""
    print(ctx.run([ctx.helm_bin, "lint", "--strict", CHART]).stdout)
    for values in SWITCHES:
        p = ctx.run([ctx.helm_bin, "lint", "--strict", CHART, "-f", ctx.values_file(values)])
        assert "0 chart(s) failed" in p.stdout, p.stdout
    print(f"helm lint --strict: defaults and {len(SWITCHES)} value sets pass")


def schema_error_names(stderr, key):
    """helm names a schema violation by its JSON pointer or by its dotted path."""
    parts = key.split(".")
    pointer = "/" + "/".join(parts)
    return key in stderr or pointer in stderr or (
        len(parts) > 1 and "/" + "/".join(parts[:-1]) in stderr and f"'{parts[-1]}'" in stderr)


def case_helm_schema(ctx):
    """Keys of features hami-cpp lacks, bad values and typos are refused by helm, naming the key;
    the MIG strategies hami-device-plugin serves are accepted and reach its DaemonSet."""
    refused = [
        ({"devicePlugin": {"deviceListStrategy": "volume_mounts"}}, "devicePlugin.deviceListStrategy"),
        ({"devicePlugin": {"migStrategy": "dynamic"}}, "devicePlugin.migStrategy"),
        ({"devices": {"ascend": {"enabled": "yes"}}}, "devices.ascend.enabled"),
        ({"devices": {"hygon": {"customresources": "hygon.com/dcunum"}}},
         "devices.hygon.customresources"),
        ({"mockDevicePlugin": {"enabled": True}}, "mockDevicePlugin.enabled"),
        ({"scheduler": {"defaultSchedulerPolicy": {"nodeSchedulerPolicy": "fastest"}}},
         "scheduler.defaultSchedulerPolicy.nodeSchedulerPolicy"),
        ({"devicePlugin": {"deviceSplitCount": 0}}, "devicePlugin.deviceSplitCount"),
        ({"scheduler": {"replcias": 2}}, "scheduler.replcias"),
        ({"devices": {"nvidia": {"gpuCorePolicy": "strict"}}}, "devices.nvidia.gpuCorePolicy"),
    ]
    for values, named in refused:
        p = ctx.run(ctx.helm_argv(values), check=False)
        assert p.returncode == 1, f"{values} was accepted"
        assert schema_error_names(p.stderr, named), f"{values}: the error does not name {named}:\n{p.stderr}"
        print(f"refused {json.dumps(values)}: {p.stderr.strip().splitlines()[-1]}")
    # The MIG strategies NVIDIA's plugin has reach hami-device-plugin as upstream's chart passes
    # them; with one other than none the NVIDIA runtime also hands it the MIG monitor devices.
    # none, the plugin's default, is left out so that a MIG_STRATEGY in extraEnvs still counts.
    for strategy in ["none", "single", "mixed"]:
        plugin = container(find(ctx.helm({"devicePlugin": {"migStrategy": strategy}}), "DaemonSet",
                                "hami-device-plugin"), "device-plugin")
        flags = [a for a in plugin["command"] if a.startswith("--mig-strategy")]
        monitor = [e for e in plugin["env"] if e["name"] == "NVIDIA_MIG_MONITOR_DEVICES"]
        if strategy == "none":
            assert not flags and not monitor, (strategy, plugin)
        else:
            assert flags == [f"--mig-strategy={strategy}"], (strategy, plugin["command"])
            assert monitor == [{"name": "NVIDIA_MIG_MONITOR_DEVICES", "value": "all"}], (strategy, plugin["env"])
    assert not [a for a in container(find(ctx.helm(), "DaemonSet", "hami-device-plugin"),
                                     "device-plugin")["command"] if a.startswith("--mig-strategy")]
    print("accepted devicePlugin.migStrategy none, single, mixed")
    # HAMi's own defaults for keys hami-cpp does not use are accepted (a values file copied
    # from HAMi's chart keeps working).
    upstream_style = {
        "mluResourceName": "cambricon.com/vmlu", "dcuResourceName": "hygon.com/dcunum",
        "podSecurityPolicy": {"enabled": False},
        "scheduler": {"patch": {"image": {"registry": "docker.io", "repository": "jettech/kube-webhook-certgen",
                                          "tag": "v1.5.2", "pullPolicy": "IfNotPresent", "pullSecrets": []}},
                      "certManager": {"enabled": False}},
        "devicePlugin": {"passDeviceSpecsEnabled": True, "nvidiaDriverRoot": "auto", "gdsEnabled": None},
        "devices": {"kunlun": {"enabled": True, "customresources": ["kunlunxin.com/xpu"]},
                    "ascend": {"enabled": False}},
    }
    ctx.helm(upstream_style)


# Value sets that between them turn every switch of the values schema away from its default.
SWITCHES = [
    {"prometheus": {"enabled": True},
     "scheduler": {"replicas": 3, "patch": {"enabled": False}, "leaderElect": True,
                   "service": {"type": "ClusterIP"}},
     "devicePlugin": {"service": {"type": "ClusterIP"}}},
    {"scheduler": {"admissionWebhook": {"enabled": False}}},
    {"scheduler": {"admissionWebhook": {"failurePolicy": "Fail", "whitelistNamespaces": ["kube-system"]}},
     "devicePlugin": {"nodeConfiguration": {"externalConfigName": "my-node-config"}}},
    {"devices": {v: {"enabled": True} for v in [
        "ascend", "iluvatar", "hygon", "cambricon", "metax", "mthreads", "enflame", "kunlun",
        "awsneuron", "amd", "vastai", "biren"]}, "legacyMetrics": True},
    {"global": {"imageRegistry": "registry.example.com", "imageTag": "v9", "gpuHookPath": "/opt/hook",
                "labels": {"team": "ml"}}, "fullnameOverride": "vgpu"},
    {"scheduler": {"certManager": {"enabled": True},
                   "admissionWebhook": {"customURL": {"enabled": True, "host": "hami.example.com"}}},
     "devicePlugin": {"deviceListStrategy": "volume-mounts,cdi-cri", "migStrategy": "mixed",
                      "gpuOperatorToolkitReady": {"enabled": True}, "gdsEnabled": True,
                      "nvidiaHookPath": "/usr/bin/nvidia-cdi-hook"}},
    {"scheduler": {"nodeSelector": {"role": "control"},
                   "admissionWebhook": {"customURL": {"enabled": True, "host": "10.0.0.7"}},
                   "service": {"type": "LoadBalancer"}},
     "devicePlugin": {"hostNetwork": True, "createRuntimeClass": True, "runtimeClassName": "nvidia",
                      "extraEnvs": [{"name": "B", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]}},
]


# HAMi's own values files (their keys and defaults, tests/deploy/hami-values): an operator
# switching from HAMi installs with one unchanged.
HAMI_VALUES = sorted(glob.glob(os.path.join(ROOT, "tests", "deploy", "hami-values", "*.yaml")))


def hami_values(path):
    with open(path) as f:
        return yaml.safe_load(f)


def renderings(ctx):
    """(name, objects) of every rendering the checks against the API server use."""
    out = [("helm-defaults", ctx.helm())]
    out += [(f"helm-switches-{i}", ctx.helm(v)) for i, v in enumerate(SWITCHES)]
    out += [("hami-values-" + os.path.basename(p)[:-5], ctx.helm(hami_values(p))) for p in HAMI_VALUES]
    out += [("kustomize-" + n.replace("/", "-"), ctx.kustomize(n)) for n in OVERLAYS]
    return out


def leaf_keys(values, prefix=""):
    """Dotted paths of a values tree's leaves (an empty map is a leaf)."""
    if isinstance(values, dict) and values:
        for k, v in values.items():
            yield from leaf_keys(v, f"{prefix}{k}.")
    else:
        yield prefix[:-1]


# The table of HAMi's chart keys ("HAMi's chart, key by key").
KEY_TABLE_DOC = os.path.join("docs", "deploy.md")


def key_table_patterns():
    """(pattern, row) of docs/deploy.md's table of HAMi's chart keys. A cell's later keys that
    start with '.' are relative to its first key's parent; '*' at the end matches any rest."""
    with open(os.path.join(ROOT, KEY_TABLE_DOC)) as f:
        text = f.read()
    begin, end = "<!-- upstream-keys: begin -->", "<!-- upstream-keys: end -->"
    assert text.count(begin) == 1 and text.count(end) == 1, f"{KEY_TABLE_DOC}: the key table's markers"
    out = []
    for row in text[text.index(begin):text.index(end)].splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        assert cells[1] in ("same", "different", "no effect"), row
        assert cells[1] == "same" or cells[2], f"{KEY_TABLE_DOC}: say why: {row}"
        names = [n for n in cells[0].split("`")[1::2]]
        parent = names[0].rsplit(".", 1)[0] if "." in names[0] else ""
        for n in names:
            out.append((parent + n if n.startswith(".") else n, row))
    return out


def case_upstream_keys(ctx):
    """docs/deploy.md's key table names every key of HAMi's values files (v2.7 to v2.10), and no
    key that none of them has."""
    keys = set()
    for path in HAMI_VALUES:
        keys |= set(leaf_keys(hami_values(path)))
    patterns = key_table_patterns()

    def matches(pattern, k):
        return k.startswith(pattern[:-1]) if pattern.endswith("*") else k == pattern
    missing = sorted(k for k in keys if not any(matches(p, k) for p, _ in patterns))
    assert not missing, f"{KEY_TABLE_DOC}'s key table lacks: {missing}"
    stale = [p for p, _ in patterns if not any(matches(p, k) for k in keys)]
    assert not stale, f"{KEY_TABLE_DOC}'s key table names keys HAMi's chart does not have: {stale}"
    print(f"{KEY_TABLE_DOC}: {len(patterns)} key patterns cover the {len(keys)} keys of {len(HAMI_VALUES)} HAMi values files")


def needs_crd(o):
    return o["apiVersion"].startswith("monitoring.coreos.com/")


def install_stand_in_crds(ctx, cp):
    """The CRDs of tests/deploy/crds (cert-manager's kinds), established."""
    ctx.kubectl(cp, "apply", "-f", os.path.join(ROOT, "tests", "deploy", "crds"))
    ctx.kubectl(cp, "wait", "--for=condition=Established", "--timeout=60s",
                "crd/issuers.cert-manager.io", "crd/certificates.cert-manager.io")


def case_server_validation(ctx):
    """Every object of every rendering accepted by a real kube-apiserver's validation (strict
    field validation: an unknown or misspelt field is an error), without being stored."""
    with ControlPlane(ctx) as cp:
        install_stand_in_crds(ctx, cp)
        for name, objs in renderings(ctx):
            objs = [o for o in objs if not needs_crd(o)]
            p = ctx.kubectl(cp, "apply", "--dry-run=server", "--validate=strict", "-f", "-",
                            stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": objs}))
            print(f"{name}: {len(objs)} objects accepted")
            assert p.stdout.count("(server dry run)") == len(objs), p.stdout
        # The check can fail: a misspelt field and a wrong type are refused, naming them.
        bad = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "x", "namespace": "default"},
               "spec": {"selector": {"matchLabels": {"a": "b"}},
                        "template": {"metadata": {"labels": {"a": "b"}},
                                     "spec": {"hostPid": True, "containers": [
                                         {"name": "c", "image": "i", "ports": [{"containerPort": "80"}]}]}}}}
        p = ctx.kubectl(cp, "apply", "--dry-run=server", "--validate=strict", "-f", "-",
                        stdin=json.dumps(bad), check=False)
        assert p.returncode != 0 and ("hostPid" in p.stderr or "containerPort" in p.stderr), p.stderr
        print(f"a bad DaemonSet is refused: {p.stderr.strip()}")
        bad = {"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
               "metadata": {"name": "x", "namespace": "default"},
               "spec": {"secretName": "s", "dnsName": ["a"], "issuerRef": {"name": "i"}}}
        p = ctx.kubectl(cp, "apply", "--dry-run=server", "--validate=strict", "-f", "-",
                        stdin=json.dumps(bad), check=False)
        assert p.returncode != 0 and "dnsName" in p.stderr, p.stderr
        print(f"a bad Certificate is refused: {p.stderr.strip()}")


def stored_objects(ctx, cp, objs):
    """The stored copy of each object, or None where it does not exist."""
    out = []
    for o in objs:
        args = ["get", o["kind"] + "." + o["apiVersion"].split("/")[0] if "/" in o["apiVersion"] else o["kind"],
                o["metadata"]["name"], "-o", "json", "--ignore-not-found"]
        ns = o["metadata"].get("namespace")
        if ns:
            args += ["-n", ns]
        text = ctx.kubectl(cp, *args).stdout.strip()
        out.append(json.loads(text) if text else None)
    return out


def case_helm_install(ctx):
    """helm install of the chart into a real API server (every object accepted and stored as
    rendered), helm upgrade with changed values (the change reaches the stored objects), and
    helm uninstall leaving none of its objects behind."""
    with ControlPlane(ctx) as cp:
        helm = [ctx.helm_bin, "--kubeconfig", cp.kubeconfig, "--namespace", "kube-system"]
        rendered = [o for o in ctx.helm() if not needs_crd(o)]
        installed = ctx.run(helm + ["install", "hami", CHART, "--wait=false"]).stdout
        print(installed)
        # The notes say how to label a GPU node, and name no key as unused for the defaults.
        assert "kubectl label node <gpu-node> gpu=on" in installed, installed
        assert "no effect" not in installed, installed
        stored = stored_objects(ctx, cp, rendered)
        missing = [key(o) for o, s in zip(rendered, stored) if s is None]
        assert not missing, f"not stored: {missing}"
        for o, got in zip(rendered, stored):
            assert got["metadata"].get("labels", {}).get("app.kubernetes.io/managed-by") == "Helm" or \
                got["metadata"].get("annotations", {}).get("meta.helm.sh/release-name") == "hami", key(o)
        print(f"helm install: {len(rendered)} objects stored")

        values = {"scheduler": {"defaultSchedulerPolicy": {"nodeSchedulerPolicy": "spread"}, "replicas": 2},
                  "devicePlugin": {"deviceSplitCount": 4}, "dra": {"enabled": False},
                  "dcuResourceName": "hygon.com/dcunum"}
        upgraded = ctx.run(helm + ["upgrade", "hami", CHART, "-f", ctx.values_file(values)]).stdout
        print(upgraded)
        # Keys of HAMi's chart that do nothing here are named at install, not silently ignored.
        notes = upgraded[upgraded.index("have no effect"):]
        assert "\n  dra\n" in notes and "\n  dcuResourceName\n" in notes, upgraded
        sched = json.loads(ctx.kubectl(cp, "-n", "kube-system", "get", "deployment", "hami-scheduler",
                                       "-o", "json").stdout)
        assert sched["spec"]["replicas"] == 2, sched["spec"]
        cmd = next(c for c in sched["spec"]["template"]["spec"]["containers"]
                   if c["name"] == "vgpu-scheduler-extender")["command"]
        assert "--node-scheduler-policy=spread" in cmd, cmd
        dev = json.loads(ctx.kubectl(cp, "-n", "kube-system", "get", "configmap", "hami-scheduler-device",
                                     "-o", "json").stdout)["data"]["device-config.yaml"]
        assert "deviceSplitCount: 4" in dev, dev
        revisions = ctx.run(helm + ["history", "hami", "-o", "json"]).stdout
        assert len(json.loads(revisions)) == 2, revisions
        print("helm upgrade: replicas, policy and device config changed in the stored objects")

        upgraded = [o for o in ctx.helm(values) if not needs_crd(o)]
        print(ctx.run(helm + ["uninstall", "hami", "--wait"]).stdout)
        left = [key(o) for o, s in zip(upgraded, stored_objects(ctx, cp, upgraded)) if s is not None]
        assert not left, f"left behind by helm uninstall: {left}"
        releases = ctx.run(helm + ["list", "-a", "-o", "json"]).stdout
        assert json.loads(releases) == [], releases
        print(f"helm uninstall: none of the {len(upgraded)} objects is left")


def case_kubectl_apply(ctx):
    """`kubectl apply -k` of the base and of each overlay into a real API server: every object is
    stored as rendered, a second apply changes nothing, moving from the base to an overlay
    changes only what differs, and `kubectl delete -k` leaves nothing. A ServiceAccount of the
    base may do what its role allows and nothing else."""
    with ControlPlane(ctx) as cp:
        for name in ["base", "overlays/clusterip", "overlays/heterogeneous"]:
            path = os.path.join(KUSTOMIZE, name)
            print(ctx.kubectl(cp, "apply", "-k", path).stdout)
            rendered = ctx.kustomize(name)
            stored = json.loads(ctx.kubectl(cp, "get", "-k", path, "-o", "json").stdout)["items"]
            assert len(stored) == len(rendered), (len(stored), len(rendered))
            stored_by_key = {key(o): o for o in stored}
            for o in rendered:
                got = stored_by_key.get(key(o))
                assert got is not None, f"{key(o)} not stored"
                assert o["metadata"].get("labels") == got["metadata"].get("labels"), key(o)
                for field in o:
                    if field in ("metadata", "status"):
                        continue
                    problems = [d for d in diff(o[field], got[field], f"{'/'.join(key(o))}/{field}")
                                if "only in the first" in d or "!=" in d]
                    assert not problems, "\n".join(problems)
            again = ctx.kubectl(cp, "apply", "-k", path).stdout
            changed = [l for l in again.splitlines() if l and not l.endswith("unchanged")]
            assert not changed, f"a second apply changed objects:\n{again}"
            if name == "base":
                # A ServiceAccount of the base may do what its role allows and nothing else.
                token = ctx.kubectl(cp, "-n", "kube-system", "create", "token", "hami-monitor").stdout.strip()
                as_monitor = [ctx.kubectl_bin, "--kubeconfig", cp.token_kubeconfig(token)]
                ctx.run(as_monitor + ["get", "pods", "-A"])
                p = ctx.run(as_monitor + ["get", "nodes"], check=False)
                assert p.returncode != 0 and "forbidden" in p.stderr, p.stderr
                print(f"hami-monitor's token: get pods allowed, get nodes refused: {p.stderr.strip()}")
        # Everything the overlays made goes with delete -k.
        for name in ["overlays/heterogeneous", "base"]:
            ctx.kubectl(cp, "delete", "-k", os.path.join(KUSTOMIZE, name), "--ignore-not-found", "--wait")
        every = ctx.kustomize("overlays/heterogeneous") + ctx.kustomize("overlays/clusterip") + ctx.kustomize("base")
        left = [key(o) for o, s in zip(every, stored_objects(ctx, cp, every)) if s is not None]
        assert not left, f"left behind by kubectl delete -k: {left}"
        print("kubectl delete -k: nothing left")


CASES = {name[5:]: fn for name, fn in globals().items() if name.startswith("case_")}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--build-dir", required=True)
    parser.add_argument("--kube-bin", required=True, help="what `bash scripts/kube-tools.sh` prints")
    parser.add_argument("case", choices=sorted(CASES))
    args = parser.parse_args()
    ctx = Context(os.path.abspath(args.build_dir), os.path.abspath(args.kube_bin))
    try:
        for tool in (ctx.helm_bin, ctx.kubectl_bin):
            if not os.access(tool, os.X_OK):
                raise AssertionError(f"{tool} is missing: run `bash scripts/kube-tools.sh`")
        CASES[args.case](ctx)
    finally:
        shutil.rmtree(ctx.tmp, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
